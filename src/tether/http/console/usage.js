// The Usage panel: a tenant's spend against its budget for the day or the month
// (GET /usage?tenant=...&period=day|month): each limit's spent, budget and what remains, a
// bar of the share used (budgetTable, which the session's spend panel shows too). A server
// without the route (404), or one that does not let the identity read it (403), hides the
// tab and the panel.

import { ApiError, get } from "./api.js";
import { fill, h } from "./dom.js";

export const LIMITS = [
  ["modelCalls", "Model calls"],
  ["tokens", "Tokens"],
  ["costUsd", "Cost (USD)"],
  ["toolCalls", "Tool calls"],
];

/** A table of what was spent against a budget (GET /usage's ``spent``, ``budget`` and
 *  ``remaining``, of a tenant or a session): a row per limit, a used-up one marked
 *  ``exhausted``, with a meter of the share used. */
export function budgetTable(usage) {
  const budget = usage.budget || {};
  const remaining = usage.remaining || {};
  const rows = LIMITS.map(([key, label]) => {
    const spent = usage.spent ? usage.spent[key] : null;
    const max = budget[key];
    const limited = max !== null && max !== undefined;
    const left = remaining[key];
    const share = limited && max > 0 ? Math.min(1, (spent || 0) / max) : limited ? 1 : 0;
    const out = limited && left !== null && left !== undefined && left <= 0;
    return h(
      "tr",
      { dataset: { limit: key }, class: out ? "exhausted" : "" },
      h("th", { scope: "row" }, label),
      h("td", { class: "spent" }, amount(key, spent)),
      h("td", { class: "budget" }, limited ? amount(key, max) : "no limit"),
      h("td", { class: "remaining" }, limited ? amount(key, left) : "—"),
      h("td", {}, limited ? h("meter", { min: 0, max: 1, value: share, high: 0.8, optimum: 0, "aria-label": `${label}: share of the budget used` }) : null),
    );
  });
  return h(
    "table",
    { class: "usage-budget" },
    h("thead", {}, h("tr", {}, ["", "Spent", "Budget", "Remaining", "Used"].map((name) => h("th", { scope: "col" }, name)))),
    h("tbody", {}, rows),
  );
}

/** An amount as shown: a cost in dollars to four places, a count with its thousands. */
export function amount(key, value) {
  if (value === null || value === undefined) return "—";
  return key === "costUsd" ? `$${Number(value).toFixed(4)}` : Number(value).toLocaleString("en");
}

/** The server has no usage route (an older one answers 404) or will not let this identity
 *  read it (403); a tenant it does not know is an answer to show, not a missing route. */
function routeMissing(error) {
  return error.status === 403 || (error.status === 404 && error.type !== "tenant_not_found");
}

export class UsagePanel {
  constructor(root, { tab }) {
    this.root = root;
    this.tab = tab;
    this.body = root.querySelector("#usage-body");
    this.problem = root.querySelector("#usage-error");
    this.tenant = root.querySelector("#usage-tenant");
    this.period = root.querySelector("#usage-period");
    this.available = null; // unknown until the server answered once
    this.tenant.addEventListener("change", () => this.refresh().catch(() => {}));
    this.period.addEventListener("change", () => this.refresh().catch(() => {}));
  }

  /** The identity's tenant is the one shown (an operator of no tenant types one). */
  signedInAs(who) {
    this.tenant.value = (who && who.tenant) || this.tenant.value;
    this.tenant.readOnly = Boolean(who && who.tenant);
  }

  query() {
    return { tenant: this.tenant.value.trim() || undefined, period: this.period.value };
  }

  /** Ask once whether the server has the route (a 404 hides the tab) and lets this
   *  identity read it (a 403 hides it too). Resolves to whether the tab shows. */
  async probe() {
    try {
      await get("/usage", this.query());
      this.setAvailable(true);
    } catch (error) {
      this.setAvailable(!(error instanceof ApiError && routeMissing(error)));
    }
    return this.available;
  }

  setAvailable(available) {
    this.available = available;
    this.tab.hidden = !available;
    if (!available) this.root.hidden = true;
  }

  async refresh() {
    if (this.available === false) return;
    this.problem.textContent = "";
    let answer;
    try {
      answer = await get("/usage", this.query());
    } catch (error) {
      if (error instanceof ApiError && routeMissing(error)) {
        this.setAvailable(false);
        return;
      }
      this.problem.textContent = error.message;
      fill(this.body);
      return;
    }
    this.render(answer);
  }

  render(usage) {
    fill(
      this.body,
      h("p", { class: "window" }, `${usage.tenant ? `Tenant ${usage.tenant}` : "Every tenant"} · ${usage.period} from `,
        h("time", { datetime: usage.start }, usage.start), " to ", h("time", { datetime: usage.end }, usage.end)),
      usage.budget ? null : h("p", { class: "empty" }, "No budget is set for this period: spend only."),
      budgetTable(usage),
    );
  }
}
