// The session's runs not settled yet (GET /agents/{agent}/{instance}/submissions), above the
// transcript: each with where it stands — scheduled (and when it is due), queued, held back
// by a limit (its own pill, and whose: its agent's or its tenant's runs in flight are at
// their limit),
// running, waiting (and for what: an approval, a timer...) — its priority, and Cancel, an
// abort of that one submission (a scheduled one settles aborted, unrun).

import { agentPath, ApiError, get, post } from "./api.js";
import { fill, h, sameKey, until } from "./dom.js";

const HELD_BY = {
  agent: "its agent's runs in flight are at their limit",
  tenant: "its tenant's runs in flight are at their limit",
};

const WHY = {
  limit: "Held back: its agent's or its tenant's runs in flight are at their limit",
  approval: "Waits for an approval",
  input: "Waits for an answer to its question",
  budget: "Its budget ran out: waits for a decision (Approvals)",
  children: "Waits for its subagents",
  timer: "Asleep until its time",
  scheduled: "A delayed message at its head: not due yet",
  no_worker_for_version: "No live worker runs the version it started on",
  version_diverged: "Its code no longer makes its recorded effects: waits for a deploy",
};

/** What a run's pill says: its status, or what it waits for; and its class. */
export function stateOf(submission) {
  if (submission.cancelRequestedAt) return { text: "aborting", kind: "waiting" };
  if (submission.waitReason === "limit") return { text: "limit", kind: "limit" };
  if (submission.waitReason) return { text: `waiting: ${submission.waitReason}`, kind: "waiting" };
  return { text: submission.status, kind: submission.status };
}

/** Why a run (or a session's) waits, for its pill's tooltip. */
export function whyWaiting(submission) {
  const held = HELD_BY[submission.heldBy];
  return held ? `Held back: ${held}` : WHY[submission.waitReason] || "";
}

export class RunsList {
  constructor(root) {
    this.root = root;
    this.list = root.querySelector("#runs-list");
    this.problem = root.querySelector("#runs-error");
    this.key = null;
  }

  /** Show a session's runs (none until read). */
  show(key) {
    this.key = key;
    this.root.hidden = true;
    fill(this.list);
    return this.refresh();
  }

  async refresh() {
    const key = this.key;
    if (!key) return;
    let answer;
    try {
      answer = await get(agentPath(key, "/submissions"), { session: key.session });
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 404)) throw error;
      answer = { submissions: [], more: false }; // no message yet
    }
    if (!sameKey(key, this.key)) return;
    this.root.hidden = answer.submissions.length === 0;
    fill(
      this.list,
      answer.submissions.map((submission) => this.item(submission)),
      answer.more ? h("li", { class: "empty" }, "and more not shown") : null,
    );
  }

  item(submission) {
    const state = stateOf(submission);
    const id = submission.submissionId;
    const due = submission.dueAt
      ? h("time", { class: "due", datetime: submission.dueAt, title: submission.dueAt },
          `${submission.status === "scheduled" ? "due" : "wakes"} ${until(submission.dueAt)}`)
      : null;
    const cancel = h(
      "button",
      {
        type: "button",
        class: "danger",
        dataset: { needs: "sessions:abort" },
        "aria-label": `Cancel ${id}`,
        title: "Abort this submission: it settles aborted (a scheduled one without running)",
        disabled: Boolean(submission.cancelRequestedAt),
      },
      "Cancel",
    );
    cancel.addEventListener("click", async () => {
      cancel.disabled = true;
      this.problem.textContent = "";
      try {
        await post(`/submissions/${encodeURIComponent(id)}/abort`);
        await this.refresh();
      } catch (error) {
        cancel.disabled = false;
        this.problem.textContent = error.message;
      }
    });
    return h(
      "li",
      { class: "run", dataset: { id, status: submission.status } },
      h("span", { class: `pill ${state.kind}`, title: whyWaiting(submission) }, state.text),
      submission.heldBy ? h("span", { class: "held-by" }, `${submission.heldBy}'s limit`) : null,
      h("code", { class: "run-id", title: id }, id.slice(0, 12)),
      due,
      h("span", { class: "priority", title: "Higher is claimed first (docs/priorities.md)" }, `priority ${submission.priority}`),
      cancel,
    );
  }
}
