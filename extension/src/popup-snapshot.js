// The popup's snapshot row: "Save a snapshot" of the page, and a link to its latest snapshot.
// (Its own file, beside popup.js, so the popup's other features change apart from it.)

import { Client } from "./lib/api.js";
import { NEEDS_PERMISSION, OTHER_SITES } from "./lib/crosssite.js";
import { api, load, save } from "./lib/settings.js";
import { latestSnapshot, saveSnapshot, snapshotUrl } from "./lib/snapshot.js";
import { bookmarkable } from "./lib/urlkey.js";

const browser = api();
const $ = (id) => document.getElementById(id);

function say(message, ok = false) {
  const status = $("status");
  status.hidden = !message;
  status.textContent = message || "";
  status.classList.toggle("ok", ok);
}

async function pageTab() {
  const wanted = new URLSearchParams(location.search).get("tab"); // tests and "open in tab"
  if (wanted) return browser.tabs.get(Number(wanted));
  return (await browser.tabs.query({ active: true, currentWindow: true }))[0];
}

function showLatest(settings, snapshot) {
  const link = $("snapshot-latest");
  link.hidden = !snapshot;
  if (!snapshot) return;
  link.href = snapshotUrl(settings.server, snapshot);
  link.textContent = `Latest snapshot (${snapshot.taken_at.slice(0, 10)})`;
}

// A capture that left out other sites' files for want of the permission offers to ask for it
// (the click is the user gesture the browser requires).
function offerOtherSites(omitted) {
  const button = $("snapshot-other-sites");
  button.hidden = !omitted.some((item) => item.reason === NEEDS_PERMISSION);
}

// The setting is saved as the browser is asked, not after: its prompt may close the popup, and
// the setting alone allows nothing (the capture also needs the permission).
async function askOtherSites() {
  const asked = browser.permissions.request(OTHER_SITES);
  await save({ otherSites: true });
  const allowed = await asked.catch(() => false);
  if (!allowed) await save({ otherSites: false });
  $("snapshot-other-sites").hidden = allowed;
  say(allowed ? "Allowed: save the snapshot again to include them" : "The browser did not allow it", allowed);
}

async function start() {
  const settings = await load();
  const client = new Client(settings);
  const tab = await pageTab().catch(() => null);
  if (!tab || !bookmarkable(tab.url)) {
    $("snapshot-row").hidden = true;
    return;
  }
  // Opened by the browser, not followed as a link from the extension's page: marks refuses
  // cross-site requests without a token, and a link from here would be one.
  $("snapshot-latest").addEventListener("click", (event) => {
    event.preventDefault();
    browser.tabs.create({ url: $("snapshot-latest").href });
  });
  $("snapshot-other-sites").addEventListener("click", askOtherSites);
  $("snapshot").addEventListener("click", async () => {
    $("snapshot").disabled = true;
    say("Saving a snapshot…", true);
    const result = await saveSnapshot(browser, client, tab);
    $("snapshot").disabled = false;
    if (result.status !== "saved") {
      say(result.message);
      return;
    }
    const left = result.omitted.length ? `; ${result.omitted.length} resource(s) left out` : "";
    say(`Snapshot saved (${Math.ceil(result.snapshot.size / 1024)} KB${left})`, true);
    offerOtherSites(result.omitted);
    showLatest(settings, result.snapshot);
    // The page may have just become a bookmark: the page form shows it (popup.js listens).
    document.dispatchEvent(new CustomEvent("marks:bookmark", { detail: result.bookmark }));
    await browser.runtime
      .sendMessage({ type: "changed", bookmark: result.bookmark, tabId: tab.id, url: tab.url })
      .catch(() => {});
  });
  const bookmark = await client.lookup(tab.url).catch(() => null);
  if (bookmark) showLatest(settings, await latestSnapshot(client, bookmark.id).catch(() => null));
}

start();
