"""Per-IP limits: properties over arbitrary arrival sequences, and the real server's answers."""

import gzip
import io
import ipaddress
import tarfile
import time

import httpx
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from jobrunner.ratelimit import Limits, RateLimiter, Reservation, StreamSlot
from servekit import rate_key
from support.jobclient import submit, wait_finished


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


events = st.lists(
    st.one_of(
        st.tuples(st.just("wait"), st.floats(0.1, 900)),
        st.tuples(st.just("submit"), st.sampled_from(["a", "b"])),
        st.tuples(st.just("finish"), st.floats(0, 8)),  # the oldest active job ends using N CPU-s
        st.tuples(st.just("progress"), st.floats(0, 4)),  # a running job reports more CPU
    ),
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(events)
def test_limits_hold_and_stats_agree_with_submit(sequence):
    clock = Clock()
    limiter = RateLimiter(Limits(concurrent=2, per_hour=20, cpu_seconds=10), clock)
    active: list[tuple[str, str, float]] = []  # ip, job id, cpu so far
    accepted: dict[str, list[float]] = {"a": [], "b": []}
    counter = 0
    for kind, value in sequence:
        if kind == "wait":
            clock.now += value
        elif kind == "submit":
            predicted = limiter.verdict(value)
            outcome = limiter.reserve(value)
            # /stats says exactly what /submit then does.
            assert isinstance(outcome, Reservation) == predicted.allowed
            if isinstance(outcome, Reservation):
                counter += 1
                active.append((value, f"j{counter}", 0.0))
                accepted[value].append(clock.now)
            else:
                assert outcome.retry_after is not None and outcome.retry_after >= 1
                assert outcome.reason
        elif kind == "progress" and active:
            ip, job, cpu = active[0]
            active[0] = (ip, job, cpu + value)
            limiter.cpu_used(ip, job, cpu + value)
        elif kind == "finish" and active:
            ip, job, cpu = active.pop(0)
            limiter.cpu_used(ip, job, cpu + value)
            limiter.finished(ip, job)
        for ip in ("a", "b"):
            assert sum(1 for owner, _, _ in active if owner == ip) <= 2
            in_hour = [t for t in accepted[ip] if t > clock.now - 3600]
            assert len(in_hour) <= 20


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0, 3599), st.floats(0.01, 9)), min_size=1, max_size=40),
)
def test_retry_after_is_exact_for_cpu_and_hourly_limits(history):
    """A refused client is admitted at exactly now + retry_after, and not one second before."""
    clock = Clock()
    limiter = RateLimiter(Limits(concurrent=100, per_hour=20, cpu_seconds=10), clock)
    start = clock.now
    for number, (offset, cpu) in enumerate(sorted(history)):
        clock.now = start + offset
        if isinstance(limiter.reserve("ip"), Reservation):
            limiter.cpu_used("ip", f"j{number}", cpu)
            limiter.finished("ip", f"j{number}")
    verdict = limiter.verdict("ip")
    if verdict.allowed:
        return
    refused_at = clock.now
    if verdict.retry_after > 1:  # time only moves forward: first one second early, then on time
        clock.now = refused_at + verdict.retry_after - 1
        assert not limiter.verdict("ip").allowed
    clock.now = refused_at + verdict.retry_after
    assert limiter.verdict("ip").allowed


def test_cancelled_reservation_costs_nothing():
    clock = Clock()
    limiter = RateLimiter(Limits(concurrent=1, per_hour=1), clock)
    reservation = limiter.reserve("ip")
    assert isinstance(reservation, Reservation)
    assert not limiter.verdict("ip").allowed
    limiter.cancel(reservation)
    assert limiter.verdict("ip").allowed


def test_idle_clients_are_forgotten():
    clock = Clock()
    limiter = RateLimiter(Limits(), clock)
    for number in range(1000):
        reservation = limiter.reserve(f"10.0.{number // 250}.{number % 250}")
        limiter.cpu_used(reservation.key, "j", 0.5)
        limiter.finished(reservation.key, "j")
    clock.now += 3601
    limiter.sweep()
    assert limiter._clients == {}


def test_log_streams_per_client_are_counted_and_given_back_once():
    limiter = RateLimiter(Limits(streams=2), Clock())  # counts rate keys: an IPv6 /64
    first, second = (
        limiter.open_stream(rate_key("2001:db8::1")),
        limiter.open_stream(rate_key("2001:db8::2")),
    )
    assert isinstance(first, StreamSlot) and isinstance(second, StreamSlot)
    refused = limiter.open_stream(rate_key("2001:db8::3"))  # the same /64
    assert not isinstance(refused, StreamSlot)
    assert (refused.allowed, refused.retry_after) == (False, 1)
    assert refused.reason == "Too many streams (logs, downloads and long polls): 2/2 open"
    assert limiter.verdict(rate_key("2001:db8::3")).allowed  # streams are no jobs: submits still go
    assert isinstance(limiter.open_stream("10.0.0.1"), StreamSlot)  # another client
    first.close()
    first.close()  # once only
    assert limiter.open_streams(rate_key("2001:db8::9")) == 1
    second.close()
    assert limiter.open_streams(rate_key("2001:db8::9")) == 0
    assert set(limiter._clients) == {"10.0.0.1"}  # a client with nothing open is forgotten


