// The approvals inbox: the gates waiting for a decision across every session (GET /approvals),
// each with its tool, arguments and digest; Approve, Reject (with a reason) and Edit (the
// arguments as a JSON object, checked as JSON as you type); and the decisions made. Beside
// them, the questions runs wait on (GET /inputs), each answered with a value: JSON if it
// parses, else the text typed (as `tether answer` reads it). Whether an edit or an answer fits
// its schema the server says (jsonschema, the check that decides), shown where it was typed.
// And the runs parked on their budget (GET /budgets): what they spent against which limit,
// extended by the amounts typed (a JSON object, as {"modelCalls": 5}) or rejected.

import { can } from "./access.js";
import { get, post } from "./api.js";
import { actorText, fill, h, jsonBlock, sessionHref, timeTag } from "./dom.js";

const PAGE = 200;
const DECIDED_SHOWN = 50;

/** Whether the editor holds a JSON object (the arguments a tool takes); says why not. */
function check(textarea, problem, save) {
  let why = "";
  try {
    const args = JSON.parse(textarea.value);
    if (typeof args !== "object" || args === null || Array.isArray(args)) why = "args: must be an object";
  } catch (error) {
    why = `Not JSON: ${error.message}`;
  }
  problem.textContent = why;
  save.disabled = why !== "";
  return why === "";
}

export class ApprovalsPanel {
  constructor(root, { onCount }) {
    this.root = root;
    this.onCount = onCount;
    this.pendingList = root.querySelector("#pending");
    this.inputsList = root.querySelector("#inputs");
    this.shownInputs = null;
    this.budgetsList = root.querySelector("#budgets");
    this.shownBudgets = null;
    this.decidedList = root.querySelector("#decided");
    this.approver = root.querySelector("#approver");
    this.approver.value = localStorage.getItem("tether.approver") || "console";
    this.approverTyped = localStorage.getItem("tether.approver") !== null;
    this.approver.addEventListener("change", () => {
      localStorage.setItem("tether.approver", this.approver.value);
      this.approverTyped = true;
    });
    this.shown = null; // the ids of the pending cards on screen: they are rebuilt only if it changes
  }

  /** The name decisions and answers go under, unless one was typed: who signed in. */
  signedInAs(name) {
    if (!this.approverTyped) this.approver.value = name;
  }

  /** Ask for the pending gates; the count goes to the badge. Cards are redrawn only when
   * the set of gates changed, so an open editor is left alone. */
  async refresh({ decided = false } = {}) {
    // Only what the identity may read: an approver who reads no session sees no questions,
    // a reader who may not see the gates sees the questions alone.
    const none = (name) => Promise.resolve({ [name]: [], nextCursor: null });
    let page, asked, spent;
    try {
      [page, asked, spent] = await Promise.all([
        can("approvals:read") ? get("/approvals", { status: "pending", limit: PAGE }) : none("approvals"),
        can("sessions:read") ? get("/inputs", { status: "pending", limit: PAGE }) : none("inputs"),
        can("approvals:read") ? get("/budgets", { status: "pending", limit: PAGE }) : none("budgets"),
      ]);
    } catch (error) {
      if (error.status === 403) {
        this.shown = null; // redrawn once it reads again
        fill(this.pendingList, h("li", { class: "error", role: "alert" }, error.message));
      }
      throw error;
    }
    const waiting = page.approvals.length + asked.inputs.length + spent.budgets.length;
    const more = page.nextCursor || asked.nextCursor || spent.nextCursor;
    this.onCount(more ? `${waiting}+` : `${waiting}`, waiting);
    const parked = spent.budgets.map((item) => item.gateId).join(" ");
    if (parked !== this.shownBudgets) {
      this.shownBudgets = parked;
      fill(
        this.budgetsList,
        spent.budgets.length ? spent.budgets.map((item) => this.budgetCard(item)) : h("li", { class: "empty" }, "No run waits for more budget."),
      );
    }
    const questions = asked.inputs.map((item) => item.inputId).join(" ");
    if (questions !== this.shownInputs) {
      this.shownInputs = questions;
      fill(
        this.inputsList,
        asked.inputs.length ? asked.inputs.map((item) => this.inputCard(item)) : h("li", { class: "empty" }, "No run waits for an answer."),
      );
    }
    const ids = page.approvals.map((gate) => gate.approvalId).join(" ");
    if (ids !== this.shown) {
      this.shown = ids;
      fill(
        this.pendingList,
        page.approvals.length ? page.approvals.map((gate) => this.card(gate)) : h("li", { class: "empty" }, "Nothing waits for a decision."),
      );
    }
    if (decided && can("approvals:read")) await this.refreshDecided();
  }

