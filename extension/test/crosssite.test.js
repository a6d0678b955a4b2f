import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { after, before, test } from "node:test";

import { CaptureFetcher, NEEDS_PERMISSION, OTHER_SITES } from "../src/lib/crosssite.js";

const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 1, 2, 255]);
const asked = [];
let cdn;
let base;

// A CDN that sends no CORS headers, on a real local port.
before(async () => {
  cdn = createServer((request, response) => {
    asked.push(request.url);
    const answers = {
      "/wave.png": ["image/png", PNG],
      "/font.woff2": ["application/octet-stream", Buffer.from("wOF2font")],
      "/style.css": ["text/css; charset=utf-8", Buffer.from("p { color: teal } /* é */")],
      "/page.html": ["text/html", Buffer.from("<p>your inbox</p>")],
      "/plain.css": ["text/plain", Buffer.from("p {}")],
      "/big.png": ["image/png", Buffer.alloc(4096, 1)],
    };
    const found = answers[request.url];
    if (!found) {
      response.writeHead(404).end("none");
      return;
    }
    response.writeHead(200, { "Content-Type": found[0] }).end(found[1]);
  });
  await new Promise((resolve) => cdn.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${cdn.address().port}`;
});

after(() => cdn.close());

// The browser's permission record: which origin patterns the user allowed.
function permissions(granted) {
  return {
    contains: async ({ origins }) => origins.every((pattern) => granted.some((g) => g === pattern || g === "http://*/*")),
  };
}

function fetcher(granted = ["http://*/*"], maxBytes = 1 << 20, on = true) {
  const enabled = async () => on;
  const made = new CaptureFetcher({ fetch, permissions: permissions(granted), enabled, extensionId: "marks-id", maxBytes });
  made.open(7);
  return made;
}

const capture = { id: "marks-id", frameId: 0, tab: { id: 7 } };

function ask(made, message, sender = capture) {
  return new Promise((resolve) => {
    const handled = made.listener()({ type: "capture-fetch", maxBytes: 1 << 20, ...message }, sender, resolve);
    if (!handled) resolve("ignored");
  });
}

test("another site's image, font and stylesheet, with the permission: the exact bytes", async () => {
  const made = fetcher();
  assert.deepEqual(await ask(made, { url: `${base}/wave.png`, kind: "data" }), {
    dataUri: `data:image/png;base64,${PNG.toString("base64")}`,
  });
  const font = await ask(made, { url: `${base}/font.woff2`, kind: "data" });
  assert.equal(font.dataUri, `data:application/octet-stream;base64,${Buffer.from("wOF2font").toString("base64")}`);
  assert.deepEqual(await ask(made, { url: `${base}/style.css`, kind: "text" }), { text: "p { color: teal } /* é */" });
  assert.deepEqual(await ask(made, { url: `${base}/gone.png`, kind: "data" }), { error: "HTTP 404" });
});

test("without the permission, or with the toggle off, nothing is fetched and the reason says how to allow it", async () => {
  const made = fetcher(["http://127.0.0.2/*", "https://127.0.0.1/*"]);
  const before = asked.length;
  assert.deepEqual(await ask(made, { url: `${base}/wave.png`, kind: "data" }), { error: NEEDS_PERMISSION });
  const off = fetcher(["http://*/*"], 1 << 20, false); // the permission kept, the toggle off
  assert.deepEqual(await ask(off, { url: `${base}/wave.png`, kind: "data" }), { error: NEEDS_PERMISSION });
  assert.equal(asked.length, before, "the CDN was not asked");
  assert.match(NEEDS_PERMISSION, /Include images and styles from other sites/);
  assert.deepEqual(OTHER_SITES, { origins: ["http://*/*", "https://*/*"] });
});

test("only our own capture, in the main frame of the tab being captured, is answered", async () => {
  const made = fetcher();
  const before = asked.length;
  const url = `${base}/wave.png`;
  assert.equal(await ask(made, { url, kind: "data" }, { ...capture, id: "another-extension" }), "ignored");
  assert.equal(await ask(made, { url, kind: "data" }, { ...capture, frameId: 3 }), "ignored");
  assert.equal(await ask(made, { url, kind: "data" }, { ...capture, tab: { id: 8 } }), "ignored");
  assert.equal(await ask(made, { url, kind: "data" }, { id: "marks-id", frameId: 0 }), "ignored", "an extension page");
  assert.equal(made.listener()({ type: "changed" }, capture, () => {}), false, "other messages are left alone");
  made.open(7);
  made.close(7);
  assert.ok((await ask(made, { url, kind: "data" })).dataUri, "still open: it was opened twice");
  made.close(7);
  assert.equal(await ask(made, { url, kind: "data" }), "ignored", "the capture is over");
  assert.equal(asked.length, before + 1);
});

test("only http(s), only the kinds a snapshot inlines, only files of those types", async () => {
  const made = fetcher();
  const before = asked.length;
  for (const url of ["javascript:alert(1)", "data:image/png;base64,AA", "file:///etc/passwd", "ftp://a.example/x.png"]) {
    assert.deepEqual(await ask(made, { url, kind: "data" }), { error: "only http(s) files are fetched" }, url);
  }
  assert.deepEqual(await ask(made, { url: "not a url", kind: "data" }), { error: "not a URL" });
  assert.deepEqual(await ask(made, { url: `http://user:pw@127.0.0.1:${cdn.address().port}/wave.png`, kind: "data" }), {
    error: "URLs with credentials are not fetched",
  });
  assert.deepEqual(await ask(made, { url: `${base}/wave.png`, kind: "html" }), { error: "not a kind a snapshot inlines" });
  assert.equal(asked.length, before, "none of these reached the network");
  assert.deepEqual(await ask(made, { url: `${base}/page.html`, kind: "data" }), {
    error: "not an image, font or media file (text/html)",
  });
  assert.deepEqual(await ask(made, { url: `${base}/page.html`, kind: "text" }), { error: "not a stylesheet (text/html)" });
  assert.deepEqual(await ask(made, { url: `${base}/plain.css`, kind: "text" }), { error: "not a stylesheet (text/plain)" });
});

test("the byte budget: what the capture has left, and the capture's whole budget", async () => {
  const made = fetcher(undefined, 6000);
  assert.deepEqual(await ask(made, { url: `${base}/big.png`, kind: "data", maxBytes: 4000 }), {
    error: "over the 0.0 MB left",
  });
  const first = await ask(made, { url: `${base}/big.png`, kind: "data", maxBytes: 1 << 20 });
  assert.ok(first.dataUri.startsWith("data:image/png;base64,"));
  // The capture's budget went down by what it got: a second copy no longer fits in the 6000.
  assert.deepEqual(await ask(made, { url: `${base}/big.png`, kind: "data", maxBytes: 1 << 20 }), {
    error: "over the 0.0 MB left",
  });
});

test("no manifest lets web pages message the extension", () => {
  const manifest = JSON.parse(readFileSync(new URL("../src/manifest.json", import.meta.url)));
  const firefox = JSON.parse(readFileSync(new URL("../src/firefox.json", import.meta.url)));
  assert.equal(manifest.externally_connectable, undefined);
  assert.equal(firefox.externally_connectable, undefined);
  assert.deepEqual(manifest.optional_host_permissions, OTHER_SITES.origins);
});
