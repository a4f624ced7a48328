// The inspector's derived views: the spans timeline (executions with their model and tool
// calls, each a bar on one time axis), usage and cost, and the subagent tree.

import { duration, h, sessionHref, keyOfStreamUrl } from "./dom.js";

/** One row per span, an execution's calls indented under it; bars share the time axis. */
export function renderTimeline(spans) {
  if (!spans.length) return h("p", { class: "empty" }, "No spans yet.");
  const now = Date.now();
  const start = Math.min(...spans.map((span) => Date.parse(span.startedAt)));
  const end = Math.max(...spans.map((span) => (span.endedAt ? Date.parse(span.endedAt) : now)));
  const total = Math.max(1, end - start);
  const rows = spans.map((span) => {
    const from = Date.parse(span.startedAt) - start;
    const to = (span.endedAt ? Date.parse(span.endedAt) : now) - start;
    const bar = h("span", { class: `span-bar ${span.kind} ${span.status}` });
    // CSSOM, not a style attribute: the page's policy allows no inline styles.
    bar.style.left = `${(100 * from) / total}%`;
    bar.style.width = `${Math.max(0.5, (100 * (to - from)) / total)}%`;
    const label = [
      h("span", { class: "span-kind" }, span.kind),
      " ",
      h("strong", {}, span.name),
      ` ${duration(span.durationMs)}`,
      span.status !== "ok" ? h("span", { class: `pill ${span.status}` }, span.status) : null,
      span.usage ? h("span", { class: "tokens" }, ` ${tokens(span.usage)}`) : null,
      span.decision ? h("span", { class: "decision" }, ` ${span.decision} by ${span.approver}`) : null,
      childLink(span),
    ];
    return h(
      "li",
      { class: `span ${span.kind === "execution" ? "" : "nested"}`, title: `seq ${span.startSeq}–${span.endSeq ?? "…"}` },
      h("div", { class: "span-label" }, label),
      h("div", { class: "track" }, bar),
    );
  });
  return h("ol", { class: "timeline", "aria-label": "Spans" }, rows);
}

function childLink(span) {
  const key = span.childStreamUrl ? keyOfStreamUrl(span.childStreamUrl) : null;
  return key ? h("a", { href: sessionHref(key), class: "child-link" }, ` → ${key.agent} / ${key.session}`) : null;
}

function tokens(usage) {
  const parts = [];
  if (usage.inputTokens !== undefined) parts.push(`${usage.inputTokens} in`);
  if (usage.outputTokens !== undefined) parts.push(`${usage.outputTokens} out`);
  return parts.join(" / ");
}

function cost(usage) {
  return usage.cost === undefined ? "unknown" : `$${usage.cost.toFixed(6)}`;
}

export function renderUsage(answer) {
  const usage = answer.usage;
  const row = (name, value) => h("tr", {}, h("th", { scope: "row" }, name), h("td", {}, value ?? "–"));
  const table = h(
    "table",
    { class: "usage" },
    h(
      "tbody",
      {},
      row("Model calls", String(usage.calls)),
      row("Input tokens", usage.inputTokens),
      row("Output tokens", usage.outputTokens),
      row("Reasoning tokens", usage.reasoningTokens),
      row("Cache read / write", usage.cacheReadTokens !== undefined || usage.cacheWriteTokens !== undefined ? `${usage.cacheReadTokens ?? 0} / ${usage.cacheWriteTokens ?? 0}` : null),
      row("Cost", usage.calls ? cost(usage) : null),
    ),
  );
  const children = answer.children.length
    ? h(
        "ul",
        { class: "usage-children" },
        answer.children.map((child) => h("li", {}, `${child.agent || "child"} ${child.submissionId}: ${child.usage.calls} calls, ${tokens(child.usage)}, ${cost(child.usage)}`)),
      )
    : null;
  return [table, children];
}

/** A submission's subagent tree: each node links to the child's session. */
export function renderTree(node) {
  const key = { agent: node.agent, instance: node.instance, session: node.session };
  const settlement = node.settlement ? ` · ${node.settlement.status}` : "";
  return h(
    "ul",
    { class: "tree" },
    h(
      "li",
      {},
      h("a", { href: sessionHref(key) }, `${node.agent} / ${node.session}`),
      h("span", { class: `pill ${node.status}` }, node.status),
      `${settlement} · ${node.usage.calls} model calls`,
      node.truncated ? h("span", { class: "pill" }, "truncated") : null,
      node.children.map(renderTree),
    ),
  );
}
