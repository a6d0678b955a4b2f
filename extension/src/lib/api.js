// The client of `marks serve`: every request carries the paired token, every failure becomes one
// sentence a person can act on (ServerError.message), and nothing waits for ever.

const TIMEOUT_MS = 8000;

export class ServerError extends Error {
  constructor(message, { status = 0, body = null, offline = false } = {}) {
    super(message);
    this.status = status;
    this.body = body;
    this.offline = offline;
  }
}

export class Client {
  constructor({ server, token }, fetchImpl = globalThis.fetch.bind(globalThis)) {
    this.server = String(server || "").replace(/\/+$/, "");
    this.token = token || "";
    this.fetch = fetchImpl;
  }

  async request(method, path, { query, body } = {}) {
    const url = new URL(this.server + path);
    for (const [name, value] of Object.entries(query ?? {})) {
      if (value !== undefined && value !== null && value !== "") url.searchParams.set(name, String(value));
    }
    const headers = { Accept: "application/json" };
    if (this.token) headers.Authorization = `Token ${this.token}`;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let response;
    try {
      response = await this.fetch(url, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(TIMEOUT_MS),
        credentials: "omit",
      });
    } catch {
      throw new ServerError(`marks serve is not reachable at ${this.server}`, { offline: true });
    }
    if (response.status === 204) return null;
    let payload = null;
    try {
      payload = await response.json();
    } catch {
      payload = null;
    }
    if (!response.ok) {
      throw new ServerError(describe(response.status, payload), { status: response.status, body: payload });
    }
    return payload;
  }

  lookup(url) {
    return this.request("GET", "/bookmarks/lookup", { query: { url } }).catch((error) => {
      if (error.status === 404) return null;
      throw error;
    });
  }
  add(bookmark) {
    return this.request("POST", "/bookmarks", { body: bookmark });
  }
  update(id, changes) {
    return this.request("PATCH", `/bookmarks/${id}`, { body: changes });
  }
  remove(id) {
    return this.request("DELETE", `/bookmarks/${id}`);
  }
  visit(id) {
    return this.request("POST", `/bookmarks/${id}/visit`);
  }
  search(q) {
    return this.request("GET", "/search", { query: { q, fts: 1, limit: 20 } });
  }
  list(query, sort = "added", limit = 50) {
    return this.request("GET", "/bookmarks", { query: { query, sort, limit } });
  }
  byDate(field, granularity, parts = {}) {
    return this.request("GET", "/bookmarks/by-date", { query: { field, granularity, ...parts } });
  }
  tagNames(prefix) {
    return this.request("GET", "/tags/complete", { query: { prefix, limit: 20 } });
  }
  queue(id, priority) {
    return this.request("POST", "/queue", { body: { ids: [id], priority } });
  }
  stats() {
    return this.request("GET", "/stats");
  }
}

export function describe(status, body) {
  const reason = body?.details || body?.error || "";
  if (status === 401 || status === 403) {
    return "marks serve refused the token: pair again in the extension's options";
  }
  return reason ? `marks serve: ${reason}` : `marks serve answered HTTP ${status}`;
}
