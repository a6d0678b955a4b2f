import { get, request } from "../js/api.js";
import { h } from "../js/dom.js";

// Link health: how many links are broken (confirmed: failed on checks hours apart) or never
// checked, the "Broken links" collection, and a button that starts a batch check (the selected
// bookmarks, or every broken and unchecked link) and follows its progress until it is done.
const POLL_MS = 500;
const BROKEN = { title: "Broken links", params: { query: "broken" } };
let last = null; // the last check this page followed, still shown after the sidebar is redrawn

function counts(overview, ui) {
  return h("ul", { class: "health-counts" },
    h("li", {}, ui.link("health-broken", "Broken links", overview.broken, () => ui.show(BROKEN))),
    h("li", { class: "count health-confirmed" }, `${overview.confirmed} confirmed`),
    h("li", { class: "count health-unconfirmed" }, `${overview.unconfirmed} not yet confirmed`),
    h("li", { class: "count health-unchecked" }, `${overview.unchecked} never checked`));
}

function describe(check) {
  const results = Object.entries(check.by_result).map(([name, n]) => `${name.replace("_", " ")} ${n}`);
  const state = check.state === "running" ? "checking" : check.state;
  return `${state}: ${check.done} of ${check.total}` + (results.length ? ` (${results.join(", ")})` : "");
}

function paint(status, check) {
  const bar = h("progress", { class: "health-progress", max: Math.max(check.total, 1), value: check.done });
  const text = h("p", { class: "count health-status", role: "status" }, describe(check));
  if (check.error) text.append(` — ${check.error}`);
  status.replaceChildren(bar, text);
  status.dataset.check = check.id;
  status.dataset.state = check.state;
}

// Follows one check: the progress bar and its text change until the check is no longer running.
async function follow(id, status, ui) {
  for (;;) {
    let check;
    try {
      check = await get(`/bookmarks/health/${encodeURIComponent(id)}`);
    } catch (error) {
      status.replaceChildren(h("p", { class: "count health-status" }, error.message));
      return null;
    }
    paint(status, check);
    if (check.state !== "running") {
      last = check;
      return check;
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

export default {
  id: "health",
  title: "Link health",
  async render(container, ui) {
    const overview = await get("/bookmarks/health");
    const status = h("div", { class: "health-run" });
    const button = h("button", {
      type: "button", id: "check-links",
      title: "Check the selected bookmarks, or every broken and never-checked link",
      onclick: async () => {
        const ids = ui.selection();
        const body = ids.length ? { ids } : { query: "broken or unchecked" };
        button.disabled = true;
        try {
          let id;
          try {
            id = (await request("POST", "/bookmarks/health", { json: body })).id;
          } catch (error) {
            if (error.status !== 429) throw error;
            id = (await get("/bookmarks/health")).running; // one is running: follow it instead
            if (!id) throw error;
            ui.message("another link check is running: following it");
          }
          const done = await follow(id, status, ui);
          if (done) {
            await ui.refresh(); // the counts, the list and this view (showing `last`) again
            ui.message(`link check ${describe(done)}`);
          }
        } catch (error) {
          ui.message(error.message, true);
        } finally {
          button.disabled = false;
        }
      },
    }, "Check links");
    container.append(counts(overview, ui), button, status);
    if (overview.running) follow(overview.running, status, ui); // one started elsewhere
    else if (last) paint(status, last);
  },
};
