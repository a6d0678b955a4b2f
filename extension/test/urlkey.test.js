// The extension's url_key must agree with marks' (tests/data/url_keys.json is checked by both).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { bookmarkable, normalisePercent, urlKey } from "../src/lib/urlkey.js";

const { vectors } = JSON.parse(
  readFileSync(new URL("../../tests/data/url_keys.json", import.meta.url), "utf8"),
);

test("every shared vector normalises as marks does", () => {
  for (const [url, key] of vectors) assert.equal(urlKey(url), key, url);
});

test("the fragment is part of a page's identity", () => {
  assert.notEqual(urlKey("https://x.example/#inbox/A"), urlKey("https://x.example/#inbox/B"));
});

test("percent-encodings: unreserved decoded, others upper-cased", () => {
  assert.equal(normalisePercent("%7e%7E%2f%41"), "~~%2FA");
});

test("only web and file pages can be bookmarked", () => {
  assert.ok(bookmarkable("https://example.com/"));
  assert.ok(!bookmarkable("chrome://extensions/"));
  assert.ok(!bookmarkable("javascript:alert(1)"));
  assert.ok(!bookmarkable(undefined));
});

test("normalising twice changes nothing", () => {
  for (const [url] of vectors) assert.equal(urlKey(urlKey(url)), urlKey(url), url);
});
