"""Environment templates built for real: one build however many jobs wait; failures are clear."""

import subprocess

import httpx
import pytest

from jobrunner.sandbox.layout import Layout
from support.jobclient import GENEROUS, JOBRUNNER, log_of, submit, wait_finished
from support.servers import wait_until

USES_SIX = "import six\nprint('six', six.__version__)\n"


@pytest.mark.timeout(240)
def test_jobs_waiting_on_one_build_all_run_in_it(start_server, templates):
    server = start_server(*GENEROUS, "--templates-dir", str(templates), "--concurrency", "2")
    before = httpx.get(f"{server.url}/environments").json()["stats"]
    jobs = [
        submit(
            server.url, {"main.py": USES_SIX}, {"entrypoint": "main.py", "environment": "nlp"}
        ).json()
        for _ in range(3)
    ]
    # Meanwhile the default environment keeps working: the build holds no job slot.
    quick = submit(server.url, {"main.py": "print('quick')"}, {"entrypoint": "main.py"}).json()
    assert wait_finished(server.url, quick["job_id"], 30)["status"] == "completed"
    for job in jobs:
        record = wait_finished(server.url, job["job_id"], 200)
        assert record["status"] == "completed", log_of(server.url, job["job_id"])
        assert record["execution_metadata"]["environment"] == "nlp"
        assert log_of(server.url, job["job_id"]).endswith("six 1.16.0\n")
    assert server.output.count("building environment nlp") == 1
    after = httpx.get(f"{server.url}/environments").json()["stats"]
    assert after["cached_environments"] == before["cached_environments"] + 1
    assert after["total_uses"] >= 4 and after["disk_usage_mb"] >= 0
    # Built once, used again without building.
    again = submit(
        server.url, {"main.py": USES_SIX}, {"entrypoint": "main.py", "environment": "nlp"}
    ).json()
    assert wait_finished(server.url, again["job_id"], 30)["status"] == "completed"
    assert server.output.count("building environment nlp") == 1


@pytest.mark.timeout(240)
def test_a_failed_build_fails_its_jobs_with_a_readable_line(start_server, templates):
    server = start_server(*GENEROUS, "--templates-dir", str(templates))
    jobs = [
        submit(
            server.url,
            {"main.py": "print(1)"},
            {"entrypoint": "main.py", "environment": "scientific"},
        ).json()
        for _ in range(2)
    ]
    for job in jobs:
        record = wait_finished(server.url, job["job_id"], 200)
        assert record["status"] == "failed" and record["failure"] == "environment_error"
        log = log_of(server.url, job["job_id"])
        assert "building environment 'scientific' failed" in log
        assert "this-package-does-not-exist-jobrunner" in log
    assert record["worker_metadata"]["signature"]


@pytest.mark.timeout(240)
def test_env_list_and_build_ahead(state_dir, templates):
    state = state_dir / "cli"
    state.mkdir()  # so that the fixture finds it and removes its jail tree afterwards
    listing = subprocess.run(
        [JOBRUNNER, "env", "list", "--state-dir", str(state), "--templates-dir", str(templates)],
        capture_output=True,
        text=True,
    )
    assert listing.returncode == 0
    header, *lines = listing.stdout.splitlines()
    # No server is asked: the first line says whose templates these are.
    assert header.startswith("Environment templates of this installation, built under ")
    # ...and where they are built: the jail tree of that state dir, where its server looks.
    assert str(Layout.for_state(state).envs) in header
    names = [line.split()[0] for line in lines if not line.startswith(" ")]
    assert names == ["default", "ml-basic", "vision", "nlp", "data-science", "scientific"]
    built = subprocess.run(
        [
            JOBRUNNER,
            "env",
            "build",
            "nlp",
            "--state-dir",
            str(state),
            "--templates-dir",
            str(templates),
        ],
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert built.returncode == 0, built.stderr
    # Built where the sandboxed server of that state dir looks for it (its jail tree).
    assert (Layout.for_state(state).envs / "nlp" / "bin" / "python").exists()
    failed = subprocess.run(
        [
            JOBRUNNER,
            "env",
            "build",
            "scientific",
            "--state-dir",
            str(state),
            "--templates-dir",
            str(templates),
        ],
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert failed.returncode == 1 and "building environment 'scientific' failed" in failed.stderr
    states = subprocess.run(
        [JOBRUNNER, "env", "list", "--state-dir", str(state), "--templates-dir", str(templates)],
        capture_output=True,
        text=True,
    ).stdout
    rows = {
        line.split()[0]: line.split()[1]
        for line in states.splitlines()[1:]
        if not line.startswith(" ")
    }
    assert rows["nlp"] == "built" and rows["scientific"] == "not"
    unknown = subprocess.run(
        [JOBRUNNER, "env", "build", "gpu", "--state-dir", str(state)],
        capture_output=True,
        text=True,
    )
    assert unknown.returncode == 2


def test_packaged_templates_are_pinned_ranges():
    from jobrunner.environments import TEMPLATES, load_templates

    templates = load_templates()
    assert tuple(templates) == TEMPLATES and templates["default"].packages == ()
    for template in templates.values():
        for requirement in template.packages:
            assert (">=" in requirement and "<" in requirement) or "==" in requirement, requirement
    everything = " ".join(p for t in templates.values() for p in t.packages)
    for downloads_models in ("transformers", "spacy", "torch", "tensorflow"):
        assert downloads_models not in everything


def test_status_reports_the_environment_while_queued(start_server, templates):
    server = start_server(*GENEROUS, "--templates-dir", str(templates))
    job = submit(
        server.url, {"main.py": USES_SIX}, {"entrypoint": "main.py", "environment": "nlp"}
    ).json()
    assert wait_until(lambda: "is being built" in log_of(server.url, job["job_id"]))
    record = httpx.get(f"{server.url}/status/{job['job_id']}").json()
    assert record["execution_metadata"]["environment"] == "nlp"
    assert "is being built" in log_of(server.url, job["job_id"])
    wait_finished(server.url, job["job_id"], 200)
