// The popup: the current page's bookmark, a search box and the Dates tab. Everything from the
// server is written with textContent, never as HTML.

import { Client } from "./lib/api.js";
import { MONTHS, PERIODS, calendar, period, rangeQuery } from "./lib/dates.js";
import { api, load } from "./lib/settings.js";
import { bookmarkable } from "./lib/urlkey.js";

const browser = api();
const $ = (id) => document.getElementById(id);
let server;
let tab;
let current = null; // the page's bookmark, or null

function say(message, ok = false) {
  const status = $("status");
  status.hidden = !message;
  status.textContent = message || "";
  status.classList.toggle("ok", ok);
}

async function attempt(work, done) {
  try {
    const result = await work();
    if (done) say(done, true);
    return result;
  } catch (error) {
    say(error.message); // one line: unreachable, refused token, or the server's reason
    return undefined;
  }
}

function tagsOf(text) {
  return text.split(",").map((tag) => tag.trim()).filter(Boolean);
}

function show(bookmark) {
  current = bookmark;
  $("save").textContent = bookmark ? "Save" : "Add";
  $("delete").hidden = !bookmark;
  $("star").textContent = bookmark?.starred ? "★ Starred" : "☆ Star";
  $("star").setAttribute("aria-pressed", String(Boolean(bookmark?.starred)));
  if (bookmark) {
    $("title").value = bookmark.title;
    $("tags").value = bookmark.tags.join(", ");
    $("description").value = bookmark.description;
  }
}

async function changed(bookmark, removed) {
  await browser.runtime
    .sendMessage({ type: "changed", bookmark, removed, tabId: tab?.id, url: tab?.url })
    .catch(() => {});
}

async function save(event) {
  event.preventDefault();
  const fields = {
    title: $("title").value.trim(),
    tags: tagsOf($("tags").value),
    description: $("description").value.trim(),
  };
  if (current) {
    const updated = await attempt(() => server.update(current.id, fields), "Saved");
    if (updated) {
      show(updated);
      await changed(updated);
    }
  } else {
    const added = await attempt(() => server.add({ url: tab.url, ...fields }), "Added");
    if (added) {
      show(added);
      await changed(added);
    }
  }
}

async function star() {
  let bookmark = current;
  if (!bookmark) {
    bookmark = await attempt(() =>
      server.add({ url: tab.url, title: $("title").value.trim(), tags: tagsOf($("tags").value), starred: true }),
    );
  } else {
    bookmark = await attempt(() => server.update(current.id, { starred: !current.starred }));
  }
  if (bookmark) {
    show(bookmark);
    say(bookmark.starred ? "Starred" : "Unstarred", true);
    await changed(bookmark);
  }
}

async function remove() {
  if (!current) return;
  const gone = current;
  const done = await attempt(() => server.remove(gone.id).then(() => true),
    "Moved to the trash (marks undo, or the Trash in the web UI, brings it back)");
  if (done) {
    show(null);
    await changed(undefined, gone.url);
  }
}

async function queue() {
  let bookmark = current;
  if (!bookmark) {
    bookmark = await attempt(() => server.add({ url: tab.url, title: $("title").value.trim() }));
    if (!bookmark) return;
    show(bookmark);
    await changed(bookmark);
  }
  const priority = Number($("priority").value);
  await attempt(() => server.queue(bookmark.id, priority), `In the reading queue (priority ${priority})`);
}

async function completeTags() {
  const text = $("tags").value;
  const prefix = text.split(",").pop().trim();
  if (!prefix) return;
  const names = await server.tagNames(prefix).catch(() => []);
  const head = text.includes(",") ? `${text.slice(0, text.lastIndexOf(",") + 1)} ` : "";
  $("tag-names").replaceChildren(
    ...names.map((name) => Object.assign(document.createElement("option"), { value: head + name })),
  );
}

// "[word]" in a snippet marks a match: shown highlighted, built from text nodes only.
function snippetNode(snippet) {
  const span = document.createElement("span");
  span.className = "snippet";
  for (const [index, part] of snippet.split(/\[|\]/).entries()) {
    const node = index % 2 ? document.createElement("mark") : document.createTextNode("");
    node.textContent = part;
    span.append(node);
  }
  return span;
}

function item(bookmark, snippet) {
  const li = document.createElement("li");
  const link = document.createElement("a");
  link.href = bookmark.url;
  link.target = "_blank";
  link.rel = "noopener noreferrer";
  link.textContent = (bookmark.starred ? "★ " : "") + (bookmark.title || bookmark.url);
  li.append(link);
  if (snippet) li.append(snippetNode(snippet));
  return li;
}

