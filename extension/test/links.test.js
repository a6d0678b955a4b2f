// Only web addresses become links in the popup; dead links name their archived copy.
import assert from "node:assert/strict";
import { test } from "node:test";

import { archivedNote, openable } from "../src/lib/links.js";

test("only http(s) URLs are opened; bookmarklets and browser pages are not", () => {
  assert.equal(openable("https://example.org/"), true);
  assert.equal(openable("HTTP://example.org/"), true);
  for (const url of ["javascript:alert(1)", " javascript:alert(1)", "JaVaScRiPt:x", "data:text/html,<b>",
    "file:///etc/passwd", "about:config", "chrome://settings", "place:sort=8", "apt://flash", ""]) {
    assert.equal(openable(url), false, url);
  }
});

test("a dead link's archived copy is named with its date, never a script", () => {
  assert.deepEqual(
    archivedNote({ archived_url: "http://web.archive.org/web/2020/https://a.example/", archived_at: "2020-01-02T03:04:05Z" }),
    { text: "archived copy from 2020-01-02", href: "http://web.archive.org/web/2020/https://a.example/" },
  );
  assert.equal(archivedNote({ archived_url: "javascript:alert(1)", archived_at: "2020-01-02T03:04:05Z" }), null);
  assert.equal(archivedNote({ archived_url: null }), null);
  assert.equal(archivedNote(undefined), null);
});
