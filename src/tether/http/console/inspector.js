// The inspector: a session's raw records (seq, kind, time, hash), a page at a time, the
// newest first; Verify (the hash chain), Fork here (a new session from a record), the spans
// timeline, usage and cost, and the subagent tree (spans.js).

import { agentPath, ApiError, get, post } from "./api.js";
import { fill, h, jsonBlock, sessionHref, timeTag } from "./dom.js";
import { renderTimeline, renderTree, renderUsage } from "./spans.js";

const PAGE = 100;
const SPAN_WINDOW = 2000; // records whose spans the timeline shows at first

export class InspectorPanel {
  constructor(root, { onNavigate, findConversation }) {
    this.root = root;
    this.onNavigate = onNavigate;
    this.findConversation = findConversation;
    this.summary = root.querySelector("#inspector-summary");
    this.rows = root.querySelector("#records-body");
    this.pageLabel = root.querySelector("#records-page");
    this.verifyResult = root.querySelector("#verify-result");
    this.key = null;
    this.info = null;
    this.after = 0;
    root.querySelector("#verify").addEventListener("click", () => this.verify());
    for (const [id, move] of [
      ["records-first", () => 0],
      ["records-previous", () => Math.max(0, this.after - PAGE)],
      ["records-next", () => Math.min(this.lastPage(), this.after + PAGE)],
      ["records-last", () => this.lastPage()],
    ]) {
      root.querySelector(`#${id}`).addEventListener("click", () => this.page(move()));
    }
  }

  lastPage() {
    return this.info ? Math.max(0, this.info.head - PAGE) : 0;
  }

  async show(key) {
    this.key = key;
    this.info = null;
    this.verifyResult.textContent = "";
    fill(this.rows);
    for (const id of ["spans", "usage", "tree"]) fill(this.root.querySelector(`#${id}`));
    try {
      this.info = await get(agentPath(key, "/conversation"), { session: key.session });
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) {
        fill(this.summary, h("p", { class: "empty" }, "This session has no records yet."));
        this.pageLabel.textContent = "";
        return;
      }
      throw error;
    }
    if (this.key !== key) return;
    this.renderSummary();
    await Promise.all([this.page(this.lastPage()), this.spans(), this.usage()]);
  }

  /** Opening the session failed (a 403: the identity may not read it): the summary says
   *  why rather than staying blank. */
  failed(error) {
    fill(this.summary, h("p", { class: "error", role: "alert" }, error.message));
  }

  renderSummary() {
    const info = this.info;
    let parent = null;
    if (info.parent) {
      const known = this.findConversation(info.parent.conversationId);
      const label = `${info.parent.reason} of ${info.parent.conversationId} at seq ${info.parent.seq}`;
      parent = h("div", {}, "Parent: ", known ? h("a", { href: sessionHref(known, "inspector") }, label) : label);
    }
    fill(
      this.summary,
      h("div", {}, h("span", { class: "label" }, "Conversation "), h("code", {}, info.conversationId)),
      h("div", {}, `${info.head} records · created `, timeTag(info.createdAt)),
      parent,
      h("a", { href: `/conversations/${encodeURIComponent(info.conversationId)}/export`, download: `${info.conversationId}.jsonl` }, "Export (JSONL)"),
    );
  }

  async page(after) {
    if (!this.info) return;
    const key = this.key;
    const answer = await get(agentPath(key, "/records"), { session: key.session, after, limit: PAGE });
    if (this.key !== key) return;
    this.after = after;
    const last = answer.records.length ? answer.records[answer.records.length - 1].seq : after;
    this.pageLabel.textContent = `records ${after + 1} to ${last} of ${this.info.head}`;
    fill(this.rows, answer.records.map((record) => this.row(record)));
  }

  row(record) {
    const toggle = h("button", { type: "button", class: "link", "aria-expanded": "false", "aria-label": `Record ${record.seq}` }, String(record.seq));
    const row = h(
      "tr",
      { dataset: { seq: record.seq } },
      h("td", {}, toggle),
      h("td", { class: "kind" }, record.kind),
      h("td", { class: "time" }, h("time", { datetime: record.time, title: record.time }, record.time.slice(11, 23))),
      h("td", { class: "hash", title: record.hash }, h("code", {}, record.hash.slice(0, 12))),
    );
    toggle.addEventListener("click", () => {
      const open = row.nextElementSibling && row.nextElementSibling.classList.contains("detail");
      if (open) {
        row.nextElementSibling.remove();
        toggle.setAttribute("aria-expanded", "false");
        return;
      }
      toggle.setAttribute("aria-expanded", "true");
      row.after(this.detail(record));
    });
    return row;
  }

  detail(record) {
    const problem = h("p", { class: "error", role: "alert" });
    const fork = h("button", { type: "button" }, "Fork here");
    fork.addEventListener("click", async () => {
      try {
        const forked = await post(`/conversations/${encodeURIComponent(this.info.conversationId)}/fork`, { atSeq: record.seq });
        this.onNavigate({ agent: forked.agent, instance: forked.instance, session: forked.session }, "chat");
      } catch (error) {
        problem.textContent = error.message;
      }
    });
    const meta = { id: record.id, submissionId: record.submissionId, executionId: record.executionId, prevHash: record.prevHash, hash: record.hash };
    return h(
      "tr",
      { class: "detail" },
      h("td", { colspan: 4 }, h("div", { class: "actions", dataset: { needs: "sessions:fork" } }, fork, h("span", {}, `a new session with records 1 to ${record.seq}`)), problem, jsonBlock(record.payload), jsonBlock(meta, "json meta")),
    );
  }

  async verify() {
    if (!this.info) return;
    this.verifyResult.className = "";
    this.verifyResult.textContent = "Verifying…";
    try {
      const answer = await get(`/conversations/${encodeURIComponent(this.info.conversationId)}/verify`);
      this.verifyResult.className = "ok";
      this.verifyResult.textContent = `Verified: the hash chain of ${answer.records} records holds.`;
    } catch (error) {
      this.verifyResult.className = "error";
      this.verifyResult.textContent = `Not verified (${error.type || "error"}): ${error.message}`;
    }
  }

  async spans(from = Math.max(0, this.info.head - SPAN_WINDOW)) {
    const key = this.key;
    const container = this.root.querySelector("#spans");
    const spans = [];
    let after = from;
    for (let page = 0; page < 10; page += 1) {
      const answer = await get(`/conversations/${encodeURIComponent(this.info.conversationId)}/spans`, { after, limit: 500 });
      spans.push(...answer.spans);
      if (answer.next === null) break;
      after = answer.next;
    }
    if (this.key !== key) return;
    const earlier =
      from > 0
        ? h("button", { type: "button", class: "link", onclick: () => this.spans(0) }, "Show the spans of the whole log")
        : null;
    fill(container, earlier, renderTimeline(spans));
    await this.tree(spans);
  }

  async usage() {
    const answer = await get(`/conversations/${encodeURIComponent(this.info.conversationId)}/usage`);
    fill(this.root.querySelector("#usage"), renderUsage(answer));
  }

  async tree(spans) {
    const parents = [...new Set(spans.filter((span) => span.childSubmissionId).map((span) => span.submissionId))];
    const trees = [];
    for (const id of parents) trees.push(await get(`/submissions/${encodeURIComponent(id)}/tree`));
    fill(this.root.querySelector("#tree"), trees.length ? trees.map(renderTree) : h("p", { class: "empty" }, "No subagents."));
  }
}
