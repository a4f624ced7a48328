// Who is signed in (GET /me) and what they may do: the one place the console decides which
// controls to show. A control says the scope it needs in its markup, `data-needs="scope"`
// (several, space-separated: any of them), as the server's ROUTE_SCOPES has it for the
// route the control calls; what the identity may not use is hidden, not merely disabled.
// Elements added later (approval cards, a record's Fork here) are checked as they arrive.

import { get } from "./api.js";

let identity = null;

/** Whether the signed-in identity holds `scope` (`admin` holds every one). Before GET /me
 * answered, nothing is allowed: the controls show once it is known what they may do. */
export function can(scope) {
  if (!identity) return false;
  return identity.scopes.includes(scope) || identity.scopes.includes("admin");
}

/** Whether the identity holds any of the space-separated scopes of a `data-needs`. */
function allowed(needs) {
  return needs.split(/\s+/).filter(Boolean).some(can);
}

/** Hide (or show again) `root` and the elements under it that need a scope. */
export function guard(root = document.body) {
  const elements = root.matches && root.matches("[data-needs]") ? [root] : [];
  elements.push(...root.querySelectorAll("[data-needs]"));
  for (const element of elements) element.classList.toggle("lacks-scope", !allowed(element.dataset.needs));
}

/** Whether an element is left shown by its `data-needs` (an element without one is). */
export function shown(element) {
  return !element.classList.contains("lacks-scope");
}

/** The identity as GET /me answered it: {subject, tenant?, display?, scopes, agents?}. */
export function current() {
  return identity;
}

/** The name people are shown: the display name, else the subject; and the tenant. */
export function describe(who = identity) {
  if (!who) return "";
  const name = who.display || who.subject;
  return who.tenant ? `${name} · ${who.tenant}` : name;
}

/** Ask the server who this is (after a sign-in, on load, after a 403: the scopes may have
 * changed), then show and hide the controls to match. Resolves to the identity. */
export async function load() {
  identity = await get("/me");
  guard();
  return identity;
}

/** Forget the identity (signed out): every guarded control is hidden until the next one. */
export function forget() {
  identity = null;
  guard();
}

// Cards and rows built after load() are guarded as they are added, before they are painted.
new MutationObserver((changes) => {
  for (const change of changes) {
    for (const node of change.addedNodes) if (node.nodeType === Node.ELEMENT_NODE) guard(node);
  }
}).observe(document.body, { childList: true, subtree: true });
