// The web UI: a sidebar of views, the bookmark list (pages of 50, "More" for the next), search as
// you type, the editor dialog, bulk tagging, import and export, and the keyboard.
import { download, get, request, token } from "./api.js";
import { h, snippet } from "./dom.js";
import { offerUndo } from "./undo.js";
import { closeViewer, showSnapshots, takeSnapshot } from "./snapshots.js";

const PAGE = 50;
const $ = (selector) => document.querySelector(selector);
const state = {
  view: { title: "All bookmarks", params: {} },
  search: "",
  items: [], // bookmarks shown, in order
  offset: 0,
  current: -1, // the row j/k moved to
  selected: new Set(),
  editing: null,
  generation: 0, // a newer request wins over a slower older one
};

function message(text, error = false) {
  const element = $("#message");
  element.textContent = text;
  element.classList.toggle("error", error);
}

// --- the sidebar ----------------------------------------------------------------------------

const ui = {
  message,
  link(id, label, count, onclick) {
    return h("button", {
      type: "button", class: "link", dataset: { nav: id },
      onclick: () => {
        document.querySelectorAll("nav .current").forEach((e) => e.classList.remove("current"));
        document.querySelector(`[data-nav="${CSS.escape(id)}"]`)?.classList.add("current");
        onclick();
      },
    }, h("span", { class: "label" }, label), count === null ? "" : h("span", { class: "count" }, count));
  },
  selection: () => [...state.selected],
  // After a change made from a view (a link check): the list and every sidebar count again.
  async refresh() {
    await Promise.all([load(), renderSidebar()]);
  },
  show(view) {
    state.view = view;
    $("#search").value = "";
    state.search = "";
    load();
  },
};

// The sidebar's views are imported (and fetched: index.html does not preload them) after the first
// list: imported at the top, app.js (and the list's request) waited until all seven were fetched
// and run.
let views = null;

async function renderSidebar() {
  const nav = $("#sidebar");
  try {
    views ??= (await import("../views/index.js")).default;
  } catch (error) {
    // Not fetched: the server went away, or the page is being left (a reload while they load).
    nav.replaceChildren(h("p", { class: "count" }, error.message));
    return;
  }
  const sections = [];
  for (const view of views) {
    const section = h("section", { id: `view-${view.id}` }, h("h3", {}, view.title));
    try {
      await view.render(section, ui);
    } catch (error) {
      section.append(h("p", { class: "count" }, error.message));
    }
    sections.push(section);
  }
  nav.replaceChildren(...sections);
}

// --- the list -------------------------------------------------------------------------------

function when(text) {
  return text ? text.slice(0, 10) : "";
}

function openable(url) {
  return /^https?:\/\//i.test(url);
}

function row(bookmark, hit) {
  const star = h("button", {
    type: "button", class: `star${bookmark.starred ? " on" : ""}`,
    title: bookmark.starred ? "Unstar (s)" : "Star (s)", "aria-pressed": String(bookmark.starred),
    onclick: () => toggleStar(bookmark),
  }, bookmark.starred ? "★" : "☆");
  const check = h("input", {
    type: "checkbox", title: "Select", checked: state.selected.has(bookmark.id),
    onchange: (event) => {
      if (event.target.checked) state.selected.add(bookmark.id);
      else state.selected.delete(bookmark.id);
      updateSelection();
    },
  });
  // Only web addresses become links: a bookmarklet (javascript:), a data: or file: URL, a
  // browser's own page (about:, chrome:, place:) is shown as text and copied, never run or opened.
  const title = openable(bookmark.url)
    ? h("a", {
      class: "title", href: bookmark.url, target: "_blank", rel: "noopener noreferrer",
      onclick: () => request("POST", `/bookmarks/${bookmark.id}/visit`).catch(() => {}),
    }, bookmark.title || bookmark.url)
    : h("span", { class: "title inert", title: "Not opened from here: copy it" },
      bookmark.title || bookmark.url);
  const copy = openable(bookmark.url) ? null : h("button", {
    type: "button", class: "copy",
    onclick: (event) => navigator.clipboard.writeText(bookmark.url)
      .then(() => { event.target.textContent = "Copied"; })
      .catch(() => { event.target.textContent = "Copy failed"; }),
  }, "Copy");
  const archived = bookmark.archived_url && openable(bookmark.archived_url)
    ? h("span", { class: "archived" }, "dead; ",
      h("a", { href: bookmark.archived_url, target: "_blank", rel: "noopener noreferrer" },
        `archived copy from ${when(bookmark.archived_at)}`))
    : null;
  const body = h("div", {},
    h("span", { class: "row-actions" }, copy,
      h("button", { type: "button", class: "edit", onclick: () => openEditor(bookmark) }, "Edit")),
    title,
    archived,
    h("span", { class: "meta" }, `added ${when(bookmark.added)}`,
      bookmark.visit_count ? ` · ${bookmark.visit_count} visit(s)` : ""),
    h("div", { class: "url" }, bookmark.url),
    hit && hit.snippet ? h("p", { class: "snippet" }, snippet(hit.snippet)) : null,
    bookmark.description && !(hit && hit.snippet)
      ? h("p", { class: "description" }, bookmark.description) : null,
    bookmark.tags.length
      ? h("div", { class: "tags" }, bookmark.tags.map((tag) => h("span", { class: "tag" }, tag)))
      : null,
  );
  return h("li", { dataset: { id: bookmark.id } }, check, star, body);
}

