/**
 * A real `tether serve --demo` for the tests: started from the repository's virtualenv
 * (`TETHER_BIN`, else `../../.venv-test/bin/tether`) on a free loopback port with a data
 * directory of its own, or the server at `TETHER_URL` if set. It can be SIGKILLed and
 * started again on the same port and data.
 */

import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const packageRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** The `tether` executable the tests start. */
export function tetherBin(): string {
  return process.env["TETHER_BIN"] ?? join(packageRoot, "..", "..", ".venv-test", "bin", "tether");
}

/** A loopback port nothing listens on now. */
export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close(() => resolvePort(port));
    });
  });
}

/** Ask `check` again until it holds, for at most `seconds` (what another process does is polled). */
export async function eventually<T>(check: () => Promise<T | undefined | false>, seconds = 30): Promise<T> {
  const deadline = Date.now() + seconds * 1000;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) throw new Error(`not within ${seconds}s`, { cause: last });
    await new Promise((wake) => setTimeout(wake, 50));
  }
}

/** A server the tests talk to. */
export class TestServer {
  readonly url: string;
  private child: ChildProcess | undefined;
  private output = "";

  private constructor(
    readonly port: number,
    private readonly dataDir: string | undefined,
    private readonly env: Record<string, string>,
    private readonly args: string[] = [],
  ) {
    this.url = process.env["TETHER_URL"] && dataDir === undefined ? process.env["TETHER_URL"] : `http://127.0.0.1:${port}`;
  }

  /** Whether this one was started here (so it can be killed), not found at `TETHER_URL`. */
  get owned(): boolean {
    return this.dataDir !== undefined;
  }

  /** The server at `TETHER_URL`, else a new one; `ownProcess` always starts one. */
  static async start(
    options: { env?: Record<string, string>; args?: string[]; ownProcess?: boolean } = {},
  ): Promise<TestServer> {
    if (process.env["TETHER_URL"] && !options.ownProcess) return new TestServer(0, undefined, {});
    const dataDir = mkdtempSync(join(tmpdir(), "tether-ts-"));
    const server = new TestServer(await freePort(), dataDir, options.env ?? {}, options.args);
    await server.launch();
    return server;
  }

  /** Start the process (again, on the same port and data), and wait until it is ready. */
  async launch(): Promise<void> {
    if (this.dataDir === undefined) throw new Error("not a server of this test's own");
    const args = ["serve", "--demo", "--host", "127.0.0.1", "--port", String(this.port), "--store", `sqlite:///${this.dataDir}`, ...this.args];
    const child = spawn(tetherBin(), args, {
      env: { ...process.env, ...this.env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.child = child;
    child.stdout?.on("data", (chunk: Buffer) => (this.output += chunk.toString()));
    child.stderr?.on("data", (chunk: Buffer) => (this.output += chunk.toString()));
    const exited = new Promise<never>((_, reject) => {
      child.once("exit", (code) => reject(new Error(`tether serve exited (${code}):\n${this.output}`)));
      child.once("error", (error) =>
        reject(new Error(`cannot start ${tetherBin()} (set TETHER_BIN, or TETHER_URL for a running server)`, { cause: error })),
      );
    });
    exited.catch(() => undefined);
    await Promise.race([
      exited,
      eventually(async () => (await fetch(`${this.url}/readyz`)).ok, 60),
    ]);
  }

  /** SIGKILL the process and wait for it to be gone. */
  async kill(): Promise<void> {
    const child = this.child;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise<void>((done) => child.once("exit", () => done()));
    child.kill("SIGKILL");
    await gone;
    this.child = undefined;
  }

  /** Stop the process and remove its data. */
  async stop(): Promise<void> {
    await this.kill();
    if (this.dataDir !== undefined) rmSync(this.dataDir, { recursive: true, force: true });
  }
}
