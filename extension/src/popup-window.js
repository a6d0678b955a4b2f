// The popup's Tabs tab: save every tab of the window, the tags asked once. The background does
// the adds (the same path as a quick add: duplicates answered, the offline queue when the server
// is away); this page asks and reports. Everything is written with textContent.

import { summary, tagsOf } from "./lib/savetabs.js";
import { api } from "./lib/settings.js";

const browser = api();
const $ = (id) => document.getElementById(id);

async function windowId() {
  const asked = new URLSearchParams(location.search).get("window"); // tests and "open in tab"
  if (asked) return Number(asked);
  return (await browser.windows.getCurrent()).id;
}

function line(text) {
  const li = document.createElement("li");
  li.textContent = text;
  return li;
}

function show(report) {
  const status = $("window-summary");
  status.hidden = false;
  if (report.error) {
    status.textContent = report.error;
    return;
  }
  status.textContent = summary(report);
  const named = (entry) => (entry.title ? `${entry.title} (${entry.url})` : entry.url);
  $("window-report").replaceChildren(
    ...report.exists.map((entry) => line(`already bookmarked: ${named(entry)}`)),
    ...report.kept.map((entry) => line(`kept until marks serve is back: ${named(entry)}`)),
    ...report.failed.map((entry) => line(`not saved: ${named(entry)}: ${entry.reason}`)),
    ...report.skipped.map((entry) => line(`skipped: ${entry.url || "(no address)"}: ${entry.reason}`)),
  );
}

async function start() {
  const id = await windowId();
  const tabs = await browser.tabs.query({ windowId: id });
  $("window-count").textContent = `${tabs.length} tab${tabs.length === 1 ? "" : "s"} in this window`;
  $("window-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    $("window-save").disabled = true;
    const report = await browser.runtime
      .sendMessage({ type: "save-window", windowId: id, tags: tagsOf($("window-tags").value) })
      .catch((error) => ({ error: error.message }));
    show(report ?? { error: "the extension's background did not answer" });
    $("window-save").disabled = false;
  });
}

start();
