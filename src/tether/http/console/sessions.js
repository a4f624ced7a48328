// The sessions panel: every agent and its sessions (GET /sessions, newest activity first),
// each with its status (a waiting one's pill says what for: a limit, its budget, its time...),
// last activity, pending approvals and metadata; a search of them (the words of their
// messages, ?q=, and their metadata, ?metadata.<key>=); and a new session.

import { get } from "./api.js";
import { fill, h, sameKey, sessionHref, timeTag } from "./dom.js";
import { stateOf, whyWaiting } from "./runs.js";

const PAGE = 100;

function freshName() {
  return `s-${Date.now().toString(36)}`;
}

/** A session's metadata as ``key=value`` pairs, or nothing when it has none. */
function metadataTag(metadata) {
  const pairs = Object.entries(metadata || {}).map(([key, value]) => `${key}=${typeof value === "string" ? value : JSON.stringify(value)}`);
  return pairs.length ? h("span", { class: "session-meta", title: "metadata" }, pairs.join(" ")) : null;
}

export class SessionsPanel {
  constructor(root, { onSelect }) {
    this.root = root;
    this.onSelect = onSelect;
    this.list = root.querySelector("#session-list");
    this.more = root.querySelector("#more-sessions");
    this.form = root.querySelector("#new-session");
    this.agentSelect = root.querySelector("#new-agent");
    this.sessions = [];
    this.cursor = null;
    this.pages = 1;
    this.current = null;
    this.agents = [];
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      const instance = root.querySelector("#new-instance").value.trim() || "me";
      const nameField = root.querySelector("#new-session-name");
      const session = nameField.value.trim() || freshName();
      nameField.value = "";
      this.onSelect({ agent: this.agentSelect.value, instance, session });
    });
    this.filters = {};
    this.search = root.querySelector("#session-search");
    this.clear = root.querySelector("#session-search-clear");
    this.search.addEventListener("submit", (event) => {
      event.preventDefault();
      this.filter(root.querySelector("#session-q").value, root.querySelector("#session-meta").value);
    });
    this.clear.addEventListener("click", () => {
      root.querySelector("#session-q").value = "";
      root.querySelector("#session-meta").value = "";
      this.filter("", "");
    });
    this.more.addEventListener("click", () => {
      this.pages += 1;
      this.refresh();
    });
  }

  /** Search: ``q`` the words of a message, ``meta`` space-separated key=value pairs. */
  filter(q, meta) {
    const filters = {};
    if (q.trim()) filters.q = q.trim();
    for (const pair of meta.split(/\s+/)) {
      const at = pair.indexOf("=");
      if (at > 0) filters[`metadata.${pair.slice(0, at)}`] = pair.slice(at + 1);
    }
    this.filters = filters;
    this.clear.hidden = Object.keys(filters).length === 0;
    this.pages = 1;
    return this.refresh();
  }

  get searching() {
    return Object.keys(this.filters).length > 0;
  }

  setAgents(agents) {
    this.agents = agents;
    fill(
      this.agentSelect,
      agents.map((agent) => h("option", { value: agent.name, title: agent.description || "" }, agent.name)),
    );
    this.render();
  }

  /** The item of a session, if the pages read hold it. */
  find(key) {
    return this.sessions.find((item) => sameKey(item, key)) || null;
  }

  findConversation(conversationId) {
    return this.sessions.find((item) => item.conversationId === conversationId) || null;
  }

  async refresh() {
    const sessions = [];
    let cursor = null;
    for (let page = 0; page < this.pages; page += 1) {
      const answer = await get("/sessions", { ...this.filters, limit: PAGE, cursor });
      sessions.push(...answer.sessions);
      cursor = answer.nextCursor;
      if (!cursor) break;
    }
    this.sessions = sessions;
    this.cursor = cursor;
    this.render();
    return sessions;
  }

  select(key) {
    this.current = key;
    this.render();
  }

  render() {
    // A search lists the agents it found sessions of; the whole list, every agent.
    const byAgent = new Map(this.searching ? [] : this.agents.map((agent) => [agent.name, []]));
    for (const item of this.sessions) {
      if (!byAgent.has(item.agent)) byAgent.set(item.agent, []);
      byAgent.get(item.agent).push(item);
    }
    const current = this.current;
    if (current && !this.find(current) && !this.searching) {
      if (!byAgent.has(current.agent)) byAgent.set(current.agent, []);
      byAgent.get(current.agent).unshift({ ...current, status: "new", pendingApprovals: 0 });
    }
    const groups = [];
    for (const [agent, items] of byAgent) {
      groups.push(
        h(
          "li",
          { class: "agent" },
          h("h3", {}, agent),
          items.length
            ? h("ul", {}, items.map((item) => this.item(item)))
            : h("p", { class: "empty" }, "no sessions yet"),
        ),
      );
    }
    if (!groups.length && this.searching) groups.push(h("li", { class: "empty" }, "no session matches"));
    fill(this.list, groups);
    this.more.hidden = !this.cursor;
  }

  /** The session's status, or what it waits for (as a run's pill says it). */
  pill(item) {
    const state = stateOf(item);
    return h("span", { class: `pill ${state.kind}`, title: whyWaiting(item) || null, dataset: item.waitReason ? { reason: item.waitReason } : null }, state.text);
  }

  item(item) {
    const selected = sameKey(item, this.current);
    const link = h(
      "a",
      {
        href: sessionHref(item),
        class: "session-link",
        "aria-current": selected ? "page" : null,
        onclick: (event) => {
          if (event.metaKey || event.ctrlKey || event.shiftKey) return;
          event.preventDefault();
          this.onSelect({ agent: item.agent, instance: item.instance, session: item.session });
        },
      },
      h("span", { class: "session-name" }, `${item.instance} / ${item.session}`),
      this.pill(item),
      item.pendingApprovals
        ? h("span", { class: "badge", title: "pending approvals" }, `${item.pendingApprovals} pending`)
        : null,
      item.lastActivityAt ? timeTag(item.lastActivityAt) : null,
      item.parent ? h("span", { class: "parent" }, item.parent.reason) : null,
      metadataTag(item.metadata),
    );
    return h("li", { class: selected ? "selected" : "" }, link);
  }
}
