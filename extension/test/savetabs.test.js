// Saving every tab of a window: each tab accounted for, tags asked once, nothing lost offline.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Outbox } from "../src/lib/outbox.js";
import { saveTabs, summary, tagsOf } from "../src/lib/savetabs.js";

const tab = (url, title = "") => ({ url, title });

test("every tab gets the same tags; duplicates are reported and not changed", async () => {
  const known = new Set(["https://old.example/"]);
  const sent = [];
  const report = await saveTabs(
    [tab("https://new.example/a", "A"), tab("https://old.example/", "Old"), tab("https://new.example/b", "B")],
    ["trip", "later"],
    async (fields) => {
      sent.push(fields);
      if (known.has(fields.url)) return { status: "exists", bookmark: { url: fields.url, title: "Old title" } };
      return { status: "added", bookmark: { ...fields } };
    },
  );
  assert.deepEqual(sent.map((f) => f.tags), [["trip", "later"], ["trip", "later"], ["trip", "later"]]);
  assert.deepEqual(report.added.map((e) => e.url), ["https://new.example/a", "https://new.example/b"]);
  assert.deepEqual(report.exists, [{ url: "https://old.example/", title: "Old title" }]);
  assert.equal(summary(report), "2 tabs saved, 1 already bookmarked");
});

test("pages that cannot be bookmarked and a page open twice are skipped, and listed", async () => {
  const sent = [];
  const report = await saveTabs(
    [tab("about:blank"), tab("https://x.example/page"), tab("HTTPS://X.example:443/page"), tab("")],
    [],
    async (fields) => {
      sent.push(fields.url);
      return { status: "added" };
    },
  );
  assert.deepEqual(sent, ["https://x.example/page"]);
  assert.deepEqual(report.skipped.map((e) => e.reason), [
    "cannot be bookmarked",
    "open in another tab of the window",
    "cannot be bookmarked",
  ]);
  assert.equal(summary(report), "1 tab saved, 3 skipped");
});

test("with the server away every page is kept in the offline queue, with its tags", async () => {
  const values = new Map();
  const outbox = new Outbox({ get: async (k) => values.get(k), set: async (k, v) => void values.set(k, v) });
  const report = await saveTabs([tab("https://a.example/", "A"), tab("https://b.example/", "B")], ["t"], async (fields) => {
    await outbox.keep(fields); // what the background's add does when fetch fails
    return { status: "kept", message: "marks serve is not reachable" };
  });
  assert.equal(report.kept.length, 2);
  assert.equal(summary(report), "0 tabs saved, 2 kept until marks serve is back");
  const pending = await outbox.pending();
  assert.deepEqual(pending.map((p) => [p.url, p.tags]), [["https://a.example/", ["t"]], ["https://b.example/", ["t"]]]);
});

test("an add that throws or fails is reported with its reason, and the rest go on", async () => {
  const report = await saveTabs([tab("https://a.example/"), tab("https://b.example/"), tab("https://c.example/")], [], async (fields) => {
    if (fields.url.startsWith("https://a")) throw new Error("the offline queue is full (500 pages)");
    if (fields.url.startsWith("https://b")) return { status: "failed", message: "marks serve: bad URL" };
    return { status: "added" };
  });
  assert.deepEqual(report.failed.map((e) => e.reason), ["the offline queue is full (500 pages)", "marks serve: bad URL"]);
  assert.equal(report.added.length, 1);
  assert.equal(summary(report), "1 tab saved, 2 not saved");
});

test("tags are read from one comma-separated field", () => {
  assert.deepEqual(tagsOf(" trip, ,later ,"), ["trip", "later"]);
  assert.deepEqual(tagsOf(""), []);
});
