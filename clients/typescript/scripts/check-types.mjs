// Regenerates the OpenAPI types into a temporary file and fails if they differ from the
// checked-in src/schema.ts: a route changed on the server (openapi.json rewritten by
// `TETHER_UPDATE_OPENAPI=1 pytest tests/http/test_openapi.py`) without `npm run generate-types`.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const script = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).scripts["generate-types"];
const [command, ...args] = script.split(/\s+/);
const output = args.indexOf("-o");
if (command !== "openapi-typescript" || output === -1) throw new Error(`unexpected generate-types script: ${script}`);
const scratch = mkdtempSync(join(tmpdir(), "tether-schema-"));
try {
  const fresh = join(scratch, "schema.ts");
  args[output + 1] = fresh;
  execFileSync(join(root, "node_modules", ".bin", "openapi-typescript"), args, { cwd: root, stdio: "pipe" });
  const checkedIn = readFileSync(join(root, "src", "schema.ts"), "utf8");
  if (readFileSync(fresh, "utf8") !== checkedIn) {
    console.error(
      "src/schema.ts is not what openapi.json generates: run `npm run generate-types` in clients/typescript and commit it.",
    );
    process.exit(1);
  }
  console.log("src/schema.ts matches openapi.json");
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