  async refreshDecided() {
    // Oldest first, page by page: the last pages hold the newest decisions.
    let gates = [];
    let cursor = null;
    for (let page = 0; page < 5; page += 1) {
      const answer = await get("/approvals", { status: "decided", limit: PAGE, cursor });
      gates = [...gates, ...answer.approvals].slice(-DECIDED_SHOWN);
      cursor = answer.nextCursor;
      if (!cursor) break;
    }
    gates.reverse();
    fill(this.decidedList, gates.length ? gates.map((gate) => this.decidedItem(gate)) : h("li", { class: "empty" }, "No decisions yet."));
  }

  where(gate) {
    const key = { agent: gate.agent, instance: gate.instance, session: gate.session };
    return h("a", { href: sessionHref(key) }, `${gate.agent} / ${gate.instance} / ${gate.session}`);
  }

  card(gate) {
    const reason = h("input", { type: "text", "aria-label": "Reason", placeholder: "Reason (for a rejection)", dataset: { needs: "approvals:decide" } });
    const problem = h("p", { class: "error", role: "alert" });
    const editorText = h("textarea", { "aria-label": "Edited arguments (JSON)", rows: 6, spellcheck: "false" });
    const editorProblem = h("p", { class: "error", role: "alert" });
    const saveEdit = h("button", { type: "button" }, "Approve with edits");
    const editor = h("div", { class: "editor", hidden: true }, editorText, editorProblem, saveEdit);
    const decide = async (decision, extra = {}) => {
      problem.textContent = "";
      try {
        await post(`/approvals/${encodeURIComponent(gate.approvalId)}`, {
          decision,
          approver: this.approver.value.trim() || "console",
          ...extra,
        });
        this.shown = null; // redraw
        await this.refresh({ decided: true });
      } catch (error) {
        (decision === "edit" ? editorProblem : problem).textContent = error.message;
      }
    };
    const edit = h("button", { type: "button", "aria-expanded": "false" }, "Edit");
    edit.addEventListener("click", async () => {
      const opening = editor.hidden;
      editor.hidden = !opening;
      edit.setAttribute("aria-expanded", String(opening));
      if (opening && !editorText.value) {
        editorText.value = JSON.stringify(gate.args, null, 2);
        check(editorText, editorProblem, saveEdit);
      }
    });
    editorText.addEventListener("input", () => check(editorText, editorProblem, saveEdit));
    saveEdit.addEventListener("click", async () => {
      if (check(editorText, editorProblem, saveEdit)) {
        await decide("edit", { args: JSON.parse(editorText.value), reason: reason.value.trim() || undefined });
      }
    });
    return h(
      "li",
      { class: "gate", dataset: { approvalId: gate.approvalId } },
      h("div", { class: "gate-head" }, h("strong", { class: "tool-name" }, gate.tool), " · ", this.where(gate), " · ", timeTag(gate.requestedAt || "")),
      jsonBlock(gate.args, "args json"),
      h("p", { class: "digest", title: "the digest of the arguments as requested" }, gate.argsDigest),
      reason,
      h(
        "div",
        { class: "actions", dataset: { needs: "approvals:decide" } },
        h("button", { type: "button", class: "primary", onclick: () => decide("approve") }, "Approve"),
        h("button", { type: "button", class: "danger", onclick: () => decide("reject", { reason: reason.value.trim() || undefined }) }, "Reject"),
        edit,
      ),
      problem,
      editor,
    );
  }

