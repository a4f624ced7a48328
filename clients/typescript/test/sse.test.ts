/** The SSE parser, by the WHATWG rules, fed in arbitrary pieces. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { SseParser, type SseItem } from "../src/index.js";

function parseAll(chunks: string[], parser = new SseParser()): SseItem[] {
  return chunks.flatMap((chunk) => parser.feed(chunk));
}

describe("SseParser", () => {
  const text = "retry: 2000\n: heartbeat\nid: 7\nevent: user_message\ndata: {\"a\":\ndata: 1}\n\nevent: progress\ndata: {}\n\n";
  const expected: SseItem[] = [
    { kind: "retry", ms: 2000 },
    { kind: "event", value: { id: "7", event: "user_message", data: "{\"a\":\n1}" } },
    { kind: "event", value: { id: "7", event: "progress", data: "{}" } },
  ];

  it("reads fields, comments, multi-line data, and keeps the last id", () => {
    assert.deepEqual(parseAll([text]), expected);
  });

  it("gives the same items however the text is cut", () => {
    for (let size = 1; size < 8; size += 1) {
      const chunks = text.match(new RegExp(`[\\s\\S]{1,${size}}`, "g")) ?? [];
      assert.deepEqual(parseAll(chunks), expected, `chunks of ${size}`);
    }
  });

  it("takes CRLF and CR line ends, even a CRLF split between chunks", () => {
    assert.deepEqual(parseAll(["id: 1\r\ndata: x\r", "\n\r\nid: 2\rdata: y\r\r"]), [
      { kind: "event", value: { id: "1", event: "message", data: "x" } },
      { kind: "event", value: { id: "2", event: "message", data: "y" } },
    ]);
  });

  it("dispatches nothing for a frame without data, and ignores unknown fields and bad retries", () => {
    const parser = new SseParser();
    assert.deepEqual(parseAll(["id: 3\nevent: x\n\nfoo: bar\nretry: soon\ndata\n\n"], parser), [
      { kind: "event", value: { id: "3", event: "message", data: "" } },
    ]);
    assert.equal(parser.lastEventId, "3");
  });

  it("forgets a frame cut short on reset, and its id with it", () => {
    const parser = new SseParser("4");
    assert.deepEqual(parser.feed("id: 5\ndata: whole\n\nid: 6\nevent: half\n"), [
      { kind: "event", value: { id: "5", event: "message", data: "whole" } },
    ]);
    assert.equal(parser.lastEventId, "6");
    parser.reset();
    assert.equal(parser.lastEventId, "5");
    assert.deepEqual(parser.feed("data: after\n\n"), [{ kind: "event", value: { id: "5", event: "message", data: "after" } }]);
  });
});
