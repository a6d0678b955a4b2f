"""URL checks and the normalised key that decides whether two bookmarks are the same page.

The key is the URL in RFC 3986 normal form (section 6.2.2) plus what browsers do: lower-case
scheme and host, the host in IDNA (punycode) form, no default port, `/` for an empty path,
percent-encoding normalised (unreserved characters decoded, other escapes upper-case, non-ASCII
encoded as UTF-8). The fragment is kept: `#inbox/A` and `#inbox/B` are two pages, as in browsers.
"""

import re
from urllib.parse import SplitResult, quote, urlsplit, urlunsplit

DEFAULT_PORTS = {"http": 80, "https": 443, "ftp": 21, "ws": 80, "wss": 443}
ALLOWED_SCHEMES = {
    "http",
    "https",
    "ftp",
    "file",
    "mailto",
    "data",
    "about",
    "chrome",
    "gopher",
    "magnet",
    "irc",
    "ircs",
    "news",
    "nntp",
    "ssh",
    "sftp",
    "tel",
    "urn",
    "git",
}
# Every other scheme a browser keeps is kept too (`javascript:` bookmarklets, Firefox's `place:`
# queries, `apt:`, `chrome-extension:`, `view-source:`...), byte for byte: its key is the URL with
# the scheme lower-cased, nothing else touched (a bookmarklet's `?`, `#` and spaces are code).
# A scheme is two characters or more (`c:\\` is a drive), and what follows it is not a port
# (`localhost:8080/x` is a host without a scheme).
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+")
_PORT_AFTER = re.compile(r"[0-9]+(?:[/?#]|$)")
# The schemes marks opens: a web UI link, a fetch. Everything else is shown inert and copied.
WEB = {"http", "https"}
HIERARCHICAL = {"http", "https", "ftp", "file", "ws", "wss", "sftp", "ssh", "git", "gopher"}

_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# Everything RFC 3986 allows unescaped in a path, query or fragment, plus `%` (already escaped).
_SAFE = "!$&'()*+,;=:@/?%-._~"
_WHITESPACE_INSIDE = re.compile(r"[\t\n\r]")


class InvalidURL(ValueError):
    pass


def scheme_of(url: str) -> str | None:
    """The URL's scheme, lower-cased, or None when it has none (see _SCHEME)."""
    name, colon, rest = url.partition(":")
    if not colon or not _SCHEME.fullmatch(name):
        return None
    scheme = name.lower()
    if scheme not in ALLOWED_SCHEMES and _PORT_AFTER.match(rest):
        return None
    return scheme


def openable(url: str) -> bool:
    """Whether marks fetches this URL (health, content, snapshots, titles): http(s) only."""
    return scheme_of(url) in WEB


def clean(url: str) -> tuple[str, list[str]]:
    """What a browser's address bar does before parsing: trim, drop tabs and line breaks inside,
    and percent-encode spaces. Returns the URL and notes on anything changed."""
    notes: list[str] = []
    url = url.strip()
    scheme = scheme_of(url)
    if scheme is None:
        return url, notes  # not a URL to repair: `check` says why
    if _WHITESPACE_INSIDE.search(url):  # as browsers parse any URL (the URL Standard)
        url = _WHITESPACE_INSIDE.sub("", url)
        notes.append("tabs or line breaks inside the URL removed")
    if scheme not in ALLOWED_SCHEMES:
        return url, notes  # a bookmarklet's spaces are its code: kept
    if " " in url:
        url = url.replace(" ", "%20")
        notes.append("spaces in the URL percent-encoded as %20")
    return url, notes


def check(url: str) -> str:
    """The URL, trimmed, if marks can keep it; else InvalidURL saying why."""
    url = url.strip()
    if not url:
        raise InvalidURL("empty URL")
    if any(ch in url for ch in "\n\r\t\x00"):
        raise InvalidURL(f"URL contains control characters: {url[:80]!r}")
    scheme = scheme_of(url)
    if scheme is None:
        if url.startswith("?") and len(url) > 1:
            raise InvalidURL(f"a relative link ({url[:40]}), as Shaarli writes for notes")
        named = url.split(":", 1)[0] if ":" in url else ""
        raise InvalidURL(f"not a URL (scheme {named or 'missing'}): {url[:80]}")
    if scheme not in ALLOWED_SCHEMES:
        return url  # kept as the browser kept it (see _SCHEME)
    if " " in url:
        raise InvalidURL(f"URL contains spaces (encode them as %20): {url[:80]}")
    if scheme in ("http", "https", "ftp"):
        try:
            parts = urlsplit(url)
            host = parts.hostname
            parts.port  # noqa: B018 -- raises on a port that is not a number
        except ValueError as error:
            raise InvalidURL(f"{error}: {url[:80]}") from None
        if not host:
            raise InvalidURL(f"URL has no host: {url[:80]}")
    return url


def _escapes(text: str) -> str:
    """RFC 3986 6.2.2.1/6.2.2.2: upper-case escapes, decode the unreserved ones, encode the rest."""
    if "%" in text:
        text = _ESCAPE.sub(_one_escape, text)
    if not text.isascii() or any(ch <= " " or ch in '"<>\\^`{|}' for ch in text):
        text = quote(text, safe=_SAFE)
    return text


