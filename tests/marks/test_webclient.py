"""The shared client rules without a network: the scheduler's limits (hypothesis), host keys,
the .invalid resolver, and text extraction on arbitrary input."""

import asyncio
import socket

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marks import extract, webclient


@settings(max_examples=60, deadline=None)
@given(
    hosts=st.lists(st.sampled_from("abcdefg"), min_size=0, max_size=120),
    concurrency=st.integers(1, 12),
    per_host=st.integers(1, 4),
    backlog=st.integers(1, 30),
)
def test_scheduler_runs_everything_once_within_its_limits(hosts, concurrency, per_host, backlog):
    running: dict[str, int] = {}
    state = {"total": 0, "peak": 0, "read": 0, "done": 0, "ahead": 0}
    finished: list[int] = []

    def items():
        for number, host in enumerate(hosts):
            state["read"] += 1
            state["ahead"] = max(state["ahead"], state["read"] - state["done"])
            yield number, host

    async def work(item):
        number, host = item
        running[host] = running.get(host, 0) + 1
        state["total"] += 1
        state["peak"] = max(state["peak"], state["total"])
        assert running[host] <= per_host
        await asyncio.sleep(0.0001 * (number % 3))
        running[host] -= 1
        state["total"] -= 1
        return number * 2

    def done(item, result):
        assert result == item[0] * 2
        state["done"] += 1
        finished.append(item[0])

    scheduler = webclient.Scheduler(concurrency, per_host, backlog)
    asyncio.run(scheduler.run(items(), lambda item: item[1], work, done))
    assert sorted(finished) == list(range(len(hosts)))
    assert state["peak"] <= concurrency
    # Never more than the backlog waiting plus what runs, however long the stream.
    assert state["ahead"] <= backlog + concurrency + 1


def test_scheduler_cancels_running_work_when_stopped():
    started, cancelled = [], []

    async def work(item):
        started.append(item)
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(item)
            raise

    async def main():
        task = asyncio.ensure_future(
            webclient.Scheduler(3, 3).run(range(10), str, work, lambda i, r: None)
        )
        while len(started) < 3:
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert sorted(cancelled) == sorted(started) and len(started) == 3


def test_origin_and_host_keys():
    assert webclient.origin_of("https://Example.COM/x") == "example.com:443"
    assert webclient.origin_of("http://a.test:8080/") == "a.test:8080"
    assert webclient.host_of("http://[::1]:80/") == "::1"
    assert webclient.origin_of("http://[bad") == ""


def test_invalid_names_never_reach_dns():
    async def resolve():
        return await webclient.SpecialUseResolver().resolve("www.nothing.invalid", 80)

    with pytest.raises(OSError) as error:
        asyncio.run(resolve())
    assert error.value.errno == socket.EAI_NONAME


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=400), st.sampled_from([None, "utf-8", "latin-1", "bogus-charset"]))
def test_html_extraction_never_fails(markup, charset):
    for body in (markup, f"<html><head><title>{markup}</title></head><body>{markup}</body>"):
        page = extract.Page("http://x.test/", "text/html", charset, body.encode("utf-8", "replace"))
        found = extract.html_text(page)
        assert "\n\n\n" not in found.text and found.text == found.text.strip()
        assert "\n" not in found.title


@given(st.binary(max_size=300))
def test_decode_accepts_any_bytes(body):
    assert isinstance(extract.decode(body, None), str)


def test_declared_charset_is_honoured():
    body = (
        b'<html><head><meta charset="iso-8859-1"><title>Caf\xe9</title></head><body>na\xefve</body>'
    )
    found = extract.html_text(extract.Page("http://x.test/", "text/html", None, body))
    assert found.title == "Café" and "naïve" in found.text
    header = extract.html_text(
        extract.Page("http://x.test/", "text/html", "cp1252", b"<p>\x93q\x94</p>")
    )
    assert header.text == "\u201cq\u201d"
