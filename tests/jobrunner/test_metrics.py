"""GET /metrics on a listener of its own: the counters move as a user's requests and jobs do.

The fast tests serve the real app and its metrics app in this process (fake runner); the others
start real `jobrunner serve` / `jobrunner pool` processes with the real sandbox."""

import asyncio
import json
import socket
import subprocess
from pathlib import Path

import httpx
import pytest
import websockets
from prometheus_client.parser import text_string_to_metric_families

from jobrunner.config import load
from support.fakerunner import Served, serving, steps
from support.jobclient import (
    GENEROUS,
    HELD,
    JOBRUNNER,
    collect,
    release,
    run_job,
    submit,
    tarball,
)
from support.servers import wait_until, wait_until_async

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    """Every sample of an exposition, by name and labels (parsed as Prometheus would)."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def scrape(metrics_url: str) -> Samples:
    response = httpx.get(f"{metrics_url}/metrics", timeout=10)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return parse(response.text)


async def scrape_async(client: httpx.AsyncClient, served: Served) -> Samples:
    response = await client.get(f"{served.metrics_url}/metrics")
    assert response.status_code == 200
    return parse(response.text)


async def submit_fake(
    client: httpx.AsyncClient, served: Served, job: str, manifest: dict | None = None
) -> httpx.Response:
    return await client.post(
        f"{served.url}/submit",
        files={"files": ("job.tar.gz", tarball({"main.json": job}))},
        data={
            "manifest": json.dumps(manifest or {"entrypoint": "main.json", "interpreter": "python"})
        },
    )


async def finished(client: httpx.AsyncClient, served: Served, job_id: str) -> dict:
    job = served.service.jobs[job_id]
    while not job.finished:  # woken by the log: it grows, or closes when the job ends
        await asyncio.wait_for(job.log.wait_beyond(len(job.log.data)), 30)
    return (await client.get(f"{served.url}/status/{job_id}")).json()


def run(scenario, tmp_path: Path, **options) -> None:
    async def main() -> None:
        async with serving(tmp_path / "state", metrics=True, **options) as served:
            await scenario(served)

    asyncio.run(main())


# --- in this process, with the fake runner -----------------------------------------------------


def test_a_job_moves_the_counters_as_its_user_sees_it(tmp_path):
    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient() as client:
            before = await scrape_async(client, served)
            assert value(before, "jobrunner_slots") == 2
            assert value(before, "jobrunner_jobs_accepted_total") == 0
            assert value(before, "jobrunner_accepting") == 1
            job = steps({"out": "hello\n"}, {"file": "a.txt", "data": "A" * 1000})
            response = await submit_fake(client, served, job)
            job_id = response.json()["job_id"]
            await finished(client, served, job_id)
            download = await client.get(f"{served.url}/download/{job_id}/a.txt")
            assert download.content == b"A" * 1000
            await client.get(f"{served.url}/download/{job_id}/missing.txt")  # 404: no bytes
            after = await scrape_async(client, served)
        assert value(after, "jobrunner_jobs_accepted_total") == 1
        assert value(after, "jobrunner_jobs_finished_total", status="completed", failure="") == 1
        assert value(after, "jobrunner_job_queue_wait_seconds_count") == 1
        assert value(after, "jobrunner_job_run_seconds_count") == 1
        assert value(after, "jobrunner_downloaded_bytes_total") == 1000
        body = int(response.request.headers["content-length"])
        assert value(after, "jobrunner_uploaded_bytes_total") == body
        assert value(after, "jobrunner_queue_length") == 0
        assert value(after, "jobrunner_running_jobs") == 0

    run(scenario, tmp_path)


def test_a_failed_job_is_counted_with_its_failure(tmp_path):
    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient() as client:
            response = await submit_fake(client, served, steps({"exit": 3}))
            await finished(client, served, response.json()["job_id"])
            after = await scrape_async(client, served)
        labels = {"status": "failed", "failure": "nonzero_exit"}
        assert value(after, "jobrunner_jobs_finished_total", **labels) == 1

    run(scenario, tmp_path)


def test_refusals_are_counted_by_reason_and_a_404_is_none(tmp_path):
    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient() as client:
            bad = await submit_fake(
                client, served, steps(), {"entrypoint": "../x", "interpreter": "python"}
            )
            assert bad.status_code == 400
            held = await submit_fake(client, served, steps({"wait": "go"}))
            assert held.status_code == 200
            assert await wait_until_async(lambda: served.service.running == 1)
            assert (await submit_fake(client, served, steps())).status_code == 429
            too_big = await client.post(
                f"{served.url}/submit", content=b"x" * (2 * 2**20 + 1), timeout=30
            )
            assert too_big.status_code == 413
            assert (await client.get(f"{served.url}/status/nosuchjob")).status_code == 404
            during = await scrape_async(client, served)
            served.runner.open("go")
            await finished(client, served, held.json()["job_id"])
        assert value(during, "jobrunner_refusals_total", reason="rate_concurrent") == 1
        assert value(during, "jobrunner_refusals_total", reason="too_large") == 1
        assert value(during, "jobrunner_refusals_total", reason="invalid_manifest") == 1
        refused = [key for key in during if key[0] == "jobrunner_refusals_total"]
        assert len(refused) == 3  # the 404 is not a refusal
        assert value(during, "jobrunner_running_jobs") == 1

    run(scenario, tmp_path, rate_concurrent=1, max_upload_mb=2)


def test_open_log_streams_are_counted_while_open(tmp_path):
    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient() as client:
            held = await submit_fake(client, served, steps({"out": "x\n"}, {"wait": "go"}))
            job_id = held.json()["job_id"]
            async with websockets.connect(f"{served.ws}/logs/{job_id}/stream") as ws:
                await ws.recv()
                during = await scrape_async(client, served)
                served.runner.open("go")
                with pytest.raises(websockets.ConnectionClosedOK):
                    while True:
                        await ws.recv()

            async def closed() -> bool:
                samples = await scrape_async(client, served)
                return value(samples, "jobrunner_open_streams", kind="websocket") == 0

            assert await wait_until_async(closed)
        assert value(during, "jobrunner_open_streams", kind="websocket") == 1
        assert value(during, "jobrunner_open_streams", kind="log") == 0

    run(scenario, tmp_path)


def test_the_metrics_listener_serves_get_metrics_only(tmp_path):
    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient() as client:
            for path in ("/", "/status/x", "/metrics/", "/health"):
                response = await client.get(f"{served.metrics_url}{path}")
                assert response.status_code == 404, path
                assert response.json()["error"] == "Not found"
            posted = await client.post(f"{served.metrics_url}/metrics")
            assert posted.status_code == 405 and "error" in posted.json()
            # ... and the public listener has no /metrics.
            assert (await client.get(f"{served.url}/metrics")).status_code == 404

    run(scenario, tmp_path)


def test_two_servers_in_one_process_count_apart(tmp_path):
    async def main() -> None:
        async with (
            serving(tmp_path / "a", metrics=True) as first,
            serving(tmp_path / "b", metrics=True) as second,
            httpx.AsyncClient() as client,
        ):
            response = await submit_fake(client, first, steps())
            await finished(client, first, response.json()["job_id"])
            one = await scrape_async(client, first)
            other = await scrape_async(client, second)
        assert value(one, "jobrunner_jobs_accepted_total") == 1
        assert value(other, "jobrunner_jobs_accepted_total") == 0

    asyncio.run(main())


# --- settings ------------------------------------------------------------------------------------


def test_metrics_is_off_by_default_and_never_the_public_port(monkeypatch):
    assert load().metrics is None
    with pytest.raises(ValueError, match="--metrics: the metrics listener may not use the public"):
        load(port=9000, metrics="127.0.0.1:9000")
    with pytest.raises(ValueError, match="--metrics: expected HOST:PORT"):
        load(metrics="9100")
    monkeypatch.setenv("JOBRUNNER_METRICS", "[::1]:9100")
    assert load().metrics == "[::1]:9100"
    monkeypatch.setenv("JOBRUNNER_PORT", "9100")
    with pytest.raises(ValueError, match=r"\$JOBRUNNER_METRICS"):
        load()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("command", ["serve", "pool"])
def test_a_metrics_listener_on_the_public_port_is_an_error_at_start(command, tmp_path):
    port = str(_free_port())
    args = ["--port", port, "--metrics", f"127.0.0.1:{port}", "--state-dir", str(tmp_path / "s")]
    if command == "pool":
        workers = tmp_path / "workers.toml"
        workers.write_text('[[worker]]\nurl = "http://127.0.0.1:1"\nkey = "x"\n')
        args += ["--workers", str(workers)]
    done = subprocess.run([JOBRUNNER, command, *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "may not use the public port" in done.stderr
    assert "listening on" not in done.stderr


# --- real servers --------------------------------------------------------------------------------


def test_a_real_server_counts_a_real_job_and_a_429(start_server):
    server = start_server(*GENEROUS, "--rate-per-hour", "1", "--metrics", "127.0.0.1:0")
    assert server.metrics_url.startswith("http://127.0.0.1:")
    assert server.metrics_url != server.url
    record = run_job(server.url, "print('hi')")
    assert record["status"] == "completed"
    refused = submit(server.url, {"main.py": "print(1)"}, {"entrypoint": "main.py"})
    assert refused.status_code == 429
    samples = scrape(server.metrics_url)
    assert value(samples, "jobrunner_jobs_finished_total", status="completed", failure="") == 1
    assert value(samples, "jobrunner_job_queue_wait_seconds_count") == 1
    assert value(samples, "jobrunner_job_run_seconds_count") == 1
    assert value(samples, "jobrunner_sandbox_setup_seconds_count") == 1
    assert value(samples, "jobrunner_refusals_total", reason="rate_hourly") == 1
    assert httpx.get(f"{server.url}/metrics").status_code == 404


def test_a_real_server_shows_running_jobs_and_serves_metrics_while_draining(
    start_server, state_dir
):
    state = state_dir / "drain"
    server = start_server(*GENEROUS, "--metrics", "127.0.0.1:0", state=state)
    accepted = submit(server.url, {"main.py": HELD}, {"entrypoint": "main.py"})
    job_id = accepted.json()["job_id"]
    assert wait_until(lambda: value(scrape(server.metrics_url), "jobrunner_running_jobs") == 1)
    server.terminate()  # drains: the held job keeps running, the metrics still answer
    assert wait_until(lambda: value(scrape(server.metrics_url), "jobrunner_accepting") == 0)
    release(server.url, state, job_id)
    collect(server.url, job_id)  # record read, outputs downloaded: it may go
    assert server.wait(60) == 0


def test_without_metrics_no_listener_is_announced(start_server):
    server = start_server(*GENEROUS)
    assert server.metrics_url == ""
    assert "metrics on" not in server.output
    assert httpx.get(f"{server.url}/metrics").status_code == 404


def test_the_pool_shows_each_workers_health_and_its_dispatches(cluster):
    pool, nodes = cluster(workers=1, pool_args=("--metrics", "127.0.0.1:0"))
    worker = nodes[0].url
    assert pool.metrics_url

    def healthy() -> float | None:
        return value(scrape(pool.metrics_url), "jobrunner_pool_worker_healthy", worker=worker)

    assert wait_until(lambda: healthy() == 1, timeout=30)
    record = run_job(pool.url, "print('via the pool')")
    assert record["status"] == "completed"
    samples = scrape(pool.metrics_url)
    labels = {"worker": worker, "outcome": "accepted"}
    assert value(samples, "jobrunner_pool_dispatches_total", **labels) == 1
    assert value(samples, "jobrunner_uploaded_bytes_total") > 0
    nodes[0].stop()
    assert wait_until(lambda: healthy() == 0, timeout=30)