function paint(append, rows) {
  const list = $("#list");
  if (append) list.append(...rows);
  else list.replaceChildren(...rows);
  highlight();
}

async function load(append = false) {
  const generation = ++state.generation;
  if (!append) {
    state.offset = 0;
    state.current = -1;
  }
  try {
    if (state.search) {
      $("#heading").textContent = `Search: ${state.search}`;
      const result = await get("/search", { q: state.search, fts: 1, limit: 100 });
      if (generation !== state.generation) return;
      state.items = result.hits.map((hit) => hit.bookmark);
      paint(false, result.hits.map((hit) => row(hit.bookmark, hit)));
      $("#list").dataset.view = `search:${state.search}`; // what the list now shows (for tests too)
      $("#more").hidden = true;
      const found = result.hits.length ? `${result.hits.length} result(s)` : "nothing found";
      message(result.notice ? `${found} — ${result.notice}` : found); // e.g. no FTS5: substring
      return;
    }
    $("#heading").textContent = state.view.title;
    const page = await get("/bookmarks", { ...state.view.params, limit: PAGE, offset: state.offset });
    if (generation !== state.generation) return;
    state.items = append ? state.items.concat(page.items) : page.items;
    paint(append, page.items.map((bookmark) => row(bookmark)));
    $("#list").dataset.view = state.view.title;
    state.offset += page.items.length;
    $("#more").hidden = !page.has_more;
    message(state.items.length ? "" : "no bookmarks here");
    document.body.dataset.loaded = "true";
  } catch (error) {
    if (generation === state.generation) message(error.message, true);
  }
}

function highlight() {
  const rows = [...document.querySelectorAll("#list > li")];
  rows.forEach((element, index) => element.classList.toggle("current", index === state.current));
  if (state.current >= 0 && rows[state.current]) rows[state.current].scrollIntoView({ block: "nearest" });
}

function replaceRow(bookmark) {
  const index = state.items.findIndex((item) => item.id === bookmark.id);
  if (index < 0) return;
  state.items[index] = bookmark;
  const old = document.querySelector(`#list > li[data-id="${bookmark.id}"]`);
  old?.replaceWith(row(bookmark));
  highlight();
}

async function toggleStar(bookmark) {
  try {
    replaceRow(await request("PATCH", `/bookmarks/${bookmark.id}`, { json: { starred: !bookmark.starred } }));
  } catch (error) {
    message(error.message, true);
  }
}

function updateSelection() {
  const count = state.selected.size;
  $("#selection-tools").hidden = count === 0;
  $("#selected-count").textContent = `${count} selected`;
}

// --- editing --------------------------------------------------------------------------------

function openEditor(bookmark) {
  state.editing = bookmark;
  const form = $("#edit-form");
  form.url.value = bookmark ? bookmark.url : "";
  form.title.value = bookmark ? bookmark.title : "";
  form.description.value = bookmark ? bookmark.description : "";
  form.tags.value = bookmark ? bookmark.tags.join(", ") : "";
  form.starred.checked = bookmark ? bookmark.starred : false;
  $("#edit-heading").textContent = bookmark ? "Edit bookmark" : "Add a bookmark";
  $("#edit-delete").hidden = !bookmark;
  $("#edit-error").textContent = "";
  $("#editor").showModal();
  form.url.focus();
  showSnapshots(bookmark).catch((error) => message(error.message, true));
}

async function saveEditor(event) {
  event.preventDefault();
  const form = $("#edit-form");
  const fields = {
    url: form.url.value.trim(),
    title: form.title.value,
    description: form.description.value,
    tags: form.tags.value.split(",").map((tag) => tag.trim()).filter(Boolean),
    starred: form.starred.checked,
  };
  try {
    if (state.editing) {
      const before = state.editing;
      const saved = await request("PATCH", `/bookmarks/${state.editing.id}`, { json: fields });
      replaceRow(saved);
      if (textChanged(before, saved)) offerUndo(`Saved “${saved.title || saved.url}”`, ui.refresh);
    } else {
      await request("POST", "/bookmarks", { json: fields });
      await load();
    }
    $("#editor").close();
    renderSidebar();
  } catch (error) {
    $("#edit-error").textContent = error.message;
  }
}

