/**
 * The reconnecting stream: against a real server (read to the end; SIGKILLed and restarted
 * mid-subscription), and against a loopback fake that cuts a frame in half or answers 503.
 */

import assert from "node:assert/strict";
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from "node:http";
import { after, before, describe, it } from "node:test";

import { TetherClient, TetherError, type StreamEvent } from "../src/index.js";
import { TestServer, eventually } from "./server.js";

let server: TestServer;
let client: TetherClient;

before(async () => {
  server = await TestServer.start();
  client = new TetherClient({ baseUrl: server.url });
});

after(async () => {
  await server.stop();
});

function seqs(events: StreamEvent[]): number[] {
  return events.filter((event) => event.event !== "progress").map((event) => Number(event.id));
}

describe("a real server's stream", () => {
  it("reads a session at rest to its end, each record once, in order", async () => {
    const session = `rest-${process.pid}`;
    await client.send("assistant", "me", { body: "what time is it?", session });
    const events: StreamEvent[] = [];
    for await (const event of client.stream("assistant", "me", { session, follow: false })) events.push(event);
    const { head } = await client.session("assistant", "me", { session });
    assert.deepEqual(seqs(events), Array.from({ length: head }, (_, i) => i + 1));
    assert.equal(events[0]?.event, "conversation_created");
    assert.equal((events[0]?.data as { seq: number }).seq, 1);
  });

  it("resumes after a given event id", async () => {
    const session = `resume-${process.pid}`;
    await client.send("assistant", "me", { body: "what time is it?", session });
    const events: StreamEvent[] = [];
    for await (const event of client.stream("assistant", "me", { session, follow: false, lastEventId: "3" })) {
      events.push(event);
    }
    assert.equal(seqs(events)[0], 4);
  });

  it("resumes the stream view inside a record's events, each event once", async () => {
    const session = `view-${process.pid}`;
    await client.send("assistant", "me", { body: "what time is it?", session });
    const read = async (lastEventId?: string): Promise<StreamEvent[]> => {
      const events: StreamEvent[] = [];
      const stream = client.stream("assistant", "me", { session, view: "stream", follow: false, lastEventId });
      for await (const event of stream) events.push(event);
      return events;
    };
    const whole = await read();
    assert.ok(whole.length > 4);
    assert.ok(whole.every((event) => /^\d+:\d+$/.test(event.id)));
    const cut = Math.floor(whole.length / 2);
    const rest = await read(whole[cut - 1]?.id);
    assert.deepEqual(rest, whole.slice(cut));
  });

  it("stops without an error when its signal aborts", async () => {
    const controller = new AbortController();
    const seen: StreamEvent[] = [];
    const session = `abort-${process.pid}`;
    const sub = client.subscribe("assistant", "me", { onEvent: (event) => seen.push(event) }, { session, signal: controller.signal });
    await client.send("assistant", "me", { body: "hi", session });
    await eventually(async () => seen.length > 0);
    controller.abort();
    await sub.done;
    assert.equal(sub.lastEventId, seen.at(-1)?.id);
  });

  it("fails for good on a refusal (not retried)", async () => {
    let failure: TetherError | undefined;
    const sub = client.subscribe(
      "nobody",
      "me",
      { onEvent: () => assert.fail("no event"), onError: (error) => (failure = error) },
      { backoff: { initialMs: 1 } },
    );
    await sub.done;
    assert.equal(failure?.type, "unknown_agent");
    assert.equal(failure?.status, 404);
  });
});

describe("a server SIGKILLed mid-subscription", () => {
  it("is followed across its restart, without a gap or a duplicate", { skip: !!process.env["TETHER_URL"] && "needs a server of its own" }, async () => {
    // A run still researching when the server dies: the restarted server takes it over once
    // its claim lapses (a one-second lease), and the subscription sees it finish.
    const own = await TestServer.start({
      ownProcess: true,
      env: { TETHER_DEMO_RESEARCH_SECONDS: "2" },
      args: ["--lease", "1"],
    });
    try {
      const owned = new TetherClient({ baseUrl: own.url });
      const session = "killed";
      const events: StreamEvent[] = [];
      const retries: TetherError[] = [];
      let opened = 0;
      const sub = owned.subscribe(
        "assistant",
        "me",
        { onEvent: (event) => events.push(event), onError: (error) => assert.fail(error) },
        {
          session,
          backoff: { initialMs: 50, maxMs: 500 },
          onOpen: () => (opened += 1),
          onRetry: (error) => retries.push(error),
        },
      );
      const { submissionId } = await owned.dispatch("assistant", "me", { body: "research tides", session });
      await eventually(async () => events.some((event) => event.event === "tool_called"));

      await own.kill();
      await eventually(async () => retries.length > 0);
      await own.launch();

      await eventually(async () => (await owned.submission(submissionId, { wait: true })).status === "settled", 60);
      await owned.send("assistant", "me", { body: "what time is it?", session });
      const { head } = await owned.session("assistant", "me", { session });
      await eventually(async () => seqs(events).at(-1) === head);
      sub.close();
      await sub.done;

      assert.ok(opened >= 2, `reconnected (${opened} connections)`);
      assert.deepEqual(seqs(events), Array.from({ length: head }, (_, i) => i + 1));
      const stored = await owned.records("assistant", "me", { session, limit: 1000 });
      assert.deepEqual(
        events.filter((event) => event.event !== "progress").map((event) => (event.data as { hash: string }).hash),
        stored.records.map((record) => record.hash),
      );
    } finally {
      await own.stop();
    }
  });
});

