"""Registrable domains ("sites") from the Public Suffix List, shipped inside `publicsuffixlist`
(no download at run time). `a.example.co.uk` and `b.example.co.uk` are one site; two users'
`*.github.io` pages are two sites, since `github.io` is a public suffix."""

import functools
import ipaddress
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from publicsuffixlist import PublicSuffixList


@functools.cache
def _list() -> "PublicSuffixList":
    from publicsuffixlist import PublicSuffixList  # loaded only when a graph is built

    return PublicSuffixList()


@functools.lru_cache(maxsize=65536)
def site(host: str) -> str | None:
    """The registrable domain of a host; the host itself for IP addresses and names that are a
    public suffix or a single label (`localhost`); None for no host."""
    host = host.strip(".").lower()
    if not host:
        return None
    try:
        ipaddress.ip_address(host.strip("[]"))
        return host
    except ValueError:
        pass
    return _list().privatesuffix(host) or host