// Text an edit overwrote (url, title, description, tags): the server keeps it for undo.
function textChanged(before, after) {
  return ["url", "title", "description"].some((name) => before[name] !== after[name]) ||
    before.tags.join("\n") !== after.tags.join("\n");
}

async function deleteEditing() {
  const bookmark = state.editing;
  if (!bookmark || !window.confirm(`Delete “${bookmark.title || bookmark.url}”?`)) return;
  try {
    await request("DELETE", `/bookmarks/${bookmark.id}`);
    $("#editor").close();
    state.selected.delete(bookmark.id);
    await load();
    renderSidebar();
    offerUndo(`Deleted “${bookmark.title || bookmark.url}” (moved to the trash)`, ui.refresh);
  } catch (error) {
    $("#edit-error").textContent = error.message;
  }
}

// --- bulk tags, queue, import, export -------------------------------------------------------

async function queueSelected() {
  try {
    const added = await request("POST", "/queue", { json: { ids: [...state.selected] } });
    state.selected.clear();
    updateSelection();
    await load();
    renderSidebar();
    message(`queued ${added.length} bookmark(s)`); // after load(), which resets the message
  } catch (error) {
    message(error.message, true);
  }
}

async function bulkTag() {
  const tag = $("#bulk-tag").value.trim();
  if (!tag) return;
  try {
    const result = await request("POST", "/bookmarks/tags", { json: { ids: [...state.selected], add: [tag] } });
    state.selected.clear();
    updateSelection();
    $("#bulk-tag").value = "";
    await load();
    message(`tagged ${result.changed} bookmark(s) with ${tag}`); // after the reload, which clears it
    renderSidebar();
    message(`tagged ${result.changed} bookmark(s) with ${tag}`); // after load(), which resets it
    offerUndo(`Tagged ${result.changed} bookmark(s) with ${tag}`, ui.refresh);
  } catch (error) {
    message(error.message, true);
  }
}

async function importFile(event) {
  event.preventDefault();
  const file = $("#import-file").files[0];
  if (!file) return;
  const fmt = $("#import-format").value;
  const update = $("#import-update").checked ? "?update=1" : "";
  const report = $("#import-report");
  report.textContent = "importing…";
  try {
    const result = await request("POST", `/import/${fmt}${update}`, { body: file });
    report.textContent = `added ${result.added}, updated ${result.updated}, ` +
      `skipped ${result.skipped}, invalid ${result.invalid}`;
    await load();
    renderSidebar();
  } catch (error) {
    report.textContent = `import failed: ${error.message}`;
  }
}

// --- keyboard -------------------------------------------------------------------------------

function typing(target) {
  return target.closest("input, textarea, select, dialog[open]") !== null;
}

function onKey(event) {
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  if (event.key === "Escape" && event.target === $("#search")) {
    $("#search").value = "";
    state.search = "";
    $("#search").blur();
    load();
    return;
  }
  if (typing(event.target)) return;
  const current = state.items[state.current];
  if (event.key === "/") {
    event.preventDefault();
    $("#search").focus();
  } else if (event.key === "j" || event.key === "k") {
    const step = event.key === "j" ? 1 : -1;
    state.current = Math.max(0, Math.min(state.items.length - 1, state.current + step));
    highlight();
  } else if (event.key === "e" && current) {
    event.preventDefault();
    openEditor(current);
  } else if (event.key === "s" && current) {
    toggleStar(current);
  } else if (event.key === "a") {
    event.preventDefault();
    openEditor(null);
  }
}

// --- start ----------------------------------------------------------------------------------

let searchTimer = null;
$("#search").addEventListener("input", () => {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(() => {
    state.search = $("#search").value.trim();
    load();
  }, 120);
});
$("#add").addEventListener("click", () => openEditor(null));
$("#edit-form").addEventListener("submit", saveEditor);
$("#edit-cancel").addEventListener("click", () => $("#editor").close());
$("#edit-delete").addEventListener("click", deleteEditing);
$("#snapshot-take").addEventListener("click", () => takeSnapshot(state.editing));
$("#snapshot-close").addEventListener("click", closeViewer);
$("#more").addEventListener("click", () => load(true));
$("#bulk-apply").addEventListener("click", bulkTag);
$("#bulk-queue").addEventListener("click", queueSelected);
$("#import-form").addEventListener("submit", importFile);
for (const link of document.querySelectorAll("[data-export]")) {
  link.addEventListener("click", (event) => {
    if (!token()) return; // same-origin on loopback: the plain link streams the file
    event.preventDefault();
    download(link.dataset.export).catch((error) => message(error.message, true));
  });
}
document.addEventListener("keydown", onKey);
// The list first, then the sidebar: at a million bookmarks the sidebar's counts take the server
// hundreds of ms, and asked for at the same time they held back the list a person waits for.
load().then(renderSidebar);
