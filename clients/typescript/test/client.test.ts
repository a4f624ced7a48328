/** The client's operations against a real `tether serve --demo`. */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";

import { TetherClient, TetherError, isSettled } from "../src/index.js";
import { TestServer, eventually, freePort } from "./server.js";

let server: TestServer;
let client: TetherClient;
let run = 0;

/** A session of this test's own, so the tests share one server without meeting. */
function fresh(): string {
  run += 1;
  return `t${process.pid}-${run}`;
}

before(async () => {
  // research() holds its run until aborted: the abort test needs one running.
  server = await TestServer.start({ env: { TETHER_DEMO_RESEARCH_SECONDS: "30" } });
  client = new TetherClient({ baseUrl: server.url });
});

after(async () => {
  await server.stop();
});

describe("sending", () => {
  it("sends and waits for the settlement", async () => {
    const session = fresh();
    const answer = await client.send("assistant", "me", { body: "what time is it?", session });
    assert.ok(isSettled(answer));
    assert.equal(answer.status, "succeeded");
    assert.match(String(answer.result), /It is/);
    assert.equal(answer.session, session);
  });

  it("dispatches without waiting, then reads the submission", async () => {
    const accepted = await client.dispatch("assistant", "me", { body: "hello", session: fresh() });
    assert.ok(!isSettled(accepted));
    assert.ok(accepted.streamUrl);
    const settled = await client.submission(accepted.submissionId, { wait: true });
    assert.equal(settled.submissionId, accepted.submissionId);
    assert.equal(settled.status, "settled");
  });

  it("admits a message once per idempotency key", async () => {
    const session = fresh();
    const first = await client.dispatch("assistant", "me", { body: "hi", session }, { idempotencyKey: `k-${session}` });
    const again = await client.dispatch("assistant", "me", { body: "hi", session }, { idempotencyKey: `k-${session}` });
    assert.equal(again.submissionId, first.submissionId);
  });

  it("aborts a running session", async () => {
    const session = fresh();
    const accepted = await client.dispatch("assistant", "me", { body: "research tides", session });
    await eventually(async () => {
      const page = await client.records("assistant", "me", { session });
      return page.records.some((record) => record.kind === "tool_called");
    });
    const aborted = await client.abort("assistant", "me", { session });
    assert.deepEqual(aborted.aborted, [accepted.submissionId]);
    const settled = await client.submission(accepted.submissionId, { wait: true });
    assert.equal(settled.settlement?.status, "aborted");
  });
});

describe("sessions", () => {
  it("lists a session and reads it, its records and its messages", async () => {
    const session = fresh();
    const answer = await client.send("assistant", "me", { body: "hello there", session });
    const page = await client.sessions({ agent: "assistant", limit: 200 });
    assert.ok(page.sessions.some((item) => item.conversationId === answer.conversationId));
    const view = await client.session("assistant", "me", { session });
    assert.equal(view.conversationId, answer.conversationId);
    const records = await client.records("assistant", "me", { session, limit: 1000 });
    assert.equal(records.records.length, view.head);
    assert.deepEqual(
      records.records.map((record) => record.seq),
      records.records.map((_, index) => index + 1),
    );
    const messages = await client.messages("assistant", "me", { session });
    assert.ok(messages.messages.length >= 2);
  });

  it("sets, patches and searches by metadata and the words of messages", async () => {
    const session = fresh();
    const word = `w${Date.now().toString(36)}`;
    await client.send("assistant", "me", { body: `hello ${word}`, session, metadata: { customer: "acme", tier: 1 } });
    const patched = await client.patchMetadata("assistant", "me", { tier: null, vip: true }, { session });
    assert.deepEqual(patched.metadata, { customer: "acme", vip: true });
    const found = await client.sessions({ q: word.toUpperCase(), metadata: { vip: "true" } });
    assert.deepEqual(
      found.sessions.map((item) => item.session),
      [session],
    );
    assert.deepEqual(found.sessions[0]?.metadata, patched.metadata);
    const none = await client.sessions({ q: word, metadata: { customer: "globex" } });
    assert.equal(none.sessions.length, 0);
  });

  it("forks, exports and verifies a conversation", async () => {
    const answer = await client.send("assistant", "me", { body: "what time is it?", session: fresh() });
    const forked = await client.fork(answer.conversationId, 3, { session: fresh() });
    assert.notEqual(forked.conversationId, answer.conversationId);
    const lines = await client.export(forked.conversationId);
    assert.equal(lines[0]?.["kind"], "conversation_created");
    assert.ok(lines.length >= 4); // the three records kept, the fork's own, and the trailer
    const verified = await client.verify(answer.conversationId);
    assert.equal(verified.ok, true);
  });

  it("reports a session's usage, and refuses a usage query without a tenant", async () => {
    const answer = await client.send("assistant", "me", { body: "what time is it?", session: fresh() });
    const usage = await client.sessionUsage(answer.conversationId);
    assert.ok(usage.usage.calls > 0);
    const report = await client.usage({ session: answer.conversationId });
    assert.equal((report as { conversationId?: string }).conversationId, answer.conversationId);
    await assert.rejects(client.usage(), (error: unknown) => {
      assert.ok(error instanceof TetherError);
      assert.equal(error.status, 422);
      return true;
    });
  });
});

