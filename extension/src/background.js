// The service worker (Chromium) or background script (Firefox): shortcuts, context menus, the
// badge, visits and the offline queue. Every action is a function on `globalThis.marksActions`, so
// the popup, the menus, the shortcuts and the tests all run the same code.

import { Client, ServerError } from "./lib/api.js";
import { LookupCache, STATES, stateFor } from "./lib/badge.js";
import { bestHit, escapeXml, isOpenable, opening, suggestions } from "./lib/omnibox.js";
import { Outbox } from "./lib/outbox.js";
import { saveTabs } from "./lib/savetabs.js";
import { api, load } from "./lib/settings.js";
import { saveSnapshot } from "./lib/snapshot.js";
import { bookmarkable, urlKey } from "./lib/urlkey.js";

const browser = api();
const isFirefox = browser.runtime.getURL("").startsWith("moz-extension:");
const cache = new LookupCache();
const storage = {
  get: async (key) => (await browser.storage.local.get(key))[key],
  set: (key, value) => browser.storage.local.set({ [key]: value }),
};
const outbox = new Outbox(storage);
const MENUS = [
  ["add-page", "Add this page to marks", ["page"]],
  ["add-link", "Add this link to marks", ["link"]],
  ["add-selection", "Add this page with the selection as description", ["selection"]],
  ["star-page", "Star this page in marks", ["page"]],
  ["save-snapshot", "Save a snapshot of this page", ["page"]],
];

async function client() {
  return new Client(await load());
}

async function paint(tabId, state) {
  const look = STATES[state];
  await Promise.all([
    browser.action.setBadgeText({ tabId, text: look.text }),
    browser.action.setBadgeBackgroundColor({ tabId, color: look.color }),
    browser.action.setTitle({ tabId, title: `marks: ${look.title}` }),
  ]).catch(() => {}); // the tab may have closed meanwhile
}

// The bookmark of a page, asked once per navigation and then remembered.
async function lookup(url, { fresh = false } = {}) {
  const key = urlKey(url);
  if (!fresh && cache.has(key)) return cache.get(key);
  const found = await (await client()).lookup(url);
  cache.set(key, found);
  flushOutbox().catch(() => {}); // the server answered: send what was kept while it was away
  return found;
}

async function refreshBadge(tabId, url, options = {}) {
  if (!bookmarkable(url)) {
    await paint(tabId, "unknown");
    return "unknown";
  }
  try {
    const state = stateFor(await lookup(url, options));
    await paint(tabId, state);
    return state;
  } catch {
    await paint(tabId, "offline");
    return "offline";
  }
}

async function remember(bookmark, tabId) {
  cache.set(urlKey(bookmark.url), bookmark);
  if (tabId !== undefined) await paint(tabId, stateFor(bookmark));
  return bookmark;
}

// Adds a page; a known page answers with the bookmark it already is. Offline, the add is kept.
async function add(fields, tabId) {
  const server = await client();
  try {
    const added = await server.add(fields);
    await remember(added, tabId);
    if (tabId !== undefined) await paint(tabId, "saved");
    return { status: "added", bookmark: added };
  } catch (error) {
    if (error instanceof ServerError && error.status === 409) {
      const existing = await server.lookup(fields.url);
      if (existing) await remember(existing, tabId);
      return { status: "exists", bookmark: existing };
    }
    if (error instanceof ServerError && error.offline) {
      await outbox.keep(fields);
      if (tabId !== undefined) await paint(tabId, "queued");
      return { status: "kept", message: error.message };
    }
    return { status: "failed", message: error.message };
  }
}

async function quickAdd(tab) {
  if (!tab || !bookmarkable(tab.url)) return { status: "failed", message: "this page cannot be bookmarked" };
  return add({ url: tab.url, title: tab.title || "" }, tab.id);
}

async function addLink(info, tab) {
  return add({ url: info.linkUrl, title: (info.linkText || "").trim() }, undefined).then(async (result) => {
    if (tab && result.status !== "failed") await paint(tab.id, result.status === "kept" ? "queued" : "saved");
    return result;
  });
}

