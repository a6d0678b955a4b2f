// The `mk` keyword: server hits as suggestions (escaped for Chromium, plain for Firefox), Enter.
import assert from "node:assert/strict";
import { test } from "node:test";

import { bestHit, escapeXml, isOpenable, opening, suggestions } from "../src/lib/omnibox.js";

const result = {
  hits: [
    { bookmark: { url: "https://a.example/?x=1&y=2", title: "Tom & <Jerry>", starred: true }, snippet: "a [cat] chase" },
    { bookmark: { url: "https://b.example/", title: "" }, snippet: "" },
  ],
};

test("Chromium's suggestions are XML: titles and URLs escaped, matches highlighted", () => {
  const [first, second] = suggestions(result, { markup: true });
  assert.equal(first.content, "https://a.example/?x=1&y=2");
  assert.equal(
    first.description,
    "★ Tom &amp; &lt;Jerry&gt; <url>https://a.example/?x=1&amp;y=2</url> <dim>a <match>cat</match> chase</dim>",
  );
  assert.equal(second.description, "https://b.example/ <url>https://b.example/</url>");
});

test("Firefox's suggestions are plain text, never markup", () => {
  const [first] = suggestions(result, { markup: false });
  assert.equal(first.description, "★ Tom & <Jerry> — https://a.example/?x=1&y=2 — a cat chase");
});

test("at most six suggestions, none for an empty answer", () => {
  const many = { hits: Array.from({ length: 9 }, (_, n) => ({ bookmark: { url: `https://e.example/${n}`, title: `${n}` } })) };
  assert.equal(suggestions(many, { markup: true }).length, 6);
  assert.deepEqual(suggestions({ hits: [] }, { markup: false }), []);
  assert.deepEqual(suggestions(null, { markup: false }), []);
});

test("Enter opens a picked suggestion's URL, or the best hit of the words", () => {
  assert.equal(isOpenable("https://a.example/page"), true);
  assert.equal(isOpenable("rust borrowing"), false);
  assert.equal(isOpenable("javascript:alert(1)"), false);
  assert.equal(bestHit(result), "https://a.example/?x=1&y=2");
  assert.equal(bestHit({ hits: [] }), null);
});

test("the disposition decides the tab", () => {
  assert.deepEqual(opening("currentTab", "https://a/"), ["update", { url: "https://a/" }]);
  assert.deepEqual(opening("newForegroundTab", "https://a/"), ["create", { url: "https://a/", active: true }]);
  assert.deepEqual(opening("newBackgroundTab", "https://a/"), ["create", { url: "https://a/", active: false }]);
});

test("escapeXml escapes the five XML specials", () => {
  assert.equal(escapeXml(`<a href="x">'&'</a>`), "&lt;a href=&quot;x&quot;&gt;&apos;&amp;&apos;&lt;/a&gt;");
});
