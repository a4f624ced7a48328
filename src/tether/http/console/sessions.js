// The sessions panel: every agent and its sessions (GET /sessions, newest activity first),
// each with its status (a waiting one's pill says what for: a limit, its budget, its time...),
// last activity and pending approvals; and a new session.

import { get } from "./api.js";
import { fill, h, sameKey, sessionHref, timeTag } from "./dom.js";
import { stateOf, whyWaiting } from "./runs.js";

const PAGE = 100;

function freshName() {
  return `s-${Date.now().toString(36)}`;
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
    this.more.addEventListener("click", () => {
      this.pages += 1;
      this.refresh();
    });
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
      const answer = await get("/sessions", { limit: PAGE, cursor });
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
    const byAgent = new Map(this.agents.map((agent) => [agent.name, []]));
    for (const item of this.sessions) {
      if (!byAgent.has(item.agent)) byAgent.set(item.agent, []);
      byAgent.get(item.agent).push(item);
    }
    const current = this.current;
    if (current && !this.find(current)) {
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
    );
    return h("li", { class: selected ? "selected" : "" }, link);
  }
}