async function addSelection(info, tab) {
  const description = (info.selectionText || "").trim();
  const result = await add({ url: tab.url, title: tab.title || "", description }, tab.id);
  if (result.status === "exists" && result.bookmark && description && !result.bookmark.description) {
    const updated = await (await client()).update(result.bookmark.id, { description });
    await remember(updated, tab.id);
    return { status: "updated", bookmark: updated };
  }
  return result;
}

async function setStar(tab, starred) {
  let bookmark = await lookup(tab.url, { fresh: true });
  if (starred === undefined) starred = !bookmark?.starred; // toggling an unknown page stars it
  if (!bookmark) {
    const result = await add({ url: tab.url, title: tab.title || "", starred }, tab.id);
    if (!result.bookmark) return result;
    bookmark = result.bookmark;
  }
  if (bookmark.starred !== starred) {
    bookmark = await (await client()).update(bookmark.id, { starred });
  }
  await remember(bookmark, tab.id);
  return { status: starred ? "starred" : "unstarred", bookmark };
}

async function toggleStar(tab) {
  if (!tab || !bookmarkable(tab.url)) return { status: "failed", message: "this page cannot be bookmarked" };
  try {
    return await setStar(tab);
  } catch (error) {
    await paint(tab.id, "offline");
    return { status: "failed", message: error.message };
  }
}

async function flushOutbox() {
  const server = await client();
  const result = await outbox.flush(async (fields) => {
    try {
      const added = await server.add(fields);
      cache.set(urlKey(added.url), added);
      return { ok: true, status: 201 };
    } catch (error) {
      if (error.offline) throw error;
      return { ok: false, status: error.status, body: error.body };
    }
  });
  return result;
}

// The page as the user sees it, kept by marks (the bookmark is added first when needed).
async function snapshotTab(tab) {
  const result = await saveSnapshot(browser, await client(), tab);
  if (result.bookmark && tab) await remember(result.bookmark, tab.id);
  if (result.status === "saved" && tab) await paint(tab.id, "saved");
  return result;
}

// Every tab of a window at once, each one as a quick add with the same tags (badges follow).
async function saveWindow(windowId, tags = []) {
  const tabs = await browser.tabs.query(windowId === undefined ? { currentWindow: true } : { windowId });
  return saveTabs(tabs, tags, (fields, tab) => add(fields, tab.id));
}

// The address bar's `mk` keyword: suggestions as the user types (the latest answer wins), Enter
// opens the picked suggestion or the best hit.
let omniboxAsked = 0;

function omniboxDefault(description) {
  browser.omnibox?.setDefaultSuggestion({ description: isFirefox ? description : escapeXml(description) });
}

async function omniboxSuggest(text) {
  const words = text.trim();
  if (!words) return [];
  return suggestions(await (await client()).search(words), { markup: !isFirefox });
}

async function omniboxInput(text, suggest) {
  const asked = (omniboxAsked += 1);
  try {
    const found = await omniboxSuggest(text);
    if (asked !== omniboxAsked) return;
    omniboxDefault(found.length ? "marks: Enter opens the best match" : `marks: no bookmark matches "${text.trim()}"`);
    suggest(found);
  } catch (error) {
    if (asked !== omniboxAsked) return;
    omniboxDefault(`marks: ${error.message}`);
    suggest([]);
  }
}

async function omniboxEnter(text, disposition = "currentTab") {
  const words = text.trim();
  let url = isOpenable(words) ? words : null;
  try {
    if (!url && words) url = bestHit(await (await client()).search(words));
  } catch (error) {
    return { status: "failed", message: error.message };
  }
  if (!url) return { status: "none" };
  const [how, properties] = opening(disposition, url);
  if (how === "create") await browser.tabs.create(properties);
  else await browser.tabs.update(properties);
  return { status: "opened", url };
}

