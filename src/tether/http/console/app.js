// The console's entry: sign-in, the URL (agent, instance, session, panel), the panels and the
// polls that keep the sessions list, the session's runs and spend, and the approvals badge
// live.

import * as access from "./access.js";
import * as api from "./api.js";
import { ApprovalsPanel } from "./approvals.js";
import { ChatPanel } from "./chat.js";
import { InspectorPanel } from "./inspector.js";
import { sameKey } from "./dom.js";
import { RunsList } from "./runs.js";
import { SessionsPanel } from "./sessions.js";
import { SpendPanel } from "./spend.js";
import { UsagePanel } from "./usage.js";

const PANELS = ["chat", "approvals", "inspector", "usage"];
const SESSIONS_POLL_MS = 3000;
const APPROVALS_POLL_MS = 2000;
const RUNS_POLL_MS = 2000;
const USAGE_POLL_MS = 5000;

const $ = (selector) => document.querySelector(selector);

const state = { key: null, panel: "chat", booted: false };

function fromUrl() {
  const query = new URLSearchParams(location.search);
  const agent = query.get("agent");
  const instance = query.get("instance");
  const key = agent && instance ? { agent, instance, session: query.get("session") || "default" } : null;
  const panel = PANELS.includes(query.get("panel")) ? query.get("panel") : "chat";
  const windowSize = Number(query.get("window")) || undefined; // records shown at first
  return { key, panel, windowSize };
}

function toUrl(replace = false) {
  const query = new URLSearchParams();
  if (state.key) {
    query.set("agent", state.key.agent);
    query.set("instance", state.key.instance);
    query.set("session", state.key.session);
  }
  query.set("panel", state.panel);
  const url = `/ui?${query}`;
  if (url === `${location.pathname}${location.search}`) return;
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
}

// What the page says of its connection: the stream's state first (the browser is
// reconnecting it), else the last API call's failure, else live.
const connection = { stream: "live", api: null };

function showConnection() {
  const text = connection.stream !== "live" ? connection.stream : connection.api || "live";
  const element = $("#connection");
  element.textContent = text;
  element.className = text === "live" ? "live" : "away";
}

function streamState(state) {
  connection.stream = state;
  showConnection();
}

function apiState(problem) {
  connection.api = problem;
  showConnection();
}

const sessions = new SessionsPanel($("#sessions"), { onSelect: (key) => navigate(key, "chat") });
const chat = new ChatPanel($("#panel-chat"), {
  onStatus: streamState,
  onOpenApprovals: () => navigate(state.key, "approvals"),
  onActivity: () => soon(),
});
const approvals = new ApprovalsPanel($("#panel-approvals"), {
  onCount: (text, count) => {
    const badge = $("#approvals-badge");
    badge.textContent = text;
    badge.hidden = count === 0;
  },
});
const inspector = new InspectorPanel($("#panel-inspector"), {
  onNavigate: (key, panel) => navigate(key, panel),
  findConversation: (id) => sessions.findConversation(id),
});
const runs = new RunsList($("#runs"));
const spend = new SpendPanel($("#spend"), {
  conversationOf: (key) => (sessions.find(key) || {}).conversationId,
});
const usage = new UsagePanel($("#panel-usage"), { tab: $("#tab-usage") });

function showPanel(wanted) {
  // A panel the identity may not open (its tab is hidden) gives way to the first it may.
  const open = (name) => access.shown($(`#tab-${name}`)) && !$(`#tab-${name}`).hidden;
  const panel = open(wanted) ? wanted : PANELS.find(open) || wanted;
  state.panel = panel;
  for (const name of PANELS) {
    $(`#panel-${name}`).hidden = name !== panel;
    const tab = $(`#tab-${name}`);
    if (name === panel) tab.setAttribute("aria-current", "page");
    else tab.removeAttribute("aria-current");
  }
  if (panel === "approvals") approvals.refresh({ decided: true }).catch(report);
  if (panel === "inspector" && state.key) inspector.show(state.key).catch(failedIn(inspector));
  if (panel === "usage") usage.refresh().catch(report);
  document.body.classList.remove("sessions-open");
  $("#toggle-sessions").setAttribute("aria-expanded", "false");
}

/** Show a session (and a panel): the URL says it, so a reload comes back to it. */
function navigate(key, panel = state.panel, { replace = false } = {}) {
  const switched = key && !sameKey(key, state.key);
  state.key = key || state.key;
  if (switched) {
    sessions.select(state.key);
    const item = sessions.find(state.key);
    chat.sessionStatus = item ? item.status : "idle";
    chat.show(state.key).catch(failedIn(chat));
    runs.show(state.key).catch(report);
    spend.show(state.key).catch(report);
  }
  showPanel(panel);
  toUrl(replace);
  if (switched && panel === "chat") $("#message").focus();
}

function report(error) {
  if (error instanceof api.ApiError && error.status === 401) return; // the sign-in asks
  apiState(error instanceof TypeError ? "server unreachable" : `error: ${error.message}`);
}

/** What a panel that could not open shows: the server's message in it (a 403, say), not a
 * blank panel; the bar says it too. A 401 is the sign-in's to ask. */
function failedIn(panel) {
  return (error) => {
    report(error);
    if (error instanceof api.ApiError && error.status !== 401) panel.failed(error);
  };
}

let pending = null;

