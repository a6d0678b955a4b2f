import { get, request } from "../js/api.js";
import { h } from "../js/dom.js";

// The reading queue: the next item first, each with its progress and priority, changed in place.
// Progress 100 completes an item (it leaves the queue and is counted as completed).
function item(entry, ui, refresh) {
  const progress = h("input", {
    type: "range", min: 0, max: 100, step: 5, value: entry.progress,
    "aria-label": `Progress of ${entry.title || entry.url}`, class: "queue-progress",
    onchange: async (event) => {
      await change(entry.id, { progress: Number(event.target.value) }, ui);
      refresh();
    },
  });
  const priority = h("select", {
    "aria-label": `Priority of ${entry.title || entry.url}`, class: "queue-priority",
    onchange: async (event) => {
      await change(entry.id, { priority: Number(event.target.value) }, ui);
      refresh();
    },
  }, [1, 2, 3, 4, 5].map((level) => h("option", { value: level, selected: level === entry.priority }, `P${level}`)));
  const remove = h("button", {
    type: "button", class: "queue-remove", title: "Take it out of the queue",
    onclick: async () => {
      await request("DELETE", `/queue/${entry.id}`).catch((error) => ui.message(error.message, true));
      refresh();
    },
  }, "×");
  const link = h("a", { href: entry.url, target: "_blank", rel: "noopener noreferrer" }, entry.title || entry.url);
  return h("li", { class: "queue-item", dataset: { id: entry.id } },
    link, h("div", { class: "queue-controls" }, priority, progress, h("span", { class: "count" }, `${entry.progress}%`), remove));
}

async function change(id, body, ui) {
  try {
    await request("PATCH", `/queue/${id}`, { json: body });
  } catch (error) {
    ui.message(error.message, true);
  }
}

export default {
  id: "queue",
  title: "Reading queue",
  async render(container, ui) {
    const body = h("div", { class: "queue" });
    container.append(body);
    const refresh = async () => {
      const [items, stats] = await Promise.all([get("/queue"), get("/queue/stats")]);
      const summary = h("p", { class: "count queue-stats" },
        `${stats.queued} queued · ${stats.in_progress} in progress · ${stats.completed} completed`);
      const next = items.length
        ? h("p", { class: "queue-next" }, "Next: ", h("strong", {}, items[0].title || items[0].url))
        : h("p", { class: "count" }, "Nothing queued: add from a bookmark's editor or `marks queue add`.");
      body.replaceChildren(summary, next, h("ol", { class: "queue-list" }, items.map((entry) => item(entry, ui, refresh))));
    };
    ui.onChange?.(refresh);
    await refresh();
  },
};
