// Saving a snapshot of a tab (popup button, context menu, shortcut): the bookmark first (added if
// the page is not one yet), then the page serialised in its own tab by capture-page.js, then sent
// to `POST /bookmarks/{id}/snapshots`, where marks caps it and sanitises it again.

import { ServerError } from "./api.js";
import { CaptureFetcher } from "./crosssite.js";
import { load } from "./settings.js";
import { bookmarkable } from "./urlkey.js";

export const MAX_BYTES = 20 * 1024 * 1024; // the server's default snapshot_max_mb; it has the last word

// The fetcher for other sites' files of the captures this context (background or popup) starts;
// made, and its listener added, at the first capture.
let crossSite = null;

function crossSiteFetcher(browser) {
  if (!crossSite) {
    crossSite = new CaptureFetcher({
      fetch: globalThis.fetch.bind(globalThis),
      permissions: browser.permissions,
      enabled: async () => (await load()).otherSites,
      extensionId: browser.runtime.id,
      maxBytes: MAX_BYTES,
    });
    browser.runtime.onMessage.addListener(crossSite.listener());
  }
  return crossSite;
}

async function bookmarkOf(client, tab) {
  const known = await client.lookup(tab.url);
  if (known) return { bookmark: known, added: false };
  try {
    return { bookmark: await client.add({ url: tab.url, title: tab.title || "" }), added: true };
  } catch (error) {
    if (error instanceof ServerError && error.status === 409) {
      return { bookmark: await client.lookup(tab.url), added: false };
    }
    throw error;
  }
}

async function serialise(browser, tabId) {
  const fetcher = crossSiteFetcher(browser);
  fetcher.open(tabId);
  try {
    await browser.scripting.executeScript({ target: { tabId }, files: ["lib/capture-page.js"] });
    const [answer] = await browser.scripting.executeScript({
      target: { tabId },
      func: (maxBytes) => globalThis.marksCapture.capture({ maxBytes }),
      args: [MAX_BYTES],
    });
    if (!answer?.result?.html) throw new Error("the page could not be read (is it a browser page?)");
    return answer.result;
  } finally {
    fetcher.close(tabId);
  }
}

// { status: "saved", bookmark, snapshot, omitted, added } or { status: "failed", message }.
export async function saveSnapshot(browser, client, tab) {
  if (!tab || !bookmarkable(tab.url)) return { status: "failed", message: "this page cannot be saved" };
  try {
    const { bookmark, added } = await bookmarkOf(client, tab);
    const page = await serialise(browser, tab.id);
    const snapshot = await client.request("POST", `/bookmarks/${bookmark.id}/snapshots`, {
      body: { html: page.html, url: page.url, title: page.title },
    });
    return { status: "saved", bookmark, snapshot, omitted: page.omitted, added };
  } catch (error) {
    return { status: "failed", message: error.message };
  }
}

export async function latestSnapshot(client, bookmarkId) {
  const found = await client.request("GET", `/bookmarks/${bookmarkId}/snapshots`);
  return found.length ? found[0] : null;
}

export function snapshotUrl(server, snapshot) {
  return `${String(server).replace(/\/+$/, "")}/snapshots/${snapshot.id}`;
}
