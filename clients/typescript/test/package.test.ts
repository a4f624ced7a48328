/** The package's entry points, as an application imports them (by the package's name). */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";

describe("the package", () => {
  it("exports the client from its main entry point, with no runtime dependency", async () => {
    const main = await import("@tether/client");
    assert.equal(typeof main.TetherClient, "function");
    assert.equal(typeof main.subscribe, "function");
    assert.equal(typeof main.TetherError, "function");
    const manifest = JSON.parse(readFileSync(new URL(import.meta.resolve("@tether/client/package.json")), "utf8")) as {
      dependencies?: Record<string, string>;
      peerDependenciesMeta: Record<string, { optional: boolean }>;
    };
    assert.equal(manifest.dependencies, undefined);
    assert.equal(manifest.peerDependenciesMeta["react"]?.optional, true);
  });

  it("keeps the React hook in an entry point of its own", async () => {
    const url = import.meta.resolve("@tether/client/react");
    assert.match(url, /\/dist\/src\/react\/index\.js$/);
    const main = await import("@tether/client");
    assert.ok(!("useTetherSession" in main));
  });
});