def _one_escape(match: re.Match) -> str:
    byte = int(match.group(1), 16)
    return chr(byte) if byte in _UNRESERVED else "%" + match.group(1).upper()


def _host(host: str) -> str:
    host = host.lower()
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            host = quote(host, safe="-.")  # not a valid IDN: still one stable spelling
    return host


def key(url: str) -> str:
    """The normalised URL two bookmarks share when they are the same page."""
    url = url.strip()
    verbatim = _verbatim(url)
    if verbatim is not None:
        return verbatim
    try:
        return _key(urlsplit(url))
    except ValueError:  # unparseable (a broken IPv6 host): the URL is its own key
        return url


def _verbatim(url: str) -> str | None:
    """The key of a URL of a scheme marks does not normalise: the scheme lower-cased, the rest
    as it is. None for the schemes it does (ALLOWED_SCHEMES) and for what is no URL."""
    scheme = scheme_of(url)
    if scheme is None or scheme in ALLOWED_SCHEMES:
        return None
    return scheme + url[len(scheme) :]


def _key(parts: SplitResult) -> str:
    scheme = parts.scheme.lower()
    if scheme not in HIERARCHICAL and not parts.netloc:
        # mailto:, tel:, urn:, data:, magnet:... only the scheme is case-insensitive.
        return urlunsplit((scheme, "", parts.path, parts.query, parts.fragment))
    netloc = parts.netloc
    hostname = parts.hostname
    if hostname is not None:
        host = _host(hostname)
        if ":" in host:
            host = f"[{host}]"
        try:
            port = parts.port
        except ValueError:
            port = None
        userinfo = netloc.rpartition("@")[0] + "@" if "@" in netloc else ""
        netloc = (
            userinfo + host + (f":{port}" if port and port != DEFAULT_PORTS.get(scheme) else "")
        )
    path = _escapes(parts.path) or ("/" if netloc else "")
    query = _escapes(parts.query)
    fragment = _escapes(parts.fragment)
    result = f"{scheme}://{netloc}{path}" if netloc or scheme == "file" else f"{scheme}:{path}"
    if query:
        result += "?" + query
    if fragment:
        result += "#" + fragment
    return result


def domain(url: str) -> str:
    return _domain(urlsplit(url))


def _domain(parts: SplitResult) -> str:
    return (parts.hostname or "").lower().removeprefix("www.")


# The common case, an ordinary http(s) URL, keyed without urlsplit (imports do this 100,000
# times): a plain host, maybe a port, and a rest with nothing that needs normalising but
# non-ASCII characters (any but surrogates, which cannot be encoded), percent-encoded as _escapes
# encodes them.
_PLAIN = re.compile(
    r"(?i)(https?)://([a-z0-9.-]+)(?::([0-9]{1,5}))?"
    r"([/?#][!#-$&-;=?-\[\]_a-z~\u0080-\ud7ff\ue000-\U0010ffff]*)?"
)


def plain(url: str) -> tuple[str, str, str] | None:
    """`analyse` for an ordinary http(s) URL that needs nothing but case and port folded, and
    its non-ASCII characters encoded; None for any other (then `analyse` decides)."""
    match = _PLAIN.fullmatch(url)
    if match is None:
        return None
    scheme, host, port, rest = match.groups()
    scheme, host = scheme.lower(), host.lower()
    if not host.strip(".") or (port and int(port) > 65535):
        return None
    if port and int(port) in (0, DEFAULT_PORTS[scheme]):
        port = None
    if not rest or rest[0] != "/":
        rest = "/" + (rest or "")
    if rest.endswith(("#", "?")) or "?#" in rest:
        return None  # empty query or fragment: let urlsplit decide
    if not rest.isascii():
        if rest[-1].isspace():
            return None  # `strip` would take it off first
        rest = _encoded(rest)
    netloc = f"{host}:{int(port)}" if port else host
    return url, f"{scheme}://{netloc}{rest}", host.removeprefix("www.")


def _encoded(rest: str) -> str:
    """Path, query and fragment split as urlsplit splits them, each encoded as _escapes does
    (an ASCII part needs nothing here: the pattern let through no character to encode)."""
    before, hashed, fragment = rest.partition("#")
    path, asked, query = before.partition("?")
    parts = [path, asked, query, hashed, fragment]
    return "".join(part if part.isascii() else quote(part, safe=_SAFE) for part in parts)


def analyse(url: str) -> tuple[str, str, str]:
    """`check`, `key` and `domain` with one parse (imports do this 100,000 times)."""
    url = url.strip()
    fast = plain(url)
    if fast is not None:
        return fast
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme in ("http", "https") and not any(ch in url for ch in "\n\r\t\x00 "):
        parts = urlsplit(url)  # the common case, checked from the same parse
        try:
            if parts.hostname:
                parts.port  # noqa: B018
                return url, _key(parts), _domain(parts)
        except ValueError:
            pass
    url = check(url)
    verbatim = _verbatim(url)
    if verbatim is not None:
        return url, verbatim, ""  # no host to group by: a bookmarklet, `place:`, `apt:`
    parts = urlsplit(url)
    return url, _key(parts), _domain(parts)