def test_server_refuses_third_concurrent_job_with_retry_after(start_server):
    server = start_server()  # the interface's limits
    slow = {"main.py": "import time\ntime.sleep(2)\n"}
    first = submit(server.url, slow, {"entrypoint": "main.py"})
    second = submit(server.url, slow, {"entrypoint": "main.py"})
    assert first.status_code == second.status_code == 200
    stats = httpx.get(f"{server.url}/stats").json()
    assert stats["your_quota"]["active_jobs"] == 2
    assert stats["your_quota"]["can_submit"] is False
    assert "Concurrent job limit reached: 2/2" in stats["your_quota"]["reason"]
    third = submit(server.url, slow, {"entrypoint": "main.py"})
    assert third.status_code == 429
    body = third.json()
    assert body["error"] == "Rate limit exceeded"
    assert body["reason"] == "Concurrent job limit reached: 2/2 jobs"
    assert body["retry_after"] == 1 and third.headers["retry-after"] == "1"
    # An invalid submit is refused for what it is and costs no quota.
    wait_finished(server.url, first.json()["job_id"])
    bad = submit(server.url, slow, {"entrypoint": "nope.py"})
    assert bad.status_code == 400
    assert httpx.get(f"{server.url}/stats").json()["your_quota"]["can_submit"] is True


def test_server_cpu_quota_refuses_until_the_window_passes(start_server):
    server = start_server("--rate-cpu-seconds", "1")
    burn = {
        "main.py": "import time\nend = time.process_time() + 1.2\n"
        "while time.process_time() < end:\n    pass\n"
    }
    submitted = time.monotonic()  # the CPU used counts for 60 s from when it was used, after this
    record = wait_finished(
        server.url, submit(server.url, burn, {"entrypoint": "main.py"}).json()["job_id"]
    )
    assert record["execution_metadata"]["cpu_seconds"] >= 1.2
    stats = httpx.get(f"{server.url}/stats").json()["your_quota"]
    assert stats["used"] >= 1.2 and stats["limit"] == 1.0 and stats["available"] == 0
    assert stats["can_submit"] is False and "CPU quota exhausted" in stats["reason"]
    refused = submit(server.url, burn, {"entrypoint": "main.py"})
    assert refused.status_code == 429
    assert refused.json()["reason"].startswith("CPU quota exhausted: 1.")
    # Exact: when enough of the job's CPU leaves the window. However slow this machine was since
    # the submit, that is at most 60 s away and no earlier than 60 s after the submit.
    elapsed = time.monotonic() - submitted
    assert 60 - elapsed - 1 <= refused.json()["retry_after"] <= 60
    assert refused.headers["retry-after"] == str(refused.json()["retry_after"])


def test_forwarded_for_counts_only_from_a_trusted_proxy(start_server):
    untrusted = start_server("--rate-concurrent", "1")
    slow = {"main.py": "import time\ntime.sleep(1.5)\n"}
    assert (
        submit(
            untrusted.url,
            slow,
            {"entrypoint": "main.py"},
            headers={"X-Forwarded-For": "203.0.113.1"},
        ).status_code
        == 200
    )
    spoofed = submit(
        untrusted.url, slow, {"entrypoint": "main.py"}, headers={"X-Forwarded-For": "203.0.113.2"}
    )
    assert spoofed.status_code == 429  # both came from 127.0.0.1, whatever they claimed

    proxied = start_server("--rate-concurrent", "1", "--trusted-proxy", "127.0.0.1")
    for client in ("203.0.113.1", "203.0.113.2"):
        response = submit(
            proxied.url, slow, {"entrypoint": "main.py"}, headers={"X-Forwarded-For": client}
        )
        assert response.status_code == 200, client


def test_a_zero_hourly_limit_refuses_without_failing():
    limiter = RateLimiter(Limits(per_hour=0), Clock())
    verdict = limiter.verdict("ip")
    assert not verdict.allowed and verdict.retry_after == 3600
    assert verdict.reason == "Hourly limit reached: 0/0 submits in the last hour"


# --- IPv6 clients are counted by network (servekit.rate_key, shared by server and pool) ----------

ipv6 = st.integers(0, 2**128 - 1).map(ipaddress.IPv6Address)
ipv4 = st.integers(0, 2**32 - 1).map(ipaddress.IPv4Address)
prefixes = st.integers(0, 128)


@given(ipv6, st.integers(0, 2**64 - 1), prefixes)
def test_ipv6_addresses_share_a_key_exactly_when_their_prefix_matches(address, noise, prefix):
    other = ipaddress.IPv6Address(int(address) ^ noise)
    same_network = int(address) >> (128 - prefix) == int(other) >> (128 - prefix)
    assume(not address.ipv4_mapped and not other.ipv4_mapped)
    assert (rate_key(str(address), prefix) == rate_key(str(other), prefix)) == same_network
    assert ipaddress.ip_address(str(address)) in ipaddress.ip_network(
        rate_key(str(address), prefix)
    )


