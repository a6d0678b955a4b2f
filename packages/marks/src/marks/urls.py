"""URL checks and the normalised key that decides whether two bookmarks are the same page."""

from urllib.parse import SplitResult, urlsplit, urlunsplit

DEFAULT_PORTS = {"http": 80, "https": 443, "ftp": 21}
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
NOT_BOOKMARKS = {"javascript", "place"}  # bookmarklets and Firefox smart folders


class InvalidURL(ValueError):
    pass


def check(url: str) -> str:
    """The URL, trimmed, if marks can keep it; else InvalidURL saying why."""
    url = url.strip()
    if not url:
        raise InvalidURL("empty URL")
    if any(ch in url for ch in "\n\r\t\x00"):
        raise InvalidURL(f"URL contains control characters: {url[:80]!r}")
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme in NOT_BOOKMARKS:
        raise InvalidURL(f"{scheme}: URLs are not bookmarks")
    if scheme not in ALLOWED_SCHEMES:
        raise InvalidURL(f"not a URL (scheme {scheme or 'missing'}): {url[:80]}")
    if scheme in ("http", "https", "ftp") and not urlsplit(url).hostname:
        raise InvalidURL(f"URL has no host: {url[:80]}")
    return url


def key(url: str) -> str:
    """Lower-case scheme and host, no default port, no fragment, `/` for an empty path."""
    return _key(urlsplit(url.strip()))


def _key(parts: SplitResult) -> str:
    scheme = parts.scheme.lower()
    netloc = parts.netloc
    if parts.hostname is not None:
        host = parts.hostname.lower()
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
    path = parts.path or ("/" if netloc else "")
    return urlunsplit((scheme, netloc, path, parts.query, ""))


def domain(url: str) -> str:
    return _domain(urlsplit(url))


def _domain(parts: SplitResult) -> str:
    return (parts.hostname or "").lower().removeprefix("www.")


def analyse(url: str) -> tuple[str, str, str]:
    """`check`, `key` and `domain` with one parse (imports do this 100,000 times)."""
    url = url.strip()
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme in ("http", "https") and not any(ch in url for ch in "\n\r\t\x00"):
        parts = urlsplit(url)  # the common case, checked from the same parse
        if parts.hostname:
            return url, _key(parts), _domain(parts)
    url = check(url)
    parts = urlsplit(url)
    return url, _key(parts), _domain(parts)