/** A refresh of the sessions and the tracked submissions shortly after the stream moved. */
function soon() {
  if (pending) return;
  pending = setTimeout(() => {
    pending = null;
    chat.poll();
    pollSessions();
    pollRuns();
  }, 300);
}

async function pollSessions() {
  if (!access.can("sessions:read")) return;
  try {
    await sessions.refresh();
    const item = state.key && sessions.find(state.key);
    if (item) chat.setStatus(item.status);
    if (state.panel === "chat") await spend.refresh(); // it knows the session's id now
    apiState(null);
  } catch (error) {
    report(error);
  }
}

/** The session's runs not settled, while the chat shows it. */
function pollRuns() {
  if (!access.can("sessions:read") || state.panel !== "chat" || !state.key) return;
  runs.refresh().catch(report);
}

/** Who is signed in, beside Sign out (its scopes in the tooltip); the controls follow. */
async function showIdentity() {
  const who = await access.load();
  const element = $("#identity");
  element.textContent = access.describe(who);
  element.title = `Scopes: ${who.scopes.join(", ") || "none"}`;
  usage.signedInAs(who);
  if (!$("#sign-out").hidden) approvals.signedInAs(who.display || who.subject);
}

function forgetIdentity() {
  access.forget();
  $("#identity").textContent = "";
}

async function boot() {
  const { key, panel, windowSize } = fromUrl();
  if (windowSize) chat.window = windowSize;
  state.key = null; // (again after a sign-in: the session is shown anew)
  await showIdentity();
  if (!access.can("sessions:read")) {
    // Only the inbox (an approver who reads no session): it is all the page shows.
    showPanel("approvals");
    apiState(null);
    document.body.dataset.ready = "true";
    startPolls();
    return;
  }
  // The session the URL names opens at once, beside the lists it does not wait for.
  const lists = Promise.all([api.get("/agents"), sessions.refresh(), approvals.refresh(), usage.probe()]);
  if (key) navigate(key, panel, { replace: true });
  const [{ agents }, listed] = await lists;
  sessions.setAgents(agents);
  if (key) {
    const item = sessions.find(key);
    if (item) chat.setStatus(item.status);
    spend.refresh().catch(report); // the session's id is known now
    if (panel === "usage" && usage.available) navigate(null, "usage", { replace: true }); // its tab shows now
  } else {
    const first = listed[0] || (agents.length && { agent: agents[0].name, instance: "me", session: "default" });
    if (first) navigate({ agent: first.agent, instance: first.instance, session: first.session }, panel, { replace: true });
  }
  document.body.dataset.ready = "true"; // for tests: what is typed from now on is sent
  startPolls();
}

function startPolls() {
  if (state.booted) return;
  state.booted = true;
  setInterval(pollSessions, SESSIONS_POLL_MS);
  setInterval(() => approvals.refresh({ decided: state.panel === "approvals" }).catch(report), APPROVALS_POLL_MS);
  setInterval(pollRuns, RUNS_POLL_MS);
  setInterval(() => state.panel === "usage" && usage.refresh().catch(report), USAGE_POLL_MS);
}

// --- sign-in ---------------------------------------------------------------------------

const dialog = $("#login");
dialog.addEventListener("cancel", (event) => event.preventDefault()); // no way around it

function askToken(message = "") {
  $("#login-error").textContent = message;
  if (!dialog.open) dialog.showModal();
  $("#token").focus();
}

api.onUnauthorized((error) => {
  forgetIdentity(); // refused: whoever it was is signed in no more
  askToken(state.booted ? `Sign in again: ${error.message}` : "");
});
// A 403 although the control was shown: the scopes changed meanwhile. Read them again (the
// control goes); where it happened shows the server's message.
api.onForbidden(() => showIdentity().catch(report));

$("#login-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  try {
    const answer = await api.login($("#token").value);
    $("#sign-out").hidden = !answer.authRequired;
    $("#token").value = "";
    dialog.close();
    if (!state.booted) await boot();
    else {
      await showIdentity(); // perhaps another identity than before
      chat.show(state.key).catch(failedIn(chat));
    }
  } catch (error) {
    $("#login-error").textContent = error.message;
  }
});

$("#sign-out").addEventListener("click", async () => {
  chat.close();
  await api.logout().catch(() => {});
  $("#sign-out").hidden = true;
  forgetIdentity();
  askToken();
});

// --- layout --------------------------------------------------------------------------------

for (const name of PANELS) {
  $(`#tab-${name}`).addEventListener("click", (event) => {
    event.preventDefault();
    navigate(null, name);
  });
}
$("#toggle-sessions").addEventListener("click", () => {
  const open = document.body.classList.toggle("sessions-open");
  $("#toggle-sessions").setAttribute("aria-expanded", String(open));
});
window.addEventListener("popstate", () => {
  const { key, panel } = fromUrl();
  navigate(key, panel, { replace: true });
});

async function start() {
  const token = api.storedToken();
  let refused = "";
  if (token) {
    // The cookie may be gone (a new browser session): the tab's token gets it again.
    try {
      const answer = await api.login(token);
      $("#sign-out").hidden = !answer.authRequired;
    } catch (error) {
      api.forgetToken(); // refused (revoked, expired): the dialog asks for another, saying why
      refused = error.message;
    }
  }
  try {
    await boot();
  } catch (error) {
    if (error instanceof api.ApiError && error.status === 401) askToken(refused);
    else {
      report(error);
      setTimeout(start, 2000); // the server is not up yet
    }
  }
}

start();
