"""Client address resolution: properties over any forwarding chain, and a real server."""

import ipaddress

import httpx
from hypothesis import given
from hypothesis import strategies as st

from servekit import TrustedProxies

PROXIES = TrustedProxies(["10.0.0.0/8", "::1", "127.0.0.1"])
addresses = st.one_of(st.ip_addresses(v=4), st.ip_addresses(v=6)).map(str)
trusted_addresses = st.one_of(
    st.integers(0, 2**24 - 1).map(lambda n: str(ipaddress.IPv4Address(0x0A000000 + n))),
    st.just("127.0.0.1"),
    st.just("::1"),
)
untrusted_addresses = addresses.filter(lambda a: a not in PROXIES)
junk = st.text(max_size=20)


def canonical(text: str) -> str:
    """An IPv4 client reached through a dual-stack socket is the same client as over IPv4."""
    address = ipaddress.ip_address(text.strip())
    mapped = getattr(address, "ipv4_mapped", None)
    return str(mapped or address)


@given(untrusted_addresses, st.lists(st.one_of(addresses, junk), max_size=6))
def test_untrusted_peer_is_the_client_whatever_it_forwards(peer, hops):
    assert PROXIES.resolve(peer, [", ".join(hops)]) == canonical(peer)


@given(
    trusted_addresses,
    st.lists(st.one_of(addresses, junk), max_size=6),
    untrusted_addresses,
    st.lists(trusted_addresses, max_size=3),
)
def test_trusted_chain_yields_rightmost_untrusted(peer, spoofed, client, proxies):
    # Whatever the client wrote on the left, the proxies' own appends decide.
    header = ", ".join([*spoofed, client, *proxies])
    assert PROXIES.resolve(peer, [header]) == canonical(client)


@given(st.one_of(addresses, junk), st.lists(st.one_of(addresses, junk), max_size=6))
def test_result_is_always_the_peer_or_a_forwarded_hop(peer, hops):
    result = PROXIES.resolve(peer, [",".join(hops)])
    normalised = set()
    for text in [peer, *hops]:
        try:
            normalised.add(canonical(text))
        except ValueError:
            normalised.add(text)
    assert result in normalised or result == "unknown"


def test_header_values_and_forms():
    assert PROXIES.resolve("10.1.1.1", ["203.0.113.9:4711"]) == "203.0.113.9"
    assert PROXIES.resolve("10.1.1.1", ["[2001:db8::1]:443"]) == "2001:db8::1"
    assert PROXIES.resolve("::ffff:10.0.0.1", ["198.51.100.2"]) == "198.51.100.2"
    # Two header lines count as one list, in order.
    assert PROXIES.resolve("10.1.1.1", ["198.51.100.2", "10.2.2.2"]) == "198.51.100.2"
    # A malformed hop stops the walk at the last address we could believe.
    assert PROXIES.resolve("10.1.1.1", ["198.51.100.2, bogus"]) == "10.1.1.1"
    assert not TrustedProxies([])
    assert "127.0.0.1" not in TrustedProxies([])


def test_real_server_ignores_forwarding_from_untrusted_peer(app):
    response = httpx.get(f"{app.url}/whoami", headers={"X-Forwarded-For": "203.0.113.5"})
    assert response.json() == {"ip": "127.0.0.1"}


def test_real_server_believes_trusted_proxy(start_app):
    server = start_app("--trust", "127.0.0.1")
    response = httpx.get(f"{server.url}/whoami", headers={"X-Forwarded-For": "203.0.113.5"})
    assert response.json() == {"ip": "203.0.113.5"}
