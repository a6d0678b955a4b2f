"""Checking one link: HEAD, GET when HEAD is refused or inconclusive, retries, and the verdict.

Verdicts users can trust: only timeouts, 408, 429 and 5xx are retried (with backoff, honouring a
bounded `Retry-After`); a 403/503 with `cf-mitigated: challenge` is a bot wall (`blocked`), not a
dead page; a name that does not exist is `dns`; 401/403/429 mean the page is there behind a wall.
A host that keeps failing to connect is declared down, and its remaining links are not tried.
"""

import asyncio
import socket
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import aiohttp

from marks.webclient import MAX_REDIRECTS, origin_of

RESULTS = (
    "ok",
    "redirect",
    "blocked",
    "client_error",
    "server_error",
    "timeout",
    "ssl_error",
    "connection_error",
    "dns",
)
LABELS = {
    name: name.replace("_", " ").replace("ssl", "SSL").replace("dns", "DNS (no such host)")
    for name in RESULTS
}
REACHABLE_STATUSES = {401, 403, 429}  # the page exists behind a login, a wall or a rate limit
HEAD_REFUSED = {403, 405, 501}
RETRY_STATUSES = {408, 429}  # and every 5xx
MAX_RETRY_AFTER = 30.0
GET_BYTES = 4096
HOST_DOWN_AFTER = 2  # failures to connect in a row, with no answer at all from the host


@dataclass
class Verdict:
    result: str
    status: int | None = None
    final_url: str | None = None
    detail: str = ""
    retry_after: float | None = None
    attempts: int = 1
    elapsed_ms: int = 0

    @property
    def reachable(self) -> bool:
        if self.result in ("ok", "redirect", "blocked"):
            return True
        return self.result == "client_error" and self.status in REACHABLE_STATUSES

    @property
    def retryable(self) -> bool:
        if self.result == "timeout":
            return True
        return self.status is not None and (self.status in RETRY_STATUSES or self.status >= 500)


@dataclass
class HostGate:
    """Hosts that never answer: after HOST_DOWN_AFTER connection failures in a row (or one name
    that does not exist) the host is down for the rest of the run."""

    failures: dict[str, int] = field(default_factory=dict)
    down: dict[str, Verdict] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)  # links not tried, per host
    answered: set[str] = field(default_factory=set)  # hosts that sent any HTTP answer

    def record(self, host: str, verdict: Verdict, first_attempt: bool = True) -> None:
        if verdict.status is not None or verdict.result not in (
            "timeout",
            "connection_error",
            "dns",
        ):
            self.answered.add(host)
            self.failures.pop(host, None)
            return
        if not first_attempt or (verdict.result == "timeout" and host in self.answered):
            return  # a retry, or one slow page of a server that answers: not a dead host
        self.failures[host] = self.failures.get(host, 0) + 1
        if verdict.result == "dns" or self.failures[host] >= HOST_DOWN_AFTER:
            self.down.setdefault(host, verdict)

    def verdict_for(self, host: str) -> Verdict | None:
        first = self.down.get(host)
        if first is None:
            return None
        self.skipped[host] = self.skipped.get(host, 0) + 1
        return Verdict(
            first.result,
            detail=f"not tried: {host} did not answer earlier links ({first.detail})",
        )


def classify(status: int, redirected: bool, headers: Mapping[str, str]) -> str:
    if status in (403, 503) and headers.get("cf-mitigated", "").lower() == "challenge":
        return "blocked"
    if status >= 500:
        return "server_error"
    if status >= 400:
        return "client_error"
    return "redirect" if redirected else "ok"


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("Retry-After", "").strip()
    if value.isdigit():
        return min(float(value), MAX_RETRY_AFTER)
    return None  # HTTP dates are rare here; the backoff applies


def _failure(error: BaseException) -> Verdict:
    if isinstance(error, asyncio.TimeoutError | aiohttp.ServerTimeoutError):
        return Verdict("timeout", detail="no answer in time")
    if isinstance(error, aiohttp.TooManyRedirects):
        return Verdict("client_error", detail=f"more than {MAX_REDIRECTS} redirects (a loop?)")
    if isinstance(error, aiohttp.ClientConnectorCertificateError):
        return Verdict("ssl_error", detail=f"certificate: {error.certificate_error}")
    if isinstance(error, aiohttp.ClientSSLError | ssl.SSLError):
        return Verdict("ssl_error", detail=str(error) or type(error).__name__)
    if isinstance(error, aiohttp.ClientConnectorDNSError):
        code = getattr(error.os_error, "errno", None)
        if code in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", -5)):
            return Verdict("dns", detail="no such host")
        return Verdict("connection_error", detail=f"name lookup failed: {error.os_error}")
    if isinstance(error, aiohttp.ClientConnectorError):
        return Verdict("connection_error", detail=str(error.os_error.strerror or error.os_error))
    if isinstance(error, aiohttp.InvalidURL):
        return Verdict("client_error", detail=f"not a valid URL: {error}")
    return Verdict("connection_error", detail=str(error) or type(error).__name__)


async def _request(
    session: aiohttp.ClientSession, method: str, url: str, timeout: float
) -> tuple[int, bool, str, Mapping[str, str]]:
    async with session.request(
        method,
        url,
        allow_redirects=True,
        max_redirects=MAX_REDIRECTS,
        timeout=aiohttp.ClientTimeout(total=timeout),
    ) as response:
        if method == "GET":
            await response.content.read(GET_BYTES)  # enough to see the server answers
        return response.status, bool(response.history), str(response.url), response.headers


async def _attempt(session: aiohttp.ClientSession, url: str, timeout: float) -> Verdict:
    try:
        status, redirected, final, headers = await _request(session, "HEAD", url, timeout)
        if status >= 400 or status in HEAD_REFUSED:
            # Many servers refuse or mishandle HEAD: ask again the way a browser does.
            status, redirected, final, headers = await _request(session, "GET", url, timeout)
    except (
        aiohttp.ServerDisconnectedError,
        aiohttp.ClientPayloadError,
        aiohttp.ClientResponseError,
    ):
        try:  # some servers hang up on HEAD, or answer it with a body
            status, redirected, final, headers = await _request(session, "GET", url, timeout)
        except Exception as error:
            return _failure(error)
    except Exception as error:
        return _failure(error)
    result = classify(status, redirected, headers)
    return Verdict(
        result,
        status=status,
        final_url=final if redirected else None,
        detail=f"-> {final}" if redirected else "",
        retry_after=_retry_after(headers),
    )


async def check(
    session: aiohttp.ClientSession,
    url: str,
    *,
    timeout: float,
    retries: int,
    gate: HostGate,
    backoff: float = 0.5,
) -> Verdict:
    """The verdict on one URL, retrying what may pass on a second try."""
    host = origin_of(url)
    started = time.monotonic()
    attempts = 0
    skipped = gate.verdict_for(host)
    if skipped is not None:
        return skipped
    while True:
        attempts += 1
        verdict = await _attempt(session, url, timeout)
        gate.record(host, verdict, first_attempt=attempts == 1)
        if not verdict.retryable or attempts > retries or host in gate.down:
            break
        await asyncio.sleep(verdict.retry_after or backoff * 2 ** (attempts - 1))
        if host in gate.down:  # declared down while we waited: this failure stands
            break
    verdict.attempts = attempts
    verdict.elapsed_ms = int((time.monotonic() - started) * 1000)
    return verdict
