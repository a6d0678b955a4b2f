import { get } from "../js/api.js";
import { h } from "../js/dom.js";

// The tag tree: parents count their descendants; a click lists a tag with its subtags.
function branch(nodes, ui, depth) {
  const list = h("ul");
  for (const node of nodes) {
    const children = node.children.length ? branch(node.children, ui, depth + 1) : null;
    if (children) children.hidden = depth > 0;
    const toggle = h("span", { class: "toggle" }, children ? (children.hidden ? "▸" : "▾") : "");
    // A leaf has nothing to fold: its toggle's click goes on to the link and lists the tag.
    if (children) {
      toggle.addEventListener("click", (event) => {
        event.stopPropagation();
        children.hidden = !children.hidden;
        toggle.textContent = children.hidden ? "▸" : "▾";
      });
    }
    const link = ui.link(`tag-${node.path}`, node.name, node.count, () =>
      ui.show({ title: `#${node.path}`, params: { tag: node.path } }));
    link.prepend(toggle);
    link.dataset.tag = node.path;
    list.append(h("li", {}, link, children));
  }
  return list;
}

export default {
  id: "tags",
  title: "Tags",
  async render(container, ui) {
    const nodes = await get("/tags", { tree: 1 });
    container.append(nodes.length ? branch(nodes, ui, 0) : h("p", { class: "count" }, "no tags yet"));
  },
};
