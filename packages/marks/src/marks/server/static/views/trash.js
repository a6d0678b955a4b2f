import { get, request } from "../js/api.js";
import { h } from "../js/dom.js";
import { showToast } from "../js/undo.js";

// The trash: deleted bookmarks, newest first, each with a Restore button; "Empty trash" forgets
// them for good (after asking). Restoring says when the URL was bookmarked again meanwhile.
function entry(item, ui) {
  const restore = h("button", {
    type: "button", class: "trash-restore", title: `Restore ${item.title || item.url}`,
    onclick: async () => {
      try {
        const result = await request("POST", `/trash/${item.id}/restore`);
        showToast([`restored ${item.title || item.url}`, ...result.notes].join(" — "));
      } catch (error) {
        ui.message(error.message, true);
      }
      await ui.refresh();
    },
  }, "Restore");
  return h("li", { class: "trash-item", dataset: { id: item.id } },
    h("span", { class: "trash-title", title: item.url }, item.title || item.url),
    h("span", { class: "count" }, (item.deleted_at || "").slice(0, 10)), restore);
}

export default {
  id: "trash",
  title: "Trash",
  async render(container, ui) {
    const items = await get("/trash");
    if (!items.length) {
      container.append(h("p", { class: "count trash-empty" }, "Nothing deleted."));
      return;
    }
    const empty = h("button", {
      type: "button", class: "danger trash-empty-all",
      onclick: async () => {
        if (!window.confirm(`Forget ${items.length} deleted bookmark(s) for good?`)) return;
        await request("DELETE", "/trash").catch((error) => ui.message(error.message, true));
        await ui.refresh();
      },
    }, "Empty trash");
    container.append(
      h("p", { class: "count" }, `${items.length} deleted (kept 30 days by default)`),
      h("ul", { class: "trash-list" }, items.slice(0, 50).map((item) => entry(item, ui))),
      empty);
  },
};