@given(ipv6.filter(lambda a: a.ipv4_mapped is None), st.integers(0, 2**64 - 1))
def test_by_default_one_host_with_a_64_has_one_key(address, host_bits):
    sibling = ipaddress.IPv6Address((int(address) >> 64 << 64) | host_bits)
    assume(sibling.ipv4_mapped is None)  # ::ffff:a.b.c.d is an IPv4 host, counted as such
    assert (
        rate_key(str(address))
        == rate_key(str(sibling))
        == str(ipaddress.IPv6Network((address, 64), strict=False))
    )


@given(ipv4, prefixes)
def test_ipv4_and_ipv4_mapped_ipv6_are_the_ipv4_address(address, prefix):
    mapped = f"::ffff:{address}"
    assert rate_key(str(address), prefix) == rate_key(mapped, prefix) == str(address)


@given(st.text(max_size=40))
def test_any_peer_text_has_a_key_and_never_raises(text):
    assert isinstance(rate_key(text), str)


def test_the_limiter_counts_a_64_as_one_client():
    # The edge keys each address (`rate_key` with the limits' prefix); the limiter counts keys.
    limiter = RateLimiter(Limits(concurrent=1), Clock())
    prefix = limiter.limits.ipv6_prefix
    assert isinstance(limiter.reserve(rate_key("2001:db8:1:2::1", prefix)), Reservation)
    refused = limiter.reserve(rate_key("2001:db8:1:2:ffff:ffff:ffff:ffff", prefix))
    assert not isinstance(refused, Reservation) and refused.reason.startswith("Concurrent")
    assert isinstance(limiter.reserve(rate_key("2001:db8:1:3::1", prefix)), Reservation)
    wide = RateLimiter(Limits(concurrent=1, ipv6_prefix=128), Clock())
    assert isinstance(wide.reserve(rate_key("2001:db8::1", 128)), Reservation)
    assert isinstance(wide.reserve(rate_key("2001:db8::2", 128)), Reservation)
    with pytest.raises(ValueError):
        Limits(ipv6_prefix=129)


def test_server_counts_ipv6_clients_by_64_and_the_prefix_is_configurable(start_server):
    slow = {"main.py": "import time\ntime.sleep(1.5)\n"}
    server = start_server("--rate-concurrent", "1", "--trusted-proxy", "127.0.0.1")

    def from_(url, client):
        return submit(url, slow, {"entrypoint": "main.py"}, headers={"X-Forwarded-For": client})

    assert from_(server.url, "2001:db8:5:6::1").status_code == 200
    refused = from_(server.url, "2001:db8:5:6:a:b:c:d")
    assert refused.status_code == 429 and refused.json()["reason"].startswith("Concurrent")
    assert from_(server.url, "2001:db8:5:7::1").status_code == 200
    assert from_(server.url, "::ffff:192.0.2.1").status_code == 200
    assert from_(server.url, "192.0.2.1").status_code == 429  # the same host as the line above

    per_address = start_server(
        "--rate-concurrent",
        "1",
        "--trusted-proxy",
        "127.0.0.1",
        env={"JOBRUNNER_RATE_IPV6_PREFIX": "128"},
    )
    assert from_(per_address.url, "2001:db8:5:6::1").status_code == 200
    assert from_(per_address.url, "2001:db8:5:6::2").status_code == 200


def _inflating_upload() -> bytes:
    """A 110 MB tarball of zeros in about 110 KB: refused at the storage limit (100 MB), after
    the server has inflated and written 100 MB of it."""
    body = io.BytesIO()
    with gzip.GzipFile(fileobj=body, mode="wb", compresslevel=9) as packed:
        zeros = bytes(1 << 20)
        for name in ("a.py", "b"):
            header = tarfile.TarInfo(name)
            header.size = 55 * len(zeros)
            packed.write(header.tobuf(format=tarfile.USTAR_FORMAT))
            for _ in range(55):
                packed.write(zeros)
        packed.write(bytes(1024))
    return body.getvalue()


def test_the_cpu_spent_on_refused_uploads_counts_against_the_clients_quota(start_server):
    server = start_server("--rate-cpu-seconds", "1", "--trusted-proxy", "127.0.0.1")
    upload = _inflating_upload()
    answers = []
    for _ in range(60):  # each costs the server a fraction of a CPU-second
        reply = httpx.post(
            f"{server.url}/submit",
            files={"files": ("job.tar.gz", upload)},
            data={"manifest": '{"entrypoint": "a.py"}'},
            headers={"X-Forwarded-For": "203.0.113.7"},
            timeout=60,
        )
        answers.append(reply.status_code)
        if reply.status_code == 429:
            assert reply.json()["reason"].startswith("CPU quota exhausted")
            break
    assert answers[0] == 400 and answers[-1] == 429, answers
    other = submit(
        server.url,
        {"main.py": "print(1)"},
        {"entrypoint": "main.py"},
        headers={"X-Forwarded-For": "203.0.113.8"},
    )
    assert other.status_code == 200  # another client's quota is its own
