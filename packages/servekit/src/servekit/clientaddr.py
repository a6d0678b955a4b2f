"""Who is asking: the TCP peer, or the client a trusted proxy forwarded for.

`X-Forwarded-For` is believed only when the peer itself is a trusted proxy, and then only as far
as the chain stays trusted: walking from the right (the hop nearest to us), the first address that
is not a trusted proxy is the client. Anything a client wrote further left is ignored, so a client
cannot choose its own address by sending the header.

`rate_key` turns an address into what per-client limits count: an IPv6 host usually holds a
whole /64 (SLAAC, privacy addresses), so counting single IPv6 addresses would give one host 2^64
quotas.
"""

import functools
import ipaddress
from collections.abc import Iterable

from starlette.requests import HTTPConnection

_Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_Address = ipaddress.IPv4Address | ipaddress.IPv6Address


# Every request asks (the limits, the queue, the log's pseudonym) and `ipaddress` takes
# microseconds a parse; addresses are immutable, so a bounded cache of the recent ones answers.
@functools.lru_cache(maxsize=4096)
def _parse_address(text: str) -> _Address | None:
    text = text.strip()
    if text.startswith("[") and "]" in text:  # "[::1]:port" as some proxies write it
        text = text[1 : text.index("]")]
    elif text.count(":") == 1:  # "1.2.3.4:port"
        text = text.split(":", 1)[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped:
            return address.ipv4_mapped
        address = ipaddress.IPv6Address(address.packed)  # "fe80::1%eth0": the zone is no host
    return address


DEFAULT_IPV6_PREFIX = 64


@functools.lru_cache(maxsize=4096)
def rate_key(address: str, ipv6_prefix: int = DEFAULT_IPV6_PREFIX) -> str:
    """The key per-client limits use for an address.

    IPv4 (and IPv4-mapped IPv6, which is the same host) is the address itself; IPv6 is its network
    of `ipv6_prefix` bits (`2001:db8:1:2::/64`); anything that is not an address (a Unix socket
    peer, "unknown") is kept as it is, so it still has a quota of its own.
    """
    if not 0 <= ipv6_prefix <= 128:
        raise ValueError(f"an IPv6 prefix length is 0 to 128, not {ipv6_prefix}")
    parsed = _parse_address(address)
    if parsed is None:
        return address
    if isinstance(parsed, ipaddress.IPv4Address):
        return str(parsed)
    return str(ipaddress.IPv6Network((parsed, ipv6_prefix), strict=False))


class TrustedProxies:
    """A set of proxy addresses or networks (`10.0.0.0/8`, `::1`) whose forwarding we believe."""

    def __init__(self, entries: Iterable[str] = ()) -> None:
        self.networks: tuple[_Network, ...] = tuple(
            ipaddress.ip_network(entry.strip(), strict=False) for entry in entries if entry.strip()
        )

    def __contains__(self, address: object) -> bool:
        parsed = _parse_address(address) if isinstance(address, str) else address
        if not isinstance(parsed, ipaddress.IPv4Address | ipaddress.IPv6Address):
            return False
        return any(parsed in network for network in self.networks)

    def __bool__(self) -> bool:
        return bool(self.networks)

    def resolve(self, peer: str | None, forwarded_for: Iterable[str]) -> str:
        """The client address given the TCP peer and every `X-Forwarded-For` header value."""
        peer_address = _parse_address(peer or "")
        if peer_address is None:
            return peer or "unknown"
        client = peer_address
        if client not in self:
            return str(client)
        hops = [hop for value in forwarded_for for hop in value.split(",")]
        for hop in reversed(hops):
            address = _parse_address(hop)
            if address is None:
                break  # a malformed hop ends what we can believe
            client = address
            if client not in self:
                break
        return str(client)


def client_ip(connection: HTTPConnection, trusted: TrustedProxies) -> str:
    """The client address of an HTTP request or WebSocket connection."""
    peer = connection.client.host if connection.client else None
    return trusted.resolve(peer, connection.headers.getlist("x-forwarded-for"))