describe("the rest of the API", () => {
  it("answers the server's, the schedules', budgets', versions' and a session's other routes", async () => {
    assert.equal((await client.alive()).ok, true);
    assert.equal((await client.ready()).ready, true);
    assert.ok((await client.me()).subject !== undefined);
    assert.match(await client.metrics(), /tether_/);
    assert.ok(Array.isArray((await client.budgets()).budgets));
    assert.ok(Array.isArray((await client.versions()).versions));
    const session = fresh();
    const answer = await client.send("assistant", "me", { body: "what time is it?", session });
    assert.equal((await client.openSubmissions("assistant", "me", { session })).submissions.length, 0);
    const tree = await client.submissionTree(answer.submissionId);
    assert.equal(tree.submissionId, answer.submissionId);
    assert.ok(Array.isArray((await client.spans(answer.conversationId)).spans));
    const schedule = await client.addSchedule({
      id: `nightly-${session}`, agent: "assistant", instance: "me", every: 3600, body: "tick",
    });
    assert.equal(schedule.id, `nightly-${session}`);
    assert.ok((await client.schedules()).schedules.some((item) => item.id === schedule.id));
    await client.deleteSchedule(schedule.id);
  });
});

describe("outbound webhooks", () => {
  it("lists the outbox, and says an unknown delivery is not found", async () => {
    const page = await client.webhookDeliveries({ status: "failed", limit: 5 });
    assert.ok(Array.isArray(page.deliveries));
    await assert.rejects(client.webhookDelivery("wh-none"), (error: unknown) => {
      assert.ok(error instanceof TetherError);
      assert.equal(error.status, 404);
      return true;
    });
    await assert.rejects(client.resendWebhook("wh-none"), (error: unknown) => {
      assert.ok(error instanceof TetherError);
      assert.equal(error.status, 404);
      return true;
    });
  });
});

describe("approvals and inputs", () => {
  async function parked(session: string): Promise<{ submissionId: string; approvalId: string }> {
    const accepted = await client.send("assistant", "me", { body: "email bob@example.com: hi", session }, { timeout: 0.2 });
    assert.ok(!isSettled(accepted));
    const approvalId = await eventually(async () => {
      const page = await client.approvals({ limit: 200 });
      return page.approvals.find((gate) => gate.submissionId === accepted.submissionId)?.approvalId;
    });
    return { submissionId: accepted.submissionId, approvalId };
  }

  it("approves a parked tool call, and the run finishes", async () => {
    const { submissionId, approvalId } = await parked(fresh());
    const receipt = await client.approve(approvalId, { reason: "fine" });
    assert.equal(receipt.approvalId, approvalId);
    const settled = await client.submission(submissionId, { wait: true });
    assert.equal(settled.settlement?.status, "succeeded");
    const decided = await client.approvals({ status: "decided", limit: 200 });
    assert.ok(decided.approvals.some((gate) => gate.approvalId === approvalId));
  });

  it("rejects a parked tool call", async () => {
    const { submissionId, approvalId } = await parked(fresh());
    await client.reject(approvalId, { reason: "no" });
    const settled = await client.submission(submissionId, { wait: true });
    assert.equal(settled.status, "settled");
    const page = await client.approvals();
    assert.ok(!page.approvals.some((gate) => gate.approvalId === approvalId));
  });

  it("lists inputs, and answers an unknown one with a typed 404", async () => {
    const page = await client.inputs({ status: "all" });
    assert.ok(Array.isArray(page.inputs));
    await assert.rejects(client.answer("nope", 1), (error: unknown) => {
      assert.ok(error instanceof TetherError);
      assert.equal(error.type, "input_not_found");
      assert.equal(error.status, 404);
      assert.equal(typeof error.details, "object");
      return true;
    });
  });
});

describe("errors", () => {
  it("turns the error envelope into a TetherError", async () => {
    await assert.rejects(client.send("nobody", "me", "x"), (error: unknown) => {
      assert.ok(error instanceof TetherError);
      assert.equal(error.type, "unknown_agent");
      assert.equal(error.status, 404);
      assert.ok(error.message.length > 0);
      return true;
    });
    await assert.rejects(client.send("assistant", "me", { body: 7 as unknown as string }), (error: unknown) => {
      assert.ok(error instanceof TetherError);
      assert.equal(error.status, 422);
      return true;
    });
  });

  it("says `network` when nothing answers, and `aborted` when the caller aborts", async () => {
    const nowhere = new TetherClient({ baseUrl: `http://127.0.0.1:${await freePort()}` });
    await assert.rejects(nowhere.sessions(), (error: unknown) => {
      assert.ok(error instanceof TetherError);
      assert.equal(error.type, "network");
      assert.equal(error.status, 0);
      assert.ok(error.retryable);
      return true;
    });
    const controller = new AbortController();
    controller.abort();
    await assert.rejects(client.sessions({}, { signal: controller.signal }), (error: unknown) => {
      assert.ok(error instanceof TetherError);
      assert.equal(error.type, "aborted");
      return true;
    });
  });
});

describe("the OpenAPI document", () => {
  it("is the one the client's types were generated from", async () => {
    const served = await (await fetch(`${server.url}/openapi.json`)).json();
    const checkedIn = JSON.parse(readFileSync(new URL("../../openapi.json", import.meta.url), "utf8"));
    assert.deepEqual(served, checkedIn);
  });
});
