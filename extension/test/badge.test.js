import assert from "node:assert/strict";
import { test } from "node:test";

import { LookupCache, STATES, stateFor } from "../src/lib/badge.js";

test("badge states for unknown, bookmarked and starred pages", () => {
  assert.equal(stateFor(null), "unknown");
  assert.equal(stateFor({ starred: false }), "bookmarked");
  assert.equal(stateFor({ starred: true }), "starred");
  assert.equal(STATES.unknown.text, "");
  assert.notEqual(STATES.bookmarked.text, STATES.starred.text);
});

test("the lookup cache remembers misses too, and stays bounded", () => {
  const cache = new LookupCache(3);
  cache.set("a", null);
  assert.ok(cache.has("a"));
  assert.equal(cache.get("a"), null);
  for (const key of ["b", "c", "d"]) cache.set(key, { starred: false });
  assert.ok(!cache.has("a"));
  assert.equal(cache.entries.size, 3);
  cache.forget("d");
  assert.ok(!cache.has("d"));
});
