import assert from "node:assert/strict";
import { test } from "node:test";

await import("../src/lib/capture-page.js"); // a classic script: it defines globalThis.marksCapture
const { Budget, Unreadable, cleanElement, inlineCss, isScriptUrl, resources, safeCss, srcsetFirst, withFallback } =
  globalThis.marksCapture;

// A site as the page's fetch sees it: path -> text or bytes; anything else fails like a 404.
function site(files, asked = []) {
  return async (url, kind) => {
    asked.push(url);
    if (!(url in files)) throw new Error("HTTP 404");
    const body = files[url];
    return kind === "text" ? { text: body } : { dataUri: `data:x;base64,${Buffer.from(body).toString("base64")}` };
  };
}

test("script URLs as browsers read them", () => {
  for (const value of ["javascript:x", " JAVASCRIPT:x", "java\tscr\nipt:x", "\u0001vbscript:x"]) {
    assert.ok(isScriptUrl(value), value);
  }
  for (const value of ["https://a.example/javascript:", "data:image/png;base64,AA", "#javascript:"]) {
    assert.ok(!isScriptUrl(value), value);
  }
});

test("handlers and script URLs leave an element, other attributes stay", () => {
  const attributes = [
    { name: "onclick", value: "x()" }, { name: "ONerror", value: "y()" },
    { name: "href", value: " java\tscript:alert(1)" }, { name: "title", value: "kept" },
    { name: "src", value: "https://a.example/i.png" },
  ];
  const element = {
    attributes,
    removeAttribute(name) {
      attributes.splice(attributes.findIndex((a) => a.name === name), 1);
    },
  };
  cleanElement(element);
  assert.deepEqual(attributes.map((a) => a.name), ["title", "src"]);
});

test("stylesheets: imports and url()s inlined, recursively, once each", async () => {
  const files = {
    "https://a.example/css/more.css": '@import "deep.css"; h1 { background: url(../img/h.png) }',
    "https://a.example/css/deep.css": "p { color: red }",
    "https://a.example/img/h.png": "PNG",
    "https://a.example/fonts/f.woff2": "FONT",
  };
  const asked = [];
  const budget = new Budget(1024 * 1024);
  const fetch = resources(site(files, asked), budget);
  const css = await inlineCss(
    "@charset 'utf-8'; @import url('css/more.css') screen; @font-face { src: url(fonts/f.woff2) }" +
      " .a { background: url(\"img/missing.png\") } .b { mask: url(#m) } .c { x: url(data:,z) }",
    "https://a.example/",
    fetch,
  );
  assert.ok(css.startsWith(" @media screen {p { color: red } h1 { background: url(\"data:x;base64,"), css);
  assert.ok(css.includes(`url("data:x;base64,${Buffer.from("FONT").toString("base64")}")`));
  assert.ok(css.includes('url("data:,")'), "a missing image becomes an empty URL");
  assert.ok(css.includes("url(#m)") && css.includes("url(data:,z)"));
  assert.ok(!css.includes("@charset"));
  assert.deepEqual(budget.omitted, [{ url: "https://a.example/img/missing.png", reason: "HTTP 404" }]);
  assert.equal(new Set(asked).size, asked.length, "each URL fetched once");
});

test("the budget leaves out what does not fit and says why", async () => {
  const budget = new Budget(100);
  const fetch = resources(site({ "https://a.example/big": "x".repeat(200), "https://a.example/s": "s" }), budget);
  assert.equal(await fetch.dataUri("https://a.example/big"), null);
  assert.ok((await fetch.dataUri("https://a.example/s")).startsWith("data:"));
  assert.equal(budget.omitted.length, 1);
  assert.equal(budget.omitted[0].url, "https://a.example/big");
  assert.match(budget.omitted[0].reason, /^over the 0\.0 MB left$/);
});

test("css cannot close its style element, srcsets give their first candidate", () => {
  assert.equal(safeCss("a{}</STYLE><script>"), "a{}<\\/STYLE><script>");
  assert.equal(srcsetFirst(" a.png 1x, b.png 2x"), "a.png");
  assert.equal(srcsetFirst(""), null);
});

// The page's own fetch: its site answers, another site's files it may not read (no CORS).
function pageSide(files, asked = []) {
  const answering = site(files, asked);
  return async (url, kind, left) => {
    if (!url.startsWith("https://a.example/")) {
      asked.push(url);
      throw new Unreadable("the page could not read it (Failed to fetch)");
    }
    return answering(url, kind, left);
  };
}

test("another site's file the page may not read comes from the extension's fetcher, once", async () => {
  const pageAsked = [];
  const extensionAsked = [];
  const cdn = site({ "https://cdn.example/w.png": "WAVE", "https://cdn.example/s.css": "p { color: teal }" }, extensionAsked);
  const lefts = [];
  const fetcher = withFallback(pageSide({ "https://a.example/own.png": "OWN" }, pageAsked), async (url, kind, left) => {
    lefts.push(left);
    return cdn(url, kind);
  }, "https://a.example");
  const budget = new Budget(1024 * 1024);
  const fetch = resources(fetcher, budget);
  assert.ok((await fetch.dataUri("https://a.example/own.png")).endsWith(Buffer.from("OWN").toString("base64")));
  for (let round = 0; round < 2; round += 1) {
    assert.equal(await fetch.dataUri("https://cdn.example/w.png"), `data:x;base64,${Buffer.from("WAVE").toString("base64")}`);
    assert.equal(await fetch.text("https://cdn.example/s.css"), "p { color: teal }");
  }
  assert.deepEqual(extensionAsked, ["https://cdn.example/w.png", "https://cdn.example/s.css"], "each asked once");
  assert.deepEqual(pageAsked, ["https://a.example/own.png", "https://cdn.example/w.png", "https://cdn.example/s.css"]);
  assert.deepEqual(budget.omitted, []);
  const uri = (text) => `data:x;base64,${Buffer.from(text).toString("base64")}`.length;
  assert.deepEqual(lefts, [1024 * 1024 - uri("OWN"), 1024 * 1024 - uri("OWN") - uri("WAVE")], "the budget left");
});

test("without the permission the file is left out with the reason the extension gives", async () => {
  const reason = "another site's file ...: turn on it in the options";
  const fetcher = withFallback(pageSide({}), async () => {
    throw new Error(reason);
  }, "https://a.example");
  const budget = new Budget(1024);
  const css = await inlineCss(".w { background: url(https://cdn.example/w.png) }", "https://a.example/", resources(fetcher, budget));
  assert.equal(css, '.w { background: url("data:,") }');
  assert.deepEqual(budget.omitted, [{ url: "https://cdn.example/w.png", reason }]);
});

test("answers, the page's own site and odd schemes never go to the extension", async () => {
  const extension = async (url) => {
    throw new Error(`the extension was asked for ${url}`);
  };
  const own = withFallback(async () => {
    throw new Unreadable("the page could not read it (Failed to fetch)");
  }, extension, "https://a.example");
  await assert.rejects(own("https://a.example/x.png", "data", 10), /page could not read it/);
  await assert.rejects(own("ftp://cdn.example/x.png", "data", 10), /page could not read it/);
  await assert.rejects(own("blob:https://cdn.example/1", "data", 10), /page could not read it/);
  const missing = withFallback(async () => {
    throw new Error("HTTP 404");
  }, extension, "https://a.example");
  await assert.rejects(missing("https://cdn.example/x.png", "data", 10), /^Error: HTTP 404$/);
});
