// "Save every tab of the window": one add per page, the tags asked once, every tab accounted for.
// `add(fields, tab)` is the background's add (it answers {status: added|exists|kept|failed}): a page
// already bookmarked is reported (never changed), an add made while the server is away is kept
// in the offline queue like a single save, and a page that cannot be bookmarked is listed.

import { bookmarkable, urlKey } from "./urlkey.js";

export async function saveTabs(tabs, tags, add) {
  const report = { added: [], exists: [], kept: [], failed: [], skipped: [] };
  const seen = new Set();
  for (const tab of tabs) {
    const url = tab.url || "";
    if (!bookmarkable(url)) {
      report.skipped.push({ url, reason: "cannot be bookmarked" });
      continue;
    }
    const key = urlKey(url);
    if (seen.has(key)) {
      report.skipped.push({ url, reason: "open in another tab of the window" });
      continue;
    }
    seen.add(key);
    let result;
    try {
      result = await add({ url, title: tab.title || "", tags }, tab);
    } catch (error) {
      result = { status: "failed", message: error.message };
    }
    const entry = { url, title: result.bookmark?.title ?? tab.title ?? "" };
    if (result.status === "added") report.added.push(entry);
    else if (result.status === "exists") report.exists.push(entry);
    else if (result.status === "kept") report.kept.push(entry);
    else report.failed.push({ ...entry, reason: result.message || "not saved" });
  }
  return report;
}

const plural = (count, one, many = `${one}s`) => `${count} ${count === 1 ? one : many}`;

// One line for the popup's status; the lists name the pages.
export function summary(report) {
  const parts = [`${plural(report.added.length, "tab")} saved`];
  if (report.exists.length) parts.push(`${report.exists.length} already bookmarked`);
  if (report.kept.length) parts.push(`${report.kept.length} kept until marks serve is back`);
  if (report.failed.length) parts.push(`${report.failed.length} not saved`);
  if (report.skipped.length) parts.push(`${report.skipped.length} skipped`);
  return parts.join(", ");
}

export function tagsOf(text) {
  return String(text).split(",").map((tag) => tag.trim()).filter(Boolean);
}