let searchTimer;
function search() {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(async () => {
    const q = $("search").value.trim();
    if (!q) {
      $("search-results").replaceChildren();
      return;
    }
    const result = await attempt(() => server.search(q));
    if (result) {
      say("");
      $("search-results").replaceChildren(...result.hits.map((hit) => item(hit.bookmark, hit.snippet)));
    }
  }, 150);
}

// Dates: the recent periods first, then year -> month -> day, as the shell's /recent and /by-date.
const datePath = [];

async function showRange(range, label) {
  const field = $("date-field").value;
  const page = await attempt(() => server.list(rangeQuery(field, range), field === "added" ? "added" : "visited"));
  if (page) {
    say("");
    $("date-path").textContent = label;
    $("date-results").replaceChildren(...page.items.map((bookmark) => item(bookmark)));
  }
}

function choice(label, action) {
  const li = document.createElement("li");
  const button = document.createElement("button");
  button.type = "button";
  button.textContent = label;
  button.addEventListener("click", action);
  li.append(button);
  return li;
}

async function dates() {
  const field = $("date-field").value;
  const [year, month] = datePath;
  const choices = [];
  if (datePath.length === 0) {
    for (const [name, label] of PERIODS) choices.push(choice(label, () => showRange(period(name), label)));
    const tree = await attempt(() => server.byDate(field, "year"));
    for (const entry of tree?.periods ?? []) {
      choices.push(choice(`${entry.period} (${entry.count})`, () => { datePath.push(Number(entry.period)); dates(); }));
    }
    $("date-path").textContent = "";
  } else {
    choices.push(choice("↑ Back", () => { datePath.pop(); dates(); }));
    const granularity = datePath.length === 1 ? "month" : "day";
    const parts = datePath.length === 1 ? { year } : { year, month };
    const tree = await attempt(() => server.byDate(field, granularity, parts));
    for (const entry of tree?.periods ?? []) {
      const pieces = entry.period.split("-").map(Number);
      const label = granularity === "month" ? `${MONTHS[pieces[1] - 1]} (${entry.count})` : `${pieces[2]} (${entry.count})`;
      choices.push(
        choice(label, () => {
          if (granularity === "month") {
            datePath.push(pieces[1]);
            dates();
          } else {
            showRange(calendar(...pieces), entry.period);
          }
        }),
      );
    }
    const range = datePath.length === 1 ? calendar(year) : calendar(year, month);
    await showRange(range, datePath.join("-"));
  }
  $("date-choices").replaceChildren(...choices);
}

function switchTab(name) {
  for (const button of document.querySelectorAll("nav button")) {
    button.setAttribute("aria-selected", String(button.dataset.tab === name));
  }
  for (const section of document.querySelectorAll(".tab")) section.hidden = section.id !== `tab-${name}`;
  if (name === "search") $("search").focus();
  if (name === "dates") dates();
}

async function shortcuts() {
  const commands = await browser.commands.getAll();
  const names = {
    _execute_action: "popup",
    "quick-add": "quick add",
    "toggle-star": "star",
    "save-snapshot": "snapshot",
  };
  $("shortcuts").textContent = commands
    .map((command) => `${names[command.name] ?? command.name}: ${command.shortcut || "not set"}`)
    .join(" · ");
}

async function start() {
  const settings = await load();
  server = new Client(settings);
  [tab] = await browser.tabs.query({ active: true, currentWindow: true });
  const target = new URLSearchParams(location.search).get("url"); // tests and "open in tab"
  if (target) tab = { ...(tab ?? {}), url: target, title: new URLSearchParams(location.search).get("title") || "" };
  shortcuts();
  for (const button of document.querySelectorAll("nav button")) {
    button.addEventListener("click", () => switchTab(button.dataset.tab));
  }
  $("page-form").addEventListener("submit", save);
  $("star").addEventListener("click", star);
  $("delete").addEventListener("click", remove);
  $("queue").addEventListener("click", queue);
  $("tags").addEventListener("input", completeTags);
  document.addEventListener("marks:bookmark", (event) => show(event.detail)); // popup-snapshot.js
  $("search").addEventListener("input", search);
  $("date-field").addEventListener("change", () => { datePath.length = 0; dates(); });
  if (!tab || !bookmarkable(tab.url)) {
    $("page-form").hidden = true;
    say("This page cannot be bookmarked; search and dates still work.");
    return;
  }
  $("url").value = tab.url;
  $("title").value = tab.title || "";
  const found = await attempt(() => server.lookup(tab.url));
  if (found !== undefined) show(found);
}

start();
