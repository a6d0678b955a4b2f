// The identity of a page, computed the way `marks` computes `url_key` (marks.urls.key), so the
// extension's cache agrees with the server about which pages are one bookmark. The server stays
// the authority: lookups send the URL as it is and the server normalises it again.
//
// Rules (RFC 3986 section 6 and marks' design): lower-case scheme and host, the host in IDNA
// (punycode) form, the default port dropped, percent-encodings of unreserved characters decoded and
// the others upper-cased, `/` for an empty path, query and fragment kept.

const DEFAULT_PORTS = { http: "80", https: "443", ftp: "21" };
const UNRESERVED = /[A-Za-z0-9\-._~]/;

export function normalisePercent(text) {
  return text.replace(/%([0-9A-Fa-f]{2})/g, (match, hex) => {
    const character = String.fromCharCode(parseInt(hex, 16));
    return UNRESERVED.test(character) ? character : `%${hex.toUpperCase()}`;
  });
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
  let authority = parts.authority;
  if (authority !== undefined) {
    const at = authority.lastIndexOf("@");
    const userinfo = at >= 0 ? authority.slice(0, at + 1) : "";
    let hostPort = at >= 0 ? authority.slice(at + 1) : authority;
    let port = "";
    const portMatch = /:(\d*)$/.exec(hostPort);
    if (portMatch && !hostPort.endsWith("]")) {
      port = portMatch[1];
      hostPort = hostPort.slice(0, portMatch.index);
    }
    let host = hostPort.startsWith("[") ? hostPort.toLowerCase() : hostToASCII(normalisePercent(hostPort));
    if (port && String(Number(port)) === DEFAULT_PORTS[scheme]) port = "";
    if (port) port = String(Number(port));
    authority = userinfo + host + (port ? `:${port}` : "");
  }
  let path = normalisePercent(parts.path);
  if (!path && authority) path = "/";
  let key = `${scheme}:`;
  if (authority !== undefined) key += `//${authority}`;
  key += path;
  if (parts.query !== undefined) key += `?${normalisePercent(parts.query)}`;
  if (parts.fragment !== undefined && parts.fragment !== "") key += `#${normalisePercent(parts.fragment)}`;
  return key;
}

// Pages a bookmark can never be made of: the browser's own pages and bookmarklets.
export function bookmarkable(url) {
  return /^(https?|ftp|file):/i.test(String(url || ""));
}
