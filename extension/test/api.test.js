// The server client against a real HTTP server on loopback: the token is sent, and every failure
// is one sentence a person can act on.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { test } from "node:test";

import { Client, ServerError } from "../src/lib/api.js";

async function serve(handler) {
  const server = createServer(handler);
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, url: `http://127.0.0.1:${server.address().port}` };
}

function json(response, status, body) {
  response.writeHead(status, { "Content-Type": "application/json" });
  response.end(JSON.stringify(body));
}

test("requests carry the token and decode JSON; a 404 lookup is no bookmark", async () => {
  const seen = [];
  const { server, url } = await serve((request, response) => {
    seen.push([request.method, request.url, request.headers.authorization]);
    if (request.url.startsWith("/bookmarks/lookup")) return json(response, 404, { error: "Not found" });
    return json(response, 200, { bookmarks: 3 });
  });
  try {
    const client = new Client({ server: `${url}/`, token: "s3cret" });
    assert.deepEqual(await client.stats(), { bookmarks: 3 });
    assert.equal(await client.lookup("https://example.com/a b?x=1#f"), null);
    assert.deepEqual(seen[0], ["GET", "/stats", "Token s3cret"]);
    assert.equal(seen[1][1], "/bookmarks/lookup?url=https%3A%2F%2Fexample.com%2Fa+b%3Fx%3D1%23f");
  } finally {
    server.close();
  }
});

test("a refused token and a server error say what happened", async () => {
  const { server, url } = await serve((request, response) => {
    if (request.url === "/stats") return json(response, 401, { error: "Unauthorized" });
    return json(response, 409, { error: "Duplicate", details: "already bookmarked as 4" });
  });
  try {
    const client = new Client({ server: url, token: "wrong" });
    await assert.rejects(client.stats(), (error) => error instanceof ServerError && error.status === 401 && /refused the token/.test(error.message));
    await assert.rejects(client.add({ url: "https://x.example/" }), (error) => error.status === 409 && error.message === "marks serve: already bookmarked as 4");
  } finally {
    server.close();
  }
});

test("a server that is down is reported as unreachable, not as an error code", async () => {
  const { server, url } = await serve(() => {});
  server.close();
  await new Promise((resolve) => server.on("close", resolve));
  const client = new Client({ server: url, token: "" });
  await assert.rejects(client.stats(), (error) => error.offline === true && /not reachable/.test(error.message));
});
