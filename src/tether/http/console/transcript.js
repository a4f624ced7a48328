// Renders canonical stream events (agentex's shapes, docs/console.md) into a transcript: a
// slot per message index, text growing with its deltas, reasoning collapsed, tool calls with
// their arguments, progress and results, data events (approvals, subagents, signals) as
// notices, a JSON answer formatted.
//
// How each submission ended comes as a `submission_settled` data event: an abort, a failure,
// a timeout or an exhausted budget is said where it happened, and a run that answered with
// no text says so, the same live and after a reload (both read the same stream).
//
// A crash can cut an answer mid-stream. The stream then closes the partial with a Done whose
// `parent_task_message` is still IN_PROGRESS (it never finished): it is shown as interrupted.
// When the model's answer comes again it comes in a fresh slot (an agentex server ignores an
// index once it is Done) whose Start or Full names the cut message's id, and the cut message
// of that id is replaced in place, so the answer shows once.

import { actorText, h, jsonBlock, keyOfStreamUrl, sessionHref } from "./dom.js";

function asJson(text) {
  const trimmed = text.trim();
  if (!/^[[{]/.test(trimmed)) return undefined;
  try {
    return JSON.parse(trimmed);
  } catch {
    return undefined;
  }
}

export class Transcript {
  constructor(root, { onOpenApprovals }) {
    this.root = root;
    this.onOpenApprovals = onOpenApprovals;
    this.slots = new Map(); // index -> {element, kind, text}: streamed slots
    this.cut = new Map(); // message id -> the element of a message a crash cut
    this.tools = new Map(); // tool_call_id -> the tool call's card
    this.answered = false; // the agent has said something since the last user message
  }

  apply(type, event) {
    const supersedes = event.parent_task_message?.id;
    if (type === "start") {
      this.open(event.index, event.content, supersedes);
    } else if (type === "delta") {
      this.delta(event.index, event.delta);
    } else if (type === "full") {
      this.full(event.index, event.content, supersedes);
    } else if (type === "done") {
      const slot = this.slots.get(event.index);
      if (!slot) return;
      this.finish(slot);
      if (event.parent_task_message?.streaming_status === "IN_PROGRESS") {
        slot.element.classList.add("interrupted");
        slot.element.title = "Interrupted: the answer is asked for again";
        if (supersedes !== undefined) this.cut.set(supersedes, slot.element);
      }
    }
  }

  /** Show `element` at the end, or in place of the message of id `supersedes` (a message a
   *  crash cut, which the answer that came again supersedes). */
  add(element, supersedes) {
    const superseded = supersedes === undefined ? undefined : this.cut.get(supersedes);
    if (superseded) {
      superseded.replaceWith(element);
      this.cut.delete(supersedes);
    } else {
      this.root.append(element);
    }
    return element;
  }

  open(index, content, supersedes) {
    if (content.type === "reasoning") {
      const body = h("div", { class: "reasoning-body" }, (content.content || []).join(""));
      const element = this.add(
        h("details", { class: "reasoning streaming" }, h("summary", {}, "Reasoning"), body),
        supersedes,
      );
      this.slots.set(index, { element, body, kind: "reasoning", text: "" });
    } else if (content.type === "tool_request") {
      const card = this.toolCard(content.name, content.tool_call_id, null);
      this.slots.set(index, { element: card, kind: "tool_request", text: "" });
    } else if (content.type === "text") {
      const body = h("div", { class: "text" }, content.content || "");
      const element = this.add(
        h("div", { class: `msg ${content.author} streaming`, dataset: { index } }, body),
        supersedes,
      );
      this.answered = content.author === "agent";
      this.slots.set(index, { element, body, kind: "text", text: content.content || "" });
    } else {
      const body = h("pre", { class: "json" });
      const element = this.add(h("div", { class: "notice" }, body), supersedes);
      this.slots.set(index, { element, body, kind: content.type, text: "" });
    }
  }

  delta(index, delta) {
    if (!delta) return;
    let slot = this.slots.get(index);
    if (!slot) {
      // Its start came before the part of the log shown: open it here.
      const content =
        delta.type === "reasoning_content" || delta.type === "reasoning_summary"
          ? { type: "reasoning", author: "agent" }
          : delta.type === "tool_request"
            ? { type: "tool_request", name: delta.name, tool_call_id: delta.tool_call_id }
            : { type: "text", author: "agent", content: "" };
      this.open(index, content);
      slot = this.slots.get(index);
    }
    const piece =
      delta.text_delta ??
      delta.content_delta ??
      delta.summary_delta ??
      delta.arguments_delta ??
      delta.data_delta ??
      "";
    slot.text += piece;
    if (slot.kind === "tool_request") {
      slot.element.querySelector(".args").textContent = slot.text;
    } else if (slot.body) {
      slot.body.append(piece);
    }
  }

  finish(slot) {
    slot.element.classList.remove("streaming");
    if (slot.kind === "text") this.formatJson(slot.body, slot.text);
    if (slot.kind === "tool_request") {
      const args = asJson(slot.text || "{}");
      if (args !== undefined) slot.element.querySelector(".args").replaceWith(argsBlock(args));
    }
  }

  formatJson(body, text) {
    const value = asJson(text);
    if (value !== undefined && typeof value === "object") {
      body.replaceChildren(jsonBlock(value, "json result"));
    }
  }

  full(index, content, supersedes) {
    const author = content.author;
    if (content.type === "text") {
      const body = h("div", { class: "text" }, content.content);
      this.add(h("div", { class: `msg ${author}`, dataset: { index } }, body), supersedes);
      this.answered = author === "agent";
      if (author === "agent") this.formatJson(body, content.content);
    } else if (content.type === "reasoning") {
      const text = [...(content.summary || []), ...(content.content || [])].join("\n");
      this.add(
        h("details", { class: "reasoning" }, h("summary", {}, "Reasoning"), h("div", {}, text)),
        supersedes,
      );
    } else if (content.type === "tool_request") {
      this.toolCard(content.name, content.tool_call_id, content.arguments);
    } else if (content.type === "tool_response") {
      this.toolResult(content);
    } else if (content.type === "data") {
      const notice = this.notice(content.data);
      if (notice) this.add(notice);
    }
  }

  toolCard(name, callId, args) {
    const known = this.tools.get(callId);
    if (known) return known;
    const card = this.add(
      h(
        "div",
        { class: "tool", dataset: { callId } },
        h("div", { class: "tool-head" }, h("span", { class: "tool-name" }, name), " ", "tool call"),
        args === null ? h("pre", { class: "args json" }) : argsBlock(args),
        h("div", { class: "progress", role: "status" }),
      ),
    );
    this.tools.set(callId, card);
    return card;
  }

  toolResult(content) {
    const card = this.toolCard(content.name, content.tool_call_id, {});
    card.classList.toggle("error", Boolean(content.is_error));
    card.querySelector(".progress").textContent = "";
    const value = content.content;
    const shown =
      typeof value === "string" && asJson(value) === undefined
        ? h("div", { class: "tool-text" }, value)
        : jsonBlock(typeof value === "string" ? asJson(value) : value);
    card.append(
      h("div", { class: "tool-result" }, h("span", { class: "label" }, content.is_error ? "error" : "result"), shown),
    );
  }

  progress(event) {
    const card = this.tools.get(event.callId);
    if (card) card.querySelector(".progress").textContent = event.text;
  }

  notice(data) {
    const kind = data.kind;
    if (kind === "approval_requested") {
      return h(
        "div",
        { class: "notice approval" },
        h("strong", {}, "Waiting for approval: "),
        `${data.tool}`,
        jsonBlock(data.args),
        data.metadata ? jsonBlock(data.metadata, "json metadata") : null,
        h("a", { href: "#", dataset: { needs: "approvals:read" }, onclick: (e) => (e.preventDefault(), this.onOpenApprovals()) }, "Open the approvals inbox"),
      );
    }
    if (kind === "approval_decided") {
      const reason = data.reason ? ` (${data.reason})` : "";
      return h("div", { class: `notice decided ${data.decision}` }, `${data.decision} by ${actorText(data.approver, data.by)}${reason}`);
    }
    if (kind === "input_requested") {
      return h(
        "div",
        { class: "notice input" },
        h("strong", {}, "Waiting for input: "),
        data.prompt,
        data.answerSchema ? jsonBlock(data.answerSchema, "json schema") : null,
        data.metadata ? jsonBlock(data.metadata, "json metadata") : null,
      );
    }
    if (kind === "input_answered") {
      return h("div", { class: "notice decided answer" }, `answered by ${actorText(data.responder, data.by)}: `, jsonBlock(data.value));
    }
    if (kind === "budget_requested") {
      const whose = data.scope === "session" ? "the session's budget" : "its budget";
      return h(
        "div",
        { class: "notice budget" },
        h("strong", {}, "Waiting for more budget: "),
        `${data.limit} ${data.used} of ${data.max} used (${whose})`,
        h("a", { href: "#", dataset: { needs: "approvals:read" }, onclick: (e) => (e.preventDefault(), this.onOpenApprovals()) }, "Open the approvals inbox"),
      );
    }
    if (kind === "budget_decided") {
      const more = data.extension ? ` +${JSON.stringify(data.extension)}` : "";
      return h("div", { class: `notice decided ${data.decision}` }, `budget ${data.decision}${more} by ${actorText(data.approver, data.by)}`);
    }
    if (kind === "task_spawned" || kind === "task_finished") {
      const child = data.streamUrl ? keyOfStreamUrl(data.streamUrl) : null;
      const link = child ? h("a", { href: sessionHref(child), class: "child-link" }, `${child.agent} / ${child.session}`) : data.agent;
      if (kind === "task_spawned") return h("div", { class: "notice task" }, "Delegated to ", link);
      const outcome = data.status === "succeeded" ? data.result : data.error;
      return h(
        "div",
        { class: `notice task ${data.status}` },
        "Subagent ",
        link,
        ` ${data.status}`,
        outcome === undefined || outcome === null ? null : typeof outcome === "string" ? h("div", {}, outcome) : jsonBlock(outcome),
      );
    }
    if (kind === "version_changed") {
      const differs = data.differs && data.differs.length ? `: ${data.differs.join(", ")}` : "";
      const versions = `${data.fromVersion ?? "?"} → ${data.toVersion ?? "?"}`;
      return h("div", { class: "notice version" }, `Version ${versions} (${data.reason})${differs}`);
    }
    if (kind === "submission_settled") return this.settled(data);
    if (kind === "signal") {
      return h("div", { class: "notice signal" }, `Signal ${data.type}: ${data.body}`);
    }
    return h("div", { class: "notice" }, jsonBlock(data));
  }

  /** A settlement: said when it did not succeed, or when the run answered with no text. */
  settled(data) {
    if (data.status === "succeeded") {
      if (this.answered) return null;
      this.answered = true; // said once: a steer that joined the run settles with it
      return h("div", { class: "notice settled empty" }, "Answered with no text.");
    }
    const error = data.error && data.error !== data.status ? `: ${data.error}` : "";
    const code = data.errorCode && data.errorCode !== data.status ? ` (${data.errorCode})` : "";
    const text = `${data.status}${error}${code}`;
    return h("div", { class: `notice error settled ${data.status}`, role: "alert" }, text);
  }

  error(text) {
    this.add(h("div", { class: "notice error", role: "alert" }, text));
  }
}

function argsBlock(args) {
  return jsonBlock(args, "args json");
}
