// The offline queue: nothing made while the server is away is lost, or dropped silently.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Outbox } from "../src/lib/outbox.js";

function memory() {
  const values = new Map();
  return { get: async (key) => values.get(key), set: async (key, value) => void values.set(key, value) };
}

const page = (n) => ({ url: `https://example.com/${n}`, title: `Page ${n}` });

test("adds kept while offline are sent in order when the server is back", async () => {
  const box = new Outbox(memory());
  await box.keep(page(1));
  await box.keep(page(2));
  await box.keep(page(1)); // the same page twice is one add
  assert.equal((await box.pending()).length, 2);
  const sent = [];
  const result = await box.flush(async (item) => {
    assert.deepEqual(Object.keys(item).sort(), ["title", "url"]); // sent as it was made
    sent.push(item.url);
    return { ok: true, status: 201 };
  });
  assert.deepEqual(result, { sent: 2, failed: 0, left: 0 });
  assert.deepEqual(sent, ["https://example.com/1", "https://example.com/2"]);
  assert.deepEqual(await box.pending(), []);
});

test("still offline: nothing is sent and nothing is lost", async () => {
  const box = new Outbox(memory());
  await box.keep(page(1));
  await box.keep(page(2));
  const result = await box.flush(async () => {
    throw new TypeError("fetch failed");
  });
  assert.deepEqual(result, { sent: 0, failed: 0, left: 2 });
  assert.equal((await box.pending()).length, 2);
});

test("the server going away mid-flush keeps the rest", async () => {
  const box = new Outbox(memory());
  for (const n of [1, 2, 3]) await box.keep(page(n));
  let calls = 0;
  const result = await box.flush(async () => {
    calls += 1;
    if (calls === 2) throw new TypeError("connection reset");
    return { ok: true, status: 201 };
  });
  assert.deepEqual(result, { sent: 1, failed: 0, left: 2 });
  assert.deepEqual((await box.pending()).map((item) => item.url), ["https://example.com/2", "https://example.com/3"]);
});

test("a refused add is reported as not saved, with the server's reason", async () => {
  const box = new Outbox(memory());
  await box.keep({ url: "notaurl", title: "x" });
  await box.keep(page(2));
  await box.keep(page(3));
  const answers = [
    { ok: false, status: 400, body: { error: "Invalid bookmark", details: "not a URL" } },
    { ok: false, status: 409, body: { error: "Duplicate" } }, // bookmarked already: not lost
    { ok: true, status: 201 },
  ];
  const result = await box.flush(async () => answers.shift());
  assert.deepEqual(result, { sent: 2, failed: 1, left: 0 });
  const [failed] = await box.failed();
  assert.equal(failed.url, "notaurl");
  assert.equal(failed.reason, "not a URL");
});

test("a refused token or a busy server keeps the add for later", async () => {
  const box = new Outbox(memory());
  await box.keep(page(1));
  for (const status of [401, 403, 429, 500, 503]) {
    const result = await box.flush(async () => ({ ok: false, status, body: {} }));
    assert.deepEqual(result, { sent: 0, failed: 0, left: 1 }, String(status));
  }
});

test("the queue is bounded", async () => {
  const box = new Outbox(memory());
  for (let n = 0; n < 500; n += 1) await box.keep(page(n));
  await assert.rejects(box.keep(page(501)), /full/);
  assert.equal((await box.pending()).length, 500);
});
