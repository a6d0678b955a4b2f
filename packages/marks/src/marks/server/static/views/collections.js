import { get } from "../js/api.js";
import { h } from "../js/dom.js";

// Smart collections: each is a filter the list API already understands.
const COLLECTIONS = [
  { id: "all", title: "All bookmarks", params: {}, count: "bookmarks" },
  { id: "starred", title: "Starred", params: { starred: true }, count: "starred" },
  { id: "unread", title: "Unread", params: { query: "unread" }, count: "unread" },
  { id: "untagged", title: "Untagged", params: { query: "untagged" }, count: "untagged" },
  { id: "broken", title: "Broken", params: { query: "broken" }, count: "broken" },
  { id: "recent", title: "Recently visited", params: { query: "visited", sort: "visited" } },
];

export default {
  id: "collections",
  title: "Collections",
  async render(container, ui) {
    const stats = await get("/stats");
    const list = h("ul");
    for (const item of COLLECTIONS) {
      const count = item.count ? stats[item.count] : null;
      list.append(
        h("li", {},
          ui.link(`collection-${item.id}`, item.title, count, () =>
            ui.show({ title: item.title, params: item.params }))),
      );
    }
    container.append(list);
  },
};
