// Small DOM helpers: elements built from data, never from HTML strings (nothing the server
// sends is ever parsed as markup).

/** An element: h("button", {class: "x", onclick: f}, "text", child...). */
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (name === "class") element.className = value;
    else if (name === "dataset") Object.assign(element.dataset, value);
    else if (value === true) element.setAttribute(name, "");
    else element.setAttribute(name, String(value));
  }
  element.append(...children.flat().filter((child) => child !== null && child !== undefined));
  return element;
}

/** A value as indented JSON in a <pre>. */
export function jsonBlock(value, className = "json") {
  return h("pre", { class: className }, JSON.stringify(value, null, 2));
}

/** "3 s ago", "5 min ago", "2 h ago", or the date; the exact time is the title. */
export function ago(iso, now = Date.now()) {
  const then = Date.parse(iso);
  if (Number.isNaN(then)) return iso || "";
  const seconds = Math.max(0, Math.round((now - then) / 1000));
  if (seconds < 60) return `${seconds} s ago`;
  if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.round(seconds / 3600)} h ago`;
  return new Date(then).toISOString().slice(0, 10);
}

/** A time to come as people say it: "in 40 s", "in 5 min", "in 3 h", "in 2 d"; one past
 * as ago() says it (a scheduled run overdue). */
export function until(iso, now = Date.now()) {
  const then = Date.parse(iso);
  if (Number.isNaN(then)) return iso || "";
  const seconds = Math.round((then - now) / 1000);
  if (seconds <= 0) return ago(iso, now);
  if (seconds < 60) return `in ${seconds} s`;
  if (seconds < 3600) return `in ${Math.round(seconds / 60)} min`;
  if (seconds < 86400) return `in ${Math.round(seconds / 3600)} h`;
  return `in ${Math.round(seconds / 86400)} d`;
}

/** Who did something, as the server verified them (a record's or a gate's ``by``): the name
 * shown, then the verified subject and tenant, e.g. "Ann (ann@acme, acme)". */
export function actorText(shown, by) {
  if (!by) return shown || "?";
  const verified = by.tenant ? `${by.subject}, ${by.tenant}` : by.subject;
  return `${shown || by.display || by.subject} (${verified})`;
}

/** A time element: the relative time shown, the ISO time in datetime and title. */
export function timeTag(iso) {
  return h("time", { datetime: iso, title: iso }, ago(iso));
}

/** Milliseconds for people: "850 ms", "3.2 s", "2 min 5 s". */
export function duration(ms) {
  if (ms === null || ms === undefined) return "…";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
}

/** Replace an element's children. */
export function fill(element, ...children) {
  element.replaceChildren(...children.flat().filter((child) => child !== null && child !== undefined));
  return element;
}

/** A session key as the console's URL says it. */
export function sessionHref(key, panel = "chat") {
  const query = new URLSearchParams({
    agent: key.agent,
    instance: key.instance,
    session: key.session,
    panel,
  });
  return `/ui?${query}`;
}

/** The key a stream URL (/agents/{agent}/{instance}?session=...) names. */
export function keyOfStreamUrl(url) {
  const parsed = new URL(url, location.origin);
  const [, agents, agent, instance] = parsed.pathname.split("/");
  if (agents !== "agents" || !agent || !instance) return null;
  return {
    agent: decodeURIComponent(agent),
    instance: decodeURIComponent(instance),
    session: parsed.searchParams.get("session") || "default",
  };
}

/** Whether two session keys name the same session. */
export function sameKey(a, b) {
  return Boolean(a && b && a.agent === b.agent && a.instance === b.instance && a.session === b.session);
}

/** Whether the user is reading the end of a scrolled element (then it follows new content). */
export function atBottom(element, slack = 48) {
  return element.scrollHeight - element.scrollTop - element.clientHeight <= slack;
}
