/**
 * `useTetherSession`'s state, through its reducer (React itself is not installed for the
 * tests: the hook is type-checked, its logic is the reducer).
 */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { TetherError, type StreamEvent } from "../src/index.js";
import { initialSessionState, sessionReducer, type SessionAction, type SessionState } from "../src/react/state.js";

function event(id: string, name = "user_message"): StreamEvent {
  return { id, event: name, data: { seq: Number(id) } };
}

function run(actions: SessionAction[], state: SessionState = initialSessionState): SessionState {
  return actions.reduce(sessionReducer, state);
}

describe("sessionReducer", () => {
  it("goes from connecting to open, and keeps the events in order", () => {
    const state = run([{ type: "connect" }, { type: "open" }, { type: "event", event: event("1") }, { type: "event", event: event("2") }]);
    assert.equal(state.status, "open");
    assert.deepEqual(state.events.map((e) => e.id), ["1", "2"]);
    assert.equal(state.lastEventId, "2");
  });

  it("never repeats an event, but keeps progress that shares its record's id", () => {
    const state = run([
      { type: "event", event: event("1") },
      { type: "event", event: event("1") },
      { type: "event", event: event("1", "progress") },
      { type: "event", event: event("2") },
    ]);
    assert.deepEqual(state.events.map((e) => [e.id, e.event]), [
      ["1", "user_message"],
      ["1", "progress"],
      ["2", "user_message"],
    ]);
  });

  it("says reconnecting while retrying, open again with the next event, and error once failed", () => {
    const cut = new TetherError("network", "cut", 0);
    let state = run([{ type: "connect" }, { type: "open" }, { type: "event", event: event("1") }, { type: "retry", error: cut }]);
    assert.equal(state.status, "reconnecting");
    assert.equal(state.error, cut);
    state = run([{ type: "open" }, { type: "event", event: event("2") }], state);
    assert.equal(state.status, "open");
    const refused = new TetherError("forbidden", "no", 403);
    state = run([{ type: "fail", error: refused }, { type: "close" }], state);
    assert.equal(state.status, "error");
    assert.equal(state.error, refused);
    assert.equal(state.events.length, 2);
  });

  it("closes, and resets to nothing", () => {
    const closed = run([{ type: "connect" }, { type: "event", event: event("1") }, { type: "close" }]);
    assert.equal(closed.status, "closed");
    assert.deepEqual(run([{ type: "reset" }], closed), initialSessionState);
    assert.equal(run([{ type: "connect", lastEventId: "9" }]).lastEventId, "9");
  });
});