/** A loopback SSE server answering each request with the next scripted handler. */
async function fake(script: ((response: ServerResponse) => void)[]): Promise<{ url: string; seen: IncomingHttpHeaders[]; close: () => Promise<void> }> {
  const seen: IncomingHttpHeaders[] = [];
  const http: Server = createServer((request, response) => {
    seen.push(request.headers);
    const step = script[seen.length - 1];
    if (step === undefined) {
      response.writeHead(500).end();
      return;
    }
    step(response);
  });
  await new Promise<void>((ready) => http.listen(0, "127.0.0.1", ready));
  const address = http.address();
  const port = typeof address === "object" && address !== null ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () =>
      new Promise<void>((done) => {
        http.closeAllConnections();
        http.close(() => done());
      }),
  };
}

const sse = { "content-type": "text/event-stream" };

describe("a stream cut by the network", () => {
  it("resumes after the last whole event when a frame is cut in half", async () => {
    const server = await fake([
      (response) => {
        response.writeHead(200, sse);
        // The second frame's id arrives without its event: resuming after it would skip it.
        response.write("retry: 2000\nid: 1\nevent: a\ndata: {\"n\":1}\n\nid: 2\nevent: b\n");
        setImmediate(() => response.socket?.destroy());
      },
      (response) => {
        response.writeHead(200, sse);
        response.end("id: 2\nevent: b\ndata: {\"n\":2}\n\n: heartbeat\nevent: progress\ndata: {}\n\nid: 3\ndata: {\"n\":3}\n\n");
      },
    ]);
    try {
      const cut = new TetherClient({ baseUrl: server.url });
      const events: StreamEvent[] = [];
      for await (const event of cut.stream("a", "b", { follow: false, backoff: { initialMs: 1 } })) events.push(event);
      assert.deepEqual(
        events.map((event) => [event.id, event.event, event.data]),
        [
          ["1", "a", { n: 1 }],
          ["2", "b", { n: 2 }],
          ["2", "progress", {}],
          ["3", "message", { n: 3 }],
        ],
      );
      assert.equal(server.seen[0]?.["last-event-id"], undefined);
      assert.equal(server.seen[1]?.["last-event-id"], "1");
    } finally {
      await server.close();
    }
  });

  it("retries a 503 with backoff, and gives up after maxAttempts", async () => {
    const unavailable = (response: ServerResponse): void => {
      response.writeHead(503, { "content-type": "application/json" });
      response.end(JSON.stringify({ error: { type: "store_unavailable", message: "later", details: {} } }));
    };
    const server = await fake([
      unavailable,
      (response) => {
        response.writeHead(200, sse);
        response.end("id: 1\ndata: 1\n\n");
      },
      unavailable,
      unavailable,
    ]);
    try {
      const flaky = new TetherClient({ baseUrl: server.url, token: "s3cret" });
      const delays: number[] = [];
      const events: StreamEvent[] = [];
      await assert.rejects(
        (async () => {
          const stream = flaky.stream("a", "b", {
            backoff: { initialMs: 1, factor: 3, maxAttempts: 2 },
            onRetry: (_, delay) => delays.push(delay),
          });
          for await (const event of stream) events.push(event);
        })(),
        (error: unknown) => error instanceof TetherError && error.type === "store_unavailable" && error.status === 503,
      );
      assert.deepEqual(events.map((event) => event.data), [1]);
      // One failure, then (after an event reset the count) a clean end while following, one more failure.
      assert.deepEqual(delays, [1, 1, 3]);
      assert.equal(server.seen[0]?.authorization, "Bearer s3cret");
      assert.equal(server.seen[2]?.["last-event-id"], "1");
    } finally {
      await server.close();
    }
  });
});