async function countVisit(tabId, url) {
  const settings = await load();
  if (!settings.countVisits || !bookmarkable(url)) return;
  const bookmark = await lookup(url).catch(() => null);
  if (bookmark) {
    const visited = await (await client()).visit(bookmark.id).catch(() => null);
    if (visited) cache.set(urlKey(visited.url), visited);
  }
}

// Shortcuts the browser did not assign (a clash with its own keys) are reported, never ignored.
async function unassignedCommands() {
  const commands = await browser.commands.getAll();
  return commands.filter((command) => !command.shortcut).map((command) => command.name);
}

async function checkShortcuts() {
  const missing = await unassignedCommands();
  if (missing.length) {
    const page = browser.runtime.getURL(`options.html?unassigned=${encodeURIComponent(missing.join(","))}`);
    await browser.tabs.create({ url: page });
  }
  return missing;
}

function createMenus() {
  browser.contextMenus.removeAll(() => {
    for (const [id, title, contexts] of MENUS) {
      browser.contextMenus.create({ id, title, contexts });
    }
  });
}

const MENU_ACTIONS = {
  "add-page": (info, tab) => quickAdd(tab),
  "add-link": addLink,
  "add-selection": addSelection,
  "star-page": (info, tab) => setStar(tab, true),
  "save-snapshot": (info, tab) => snapshotTab(tab),
};

browser.contextMenus.onClicked.addListener((info, tab) => {
  MENU_ACTIONS[info.menuItemId]?.(info, tab);
});

browser.commands.onCommand.addListener(async (command, tab) => {
  const active = tab ?? (await browser.tabs.query({ active: true, currentWindow: true }))[0];
  if (command === "quick-add") await quickAdd(active);
  if (command === "toggle-star") await toggleStar(active);
  if (command === "save-snapshot") await snapshotTab(active);
});

browser.tabs.onUpdated.addListener((tabId, change, tab) => {
  if (change.url) {
    cache.forget(urlKey(change.url)); // a navigation: look it up again, once
    refreshBadge(tabId, change.url);
  }
  if (change.status === "complete" && tab.url) countVisit(tabId, tab.url);
});

browser.tabs.onActivated.addListener(async ({ tabId }) => {
  const tab = await browser.tabs.get(tabId).catch(() => null);
  if (tab?.url) refreshBadge(tabId, tab.url);
});

browser.omnibox?.onInputChanged.addListener(omniboxInput);
browser.omnibox?.onInputEntered.addListener(omniboxEnter);

browser.runtime.onInstalled.addListener(async () => {
  createMenus();
  await checkShortcuts();
});

// The popup changes bookmarks directly through the server; it tells us so the badge follows.
browser.runtime.onMessage.addListener((message, sender, reply) => {
  if (message?.type === "changed") {
    if (message.bookmark) cache.set(urlKey(message.bookmark.url), message.bookmark);
    if (message.removed) cache.set(urlKey(message.removed), null);
    if (message.tabId !== undefined && message.url) refreshBadge(message.tabId, message.url).then(reply);
    return true;
  }
  if (message?.type === "save-window") {
    saveWindow(message.windowId, message.tags).then(reply, (error) => reply({ error: error.message }));
    return true;
  }
  if (message?.type === "flush") {
    flushOutbox().then(reply, (error) => reply({ error: error.message }));
    return true;
  }
  return false;
});

globalThis.marksActions = {
  quickAdd,
  addLink,
  addSelection,
  toggleStar,
  setStar,
  snapshotTab,
  refreshBadge,
  flushOutbox,
  countVisit,
  saveWindow,
  omniboxSuggest,
  omniboxInput,
  omniboxEnter,
  unassignedCommands,
  checkShortcuts,
  pending: () => outbox.pending(),
  failed: () => outbox.failed(),
  menuIds: () => MENUS.map(([id]) => id),
  menu: (id, info, tab) => MENU_ACTIONS[id](info, tab),
  forget: () => cache.entries.clear(),
};
