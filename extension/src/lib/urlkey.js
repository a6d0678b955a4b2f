// The identity of a page, computed the way `marks` computes `url_key` (marks.urls.key), so the
// extension's cache agrees with the server about which pages are one bookmark. The server stays
// the authority: lookups send the URL as it is and the server normalises it again.
//
// Rules (RFC 3986 section 6 and marks' design): lower-case scheme and host, the host in IDNA
// (punycode) form, the default port dropped, percent-encodings of unreserved characters decoded and
// the others upper-cased, `/` for an empty path, query and fragment kept.

const DEFAULT_PORTS = { http: "80", https: "443", ftp: "21", ws: "80", wss: "443" };
// Schemes with an authority and a path; others (mailto:, tel:, urn:, ...) keep all but the scheme.
const HIERARCHICAL = new Set(["http", "https", "ftp", "file", "ws", "wss", "sftp", "ssh", "git", "gopher"]);
const UNRESERVED = /[A-Za-z0-9\-._~]/;
const KEEP = /[A-Za-z0-9!$&'()*+,;=:@/?%\-._~]/; // what percent-encoding leaves as it is
const NEEDS_ENCODING = /[^\x21-\x7e]|["<>\\^`{|}]/;

export function normalisePercent(text) {
  return text.replace(/%([0-9A-Fa-f]{2})/g, (match, hex) => {
    const character = String.fromCharCode(parseInt(hex, 16));
    return UNRESERVED.test(character) ? character : `%${hex.toUpperCase()}`;
  });
}

// RFC 3986 6.2.2.1-2: escapes normalised, and what a browser would encode (spaces, non-ASCII as
// UTF-8, a few ASCII signs) encoded.
function escapes(text) {
  let result = normalisePercent(text);
  if (NEEDS_ENCODING.test(result)) {
    let encoded = "";
    for (const character of result) {
      if (KEEP.test(character)) {
        encoded += character;
      } else {
        try {
          encoded += encodeURIComponent(character);
        } catch {
          encoded += character; // a lone surrogate cannot be UTF-8: leave it
        }
      }
    }
    result = encoded;
  }
  return result;
}

// Splits like Python's urllib.parse.urlsplit for the parts marks uses.
function split(url) {
  const match = /^([A-Za-z][A-Za-z0-9+.-]*):(?:\/\/([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?$/s.exec(
    url,
  );
  if (!match) return null;
  const [, scheme, authority, path, query, fragment] = match;
  return { scheme, authority, path, query, fragment };
}

function hostToASCII(host) {
  if (!/[^\x00-\x7f]/.test(host)) return host.toLowerCase();
  try {
    return new URL(`http://${host}/`).hostname; // the WHATWG parser applies IDNA (UTS 46)
  } catch {
    return host.toLowerCase();
  }
}

export function urlKey(url) {
  const trimmed = String(url).trim();
  const parts = split(trimmed);
  if (!parts) return trimmed;
  const scheme = parts.scheme.toLowerCase();
  if (!HIERARCHICAL.has(scheme) && !parts.authority) {
    return trimmed.replace(/^[^:]+/, scheme);
  }
  let authority = parts.authority ?? "";
  if (authority) {
    const at = authority.lastIndexOf("@");
    const userinfo = at >= 0 ? authority.slice(0, at + 1) : "";
    let hostPort = at >= 0 ? authority.slice(at + 1) : authority;
    let port = "";
    const portMatch = /:(\d*)$/.exec(hostPort);
    if (portMatch && !hostPort.endsWith("]")) {
      port = portMatch[1];
      hostPort = hostPort.slice(0, portMatch.index);
    }
    const host = hostPort.startsWith("[") ? hostPort.toLowerCase() : hostToASCII(hostPort);
    if (!Number(port) || String(Number(port)) === DEFAULT_PORTS[scheme]) port = "";
    if (port) port = String(Number(port));
    authority = userinfo + host + (port ? `:${port}` : "");
  }
  const path = escapes(parts.path) || (authority ? "/" : "");
  let key = authority || scheme === "file" ? `${scheme}://${authority}${path}` : `${scheme}:${path}`;
  const query = escapes(parts.query ?? "");
  const fragment = escapes(parts.fragment ?? "");
  if (query) key += `?${query}`;
  if (fragment) key += `#${fragment}`;
  return key;
}

// Pages a bookmark can never be made of: the browser's own pages and bookmarklets.
export function bookmarkable(url) {
  return /^(https?|ftp|file):/i.test(String(url || ""));
}
