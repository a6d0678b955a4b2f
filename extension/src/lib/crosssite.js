// Another site's images, stylesheets and fonts for a snapshot, fetched by the extension when the
// page itself may not read them (a CDN that sends no CORS headers). The extension is not bound by
// CORS for hosts the user allowed, so it asks with the user's cookies for that host. It answers
// only the capture it started itself, for the tab being captured, for http(s) resources of the
// kinds a capture inlines, within the capture's byte budget: never an open proxy for pages.

// What the options page's toggle asks the browser for (optional_host_permissions in the manifest).
export const OTHER_SITES = { origins: ["http://*/*", "https://*/*"] };

export const NEEDS_PERMISSION =
  "another site's file that the page may not read (no CORS): turn on \"Include images and styles " +
  "from other sites\" in the marks extension's options to keep it";

// Media types each kind may be: what a browser would use as a stylesheet, or as an image, font or
// media source (servers often send fonts as octet-stream, S3 as binary/octet-stream).
const TEXT_TYPES = new Set(["text/css"]);
const DATA_TYPES = new RegExp(
  [/^(image|font|audio|video)\//, /^application\/(font-|x-font-|vnd\.ms-fontobject$|octet-stream$)/,
    /^binary\/octet-stream$/, /^$/].map((part) => part.source).join("|"),
);

function essence(contentType) {
  return String(contentType || "").split(";")[0].trim().toLowerCase();
}

function typeAllowed(kind, type) {
  return kind === "text" ? TEXT_TYPES.has(type) : DATA_TYPES.test(type);
}

function megabytes(bytes) {
  return `over the ${(bytes / 1048576).toFixed(1)} MB left`;
}

// btoa takes a binary string; chunks keep the argument list of fromCharCode short.
function base64(bytes) {
  let binary = "";
  for (let start = 0; start < bytes.length; start += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(start, start + 0x8000));
  }
  return btoa(binary);
}

// The body, read until `limit` bytes: more and the read stops (nothing larger is held).
async function bodyWithin(response, limit) {
  const declared = Number(response.headers.get("content-length"));
  if (declared > limit) return null;
  const reader = response.body.getReader();
  const chunks = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.length;
    if (size > limit) {
      await reader.cancel();
      return null;
    }
    chunks.push(value);
  }
  const whole = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    whole.set(chunk, at);
    at += chunk.length;
  }
  return whole;
}

export class CaptureFetcher {
  // `fetch` and `permissions` are the browser's (injected so tests can give real ones of Node);
  // `enabled()` says whether the user turned other sites on; `extensionId` is runtime.id: only
  // our own injected capture may ask.
  constructor({ fetch, permissions, enabled, extensionId, maxBytes }) {
    this.fetch = fetch;
    this.permissions = permissions;
    this.enabled = enabled;
    this.extensionId = extensionId;
    this.maxBytes = maxBytes;
    this.captures = new Map(); // tab id -> { left, open }: the captures this context started
  }

  open(tabId) {
    const found = this.captures.get(tabId);
    if (found) found.open += 1;
    else this.captures.set(tabId, { left: this.maxBytes, open: 1 });
  }

  close(tabId) {
    const found = this.captures.get(tabId);
    if (found && --found.open === 0) this.captures.delete(tabId);
  }

  // Whether `sender` is our capture running in the main frame of a tab this context captures.
  mine(sender) {
    return sender?.id === this.extensionId && sender.frameId === 0 && this.captures.has(sender.tab?.id);
  }

  // Turned on, and the browser's permission for the host (any port: Firefox's match patterns
  // have none, Chromium's without one match every port).
  async allowed(url) {
    if (!(await this.enabled())) return false;
    return this.permissions.contains({ origins: [`${url.protocol}//${url.hostname}/*`] });
  }

  // { dataUri } or { text } as asked, or { error } (the reason the capture lists).
  async answer(message, sender) {
    const capture = this.captures.get(sender.tab.id);
    const { kind } = message;
    if (kind !== "text" && kind !== "data") return { error: "not a kind a snapshot inlines" };
    let url;
    try {
      url = new URL(String(message.url));
    } catch {
      return { error: "not a URL" };
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") return { error: "only http(s) files are fetched" };
    if (url.username || url.password) return { error: "URLs with credentials are not fetched" };
    if (!(await this.allowed(url))) return { error: NEEDS_PERMISSION };
    const limit = Math.max(0, Math.min(Number(message.maxBytes) || 0, capture.left));
    let response;
    try {
      response = await this.fetch(url.href, { credentials: "include" });
    } catch (error) {
      return { error: `the extension could not fetch it either (${error.message})` };
    }
    if (!response.ok) return { error: `HTTP ${response.status}` };
    const type = essence(response.headers.get("content-type"));
    if (!typeAllowed(kind, type)) {
      await response.body?.cancel();
      return { error: `not ${kind === "text" ? "a stylesheet" : "an image, font or media file"} (${type})` };
    }
    const bytes = await bodyWithin(response, limit);
    if (bytes === null) return { error: megabytes(limit) };
    const found = kind === "text"
      ? { text: new TextDecoder().decode(bytes) }
      : { dataUri: `data:${type || "application/octet-stream"};base64,${base64(bytes)}` };
    capture.left -= (found.text ?? found.dataUri).length;
    return found;
  }

  // The runtime.onMessage listener: answers our capture's asks, leaves every other message alone.
  listener() {
    return (message, sender, reply) => {
      if (message?.type !== "capture-fetch" || !this.mine(sender)) return false;
      this.answer(message, sender).then(reply, (error) => reply({ error: error.message || String(error) }));
      return true;
    };
  }
}