  inputCard(item) {
    const value = h("textarea", { "aria-label": "Answer (JSON, or text)", rows: 2, spellcheck: "false", dataset: { needs: "inputs:answer" } });
    const problem = h("p", { class: "error", role: "alert" });
    const send = h("button", { type: "button", class: "primary" }, "Answer");
    const parsed = () => {
      try {
        return JSON.parse(value.value);
      } catch {
        return value.value; // not JSON: the text itself
      }
    };
    value.addEventListener("input", () => {
      problem.textContent = "";
    });
    send.addEventListener("click", async () => {
      try {
        await post(`/inputs/${encodeURIComponent(item.inputId)}`, {
          value: parsed(),
          responder: this.approver.value.trim() || "console",
        });
        this.shownInputs = null; // redraw
        await this.refresh();
      } catch (error) {
        problem.textContent = error.message;
      }
    });
    return h(
      "li",
      { class: "gate input", dataset: { inputId: item.inputId } },
      h("div", { class: "gate-head" }, h("strong", { class: "tool-name" }, item.tool), " · ", this.where(item), " · ", timeTag(item.requestedAt || "")),
      h("p", { class: "prompt" }, item.prompt),
      item.schema ? jsonBlock(item.schema, "schema json") : null,
      value,
      h("div", { class: "actions", dataset: { needs: "inputs:answer" } }, send),
      problem,
    );
  }

  budgetCard(item) {
    const whose = item.scope === "session" ? "the session's budget" : "its budget";
    const more = h("textarea", { "aria-label": "Extension (JSON)", rows: 2, spellcheck: "false", dataset: { needs: "approvals:decide" } });
    more.value = JSON.stringify({ [item.limit]: item.max || 1 });
    const problem = h("p", { class: "error", role: "alert" });
    const extend = h("button", { type: "button", class: "primary" }, "Extend");
    more.addEventListener("input", () => check(more, problem, extend));
    const decide = async (decision, extra = {}) => {
      problem.textContent = "";
      try {
        await post(`/budgets/${encodeURIComponent(item.gateId)}`, {
          decision,
          approver: this.approver.value.trim() || "console",
          ...extra,
        });
        this.shownBudgets = null; // redraw
        await this.refresh();
      } catch (error) {
        problem.textContent = error.message;
      }
    };
    extend.addEventListener("click", async () => {
      if (check(more, problem, extend)) await decide("approve", { extension: JSON.parse(more.value) });
    });
    return h(
      "li",
      { class: "gate budget", dataset: { gateId: item.gateId } },
      h("div", { class: "gate-head" }, h("strong", { class: "tool-name" }, "budget"), " · ", this.where(item), " · ", timeTag(item.requestedAt || "")),
      h("p", { class: "limit" }, `${item.limit}: ${item.used} of ${item.max} used (${whose})`),
      jsonBlock(item.spent, "spent json"),
      more,
      h(
        "div",
        { class: "actions", dataset: { needs: "approvals:decide" } },
        extend,
        h("button", { type: "button", class: "danger", onclick: () => decide("reject") }, "Reject"),
      ),
      problem,
    );
  }

  decidedItem(gate) {
    const decision = gate.decision || {};
    return h(
      "li",
      { class: `decided ${decision.decision || ""}` },
      h("strong", {}, decision.decision || gate.status),
      ` ${gate.tool} by ${actorText(decision.approver, gate.decidedBy)} `,
      timeTag(gate.decidedAt || ""),
      " · ",
      this.where(gate),
      decision.reason ? h("div", { class: "reason" }, `Reason: ${decision.reason}`) : null,
      decision.args ? h("div", {}, "Edited to ", jsonBlock(decision.args, "args json")) : null,
    );
  }
}
