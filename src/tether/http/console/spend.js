// The session's spend, above its transcript (GET /usage?session=<conversation id>): what all
// its submissions spent together (their subagents' answers rolled up) against its session
// budget, and what its open run spent against its own budget when it has one. One line says
// it ("session 1 of 5 model calls · this run 0 of 0 model calls"); opened, each budget is
// the Usage panel's table (budgetTable). Hidden for a session not begun, and on a server
// that cannot tell (no such route or form: an older one; or one that will not let this
// identity read it).

import { ApiError, get } from "./api.js";
import { fill, h, sameKey } from "./dom.js";
import { amount, budgetTable, LIMITS } from "./usage.js";

const UNITS = { modelCalls: " model calls", tokens: " tokens", costUsd: "", toolCalls: " tool calls" };

/** "1 of 5 model calls, 13 of 100,000 tokens" (the limits a budget sets), or with none
 *  "1 model calls, 13 tokens, $0.0000, 0 tool calls"; and whether a limit is used up. */
function line(usage) {
  const budget = usage.budget || {};
  const remaining = usage.remaining || {};
  const limited = LIMITS.filter(([key]) => budget[key] !== null && budget[key] !== undefined);
  const shown = (limited.length ? limited : LIMITS).map(([key]) => {
    const spent = amount(key, usage.spent[key]);
    const max = budget[key];
    return max !== null && max !== undefined
      ? `${spent} of ${amount(key, max)}${UNITS[key]}`
      : `${spent}${UNITS[key]}`;
  });
  const out = limited.some(([key]) => remaining[key] !== null && remaining[key] <= 0);
  return { text: shown.join(", "), out };
}

export class SpendPanel {
  constructor(root, { conversationOf }) {
    this.root = root;
    this.body = root.querySelector("#spend-body");
    this.conversationOf = conversationOf; // a session key's conversation id, once listed
    this.key = null;
    this.unsupported = false; // the server cannot tell a session's spend
  }

  /** Show a session's spend (nothing until read). */
  show(key) {
    this.key = key;
    this.root.hidden = true;
    fill(this.body);
    return this.refresh();
  }

  async refresh() {
    const key = this.key;
    const conversation = key && this.conversationOf(key);
    if (!conversation || this.unsupported) {
      this.root.hidden = true;
      return;
    }
    let answer;
    try {
      answer = await get("/usage", { session: conversation });
    } catch (error) {
      if (!(error instanceof ApiError) || error.status >= 500) throw error;
      // 404: the session is gone, or the server has no usage route; 403: not this
      // identity's to read; 422: a server whose /usage has no session form.
      if (error.status !== 404 || error.type !== "conversation_not_found") this.unsupported = true;
      this.root.hidden = true;
      return;
    }
    if (!sameKey(key, this.key)) return;
    if (answer.conversationId !== conversation) {
      this.unsupported = true; // an older server answered its tenant form, ignoring session
      this.root.hidden = true;
      return;
    }
    this.render(answer);
  }

  render(spend) {
    const run = spend.submission;
    const session = line(spend);
    const own = run ? line(run) : null;
    const summary = this.root.querySelector("#spend-summary");
    summary.textContent = `session ${session.text}${spend.budget ? "" : " (no session budget)"}`
      + (own ? ` · this run ${own.text}` : "");
    summary.classList.toggle("exhausted", session.out || Boolean(own && own.out));
    fill(
      this.body,
      spend.budget ? h("div", { class: "spend-session" }, h("h4", {}, "Session budget"), budgetTable(spend)) : null,
      run
        ? h(
          "div",
          { class: "spend-run", dataset: { submission: run.submissionId } },
          h("h4", {}, "This run's budget"),
          budgetTable(run),
        )
        : null,
    );
    this.root.hidden = false;
  }
}
