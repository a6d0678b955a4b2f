"""Rough edges a new user met (issue 23, item 8): the command line's URLs, options, settings,
start-up and shutdown lines, TLS with a private CA, empty outputs, completion, the READMEs."""

import os
import re
import subprocess
from pathlib import Path

import click
import msgspec
import pytest
import trustme

from jobrunner.cli import main
from support.jobclient import (
    HELD,
    JOBRUNNER,
    collect,
    log_of,
    release,
    submit,
    wait_finished,
    worker_key,
    write_allowlist,
)
from support.servers import ServerProcess, wait_until

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("jobrunner", "servekit")  # marks has its own README to mend


def run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None):
    return subprocess.run(
        [JOBRUNNER, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("jobrunner: "), result.stderr
    return lines[0]


# --- the server's URL -----------------------------------------------------------------------------


def test_a_server_without_a_scheme_is_http(server):
    """`127.0.0.1:8080` or `localhost:8080` is read as curl reads it, http://; it was a traceback
    (aiohttp's NonHttpUrlClientError)."""
    address = server.url.removeprefix("http://")
    assert one_line_error(run("status", "--server", address, "nosuchjob")).startswith(
        "jobrunner: 404 Job not found"
    )
    local = address.replace("127.0.0.1", "localhost")
    from_variable = run("status", "nosuchjob", env={"JOBRUNNER_SERVER": local})
    assert one_line_error(from_variable).startswith("jobrunner: 404 Job not found")


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("ftp://127.0.0.1:8080", "not an http:// or https:// URL"),
        ("http://127.0.0.1:port", "is not a URL"),
        ("http://", "not an http:// or https:// URL"),
    ],
)
def test_a_server_that_is_no_http_url_is_one_line(url: str, said: str):
    for result in (
        run("status", "--server", url, "abc"),
        run("outputs", "abc", env={"JOBRUNNER_SERVER": url}),
    ):
        line = one_line_error(result)
        assert said in line and repr(url) in line


# --- every setting an option, every option a help text --------------------------------------------


def options_of(command: click.Command) -> dict[str, click.Option]:
    return {
        param.name: param
        for param in command.params
        if isinstance(param, click.Option) and param.name is not None
    }


def every_command(group: click.Group, context: click.Context):
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        assert command is not None
        yield command
        if isinstance(command, click.Group):
            yield from every_command(command, context)


def test_every_setting_is_an_option_and_every_option_has_help():
    from jobrunner import config

    commands = {"serve": config.Settings, "pool": config.PoolSettings}
    for name, settings in commands.items():
        command = main.commands[name]
        options = options_of(command)
        for field in msgspec.structs.fields(settings):
            assert field.name in options, f"`jobrunner {name}` has no option for {field.name}"
        assert "config_file" in options  # and a TOML file of them
    with click.Context(main) as context:
        for command in every_command(main, context):
            for option in options_of(command).values():
                assert option.help, f"`jobrunner {command.name} {option.opts[0]}` has no help"


# --- the pool's settings: a TOML file, JOBRUNNER_POOL_* variables, options ------------------------


def test_pool_settings_from_each_source_in_order(tmp_path, monkeypatch):
    from jobrunner.config import load_pool

    config = tmp_path / "pool.toml"
    config.write_text('workers = "w.toml"\nport = 9000\nlost_after = 5\nmax_uploads = 4\n')
    settings = load_pool(config)
    assert (settings.workers, settings.port, settings.lost_after) == ("w.toml", 9000, 5)
    assert settings.rate_streams == 8 and settings.host == "127.0.0.1"  # the defaults
    monkeypatch.setenv("JOBRUNNER_PORT", "9999")  # a worker's variable: not the pool's
    assert load_pool(config).port == 9000
    monkeypatch.setenv("JOBRUNNER_POOL_PORT", "9100")
    monkeypatch.setenv("JOBRUNNER_POOL_TRUSTED_PROXIES", "10.0.0.2,10.0.0.3")
    settings = load_pool(config)
    assert settings.port == 9100 and settings.max_uploads == 4
    assert settings.trusted_proxies == ["10.0.0.2", "10.0.0.3"]
    assert load_pool(config, port=9200, max_uploads=None).port == 9200


@pytest.mark.parametrize(
    ("how", "named"),
    [
        ("file", "`lost_after` in "),
        ("variable", "$JOBRUNNER_POOL_MAX_STREAMS"),
        ("missing", "give --workers (or `workers` in the --config file, or "),
    ],
)
def test_a_bad_pool_setting_is_one_line_naming_its_source(state_dir, how, named):
    workers = write_allowlist(state_dir / "workers.toml", [])
    config = state_dir / "pool.toml"
    lines = {"file": 'lost_after = "often"\n', "missing": "port = 0\n"}
    config.write_text(lines.get(how, f'workers = "{workers}"\n'))
    env = {"JOBRUNNER_POOL_MAX_STREAMS": "0"} if how == "variable" else {}
    result = run("pool", "--config", str(config), "--state-dir", str(state_dir / "p"), env=env)
    assert named in one_line_error(result)


def test_pool_starts_from_its_config_file_and_prints_its_key(state_dir):
    from jobrunner.signing import WorkerKey

    absent = WorkerKey.load_or_create(state_dir / "absent.key").worker_id
    workers = write_allowlist(state_dir / "workers.toml", [("http://127.0.0.1:9", absent)])
    config = state_dir / "pool.toml"
    config.write_text(f'workers = "{workers}"\nport = 0\nstate_dir = "{state_dir / "p"}"\n')
    with ServerProcess([JOBRUNNER, "pool", "--config", str(config)]) as pool:
        key = worker_key(pool.url)
        assert f"worker_id {key} (the pool's key)" in pool.output
    # JOBRUNNER_POOL_* variables alone are enough too
    with ServerProcess(
        [JOBRUNNER, "pool"],
        env={
            "JOBRUNNER_POOL_WORKERS": str(workers),
            "JOBRUNNER_POOL_PORT": "0",
            "JOBRUNNER_POOL_STATE_DIR": str(state_dir / "p"),
        },
    ) as pool:
        assert worker_key(pool.url) == key  # the same state dir, so the same key


# --- start-up and shutdown lines ------------------------------------------------------------------


def test_the_server_prints_its_worker_id_at_start(server):
    assert f"worker_id {worker_key(server.url)}\n" in server.output


def test_sigterm_draining_and_stop_are_logged(start_server, state_dir):
    server = start_server()
    job = submit(server.url, {"main.py": HELD}, {"entrypoint": "main.py", "timeout": 120}).json()
    assert wait_until(lambda: "held" in log_of(server.url, job["job_id"]), timeout=60)
    server.terminate()
    assert wait_until(lambda: "draining" in server.output, timeout=30), server.output
    release(server.url, state_dir / "s0", job["job_id"])
    assert wait_until(lambda: "handing over" in server.output, timeout=60), server.output
    collect(server.url, job["job_id"])  # record read, outputs downloaded: nothing is owed
    assert server.wait(60) == 0
    said = [
        "SIGTERM received: shutting down",
        "draining: new jobs are refused (503), 0 queued and 1 running job(s) get up to 30 s",
        f"job {job['job_id']} completed",
        "drained: no job is running",
        "handing over: 1 finished job(s) not yet collected",
        "handed over: 0 finished job(s) left uncollected",
        "jobrunner INFO stopped",
    ]
    where = [server.output.find(line) for line in said]
    assert -1 not in where and where == sorted(where), server.output


# --- --cacert: a server whose certificate is from a private CA ------------------------------------


def test_cacert_trusts_a_private_ca_for_every_client_command(start_server, state_dir, tmp_path):
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    certfile, keyfile, cafile = state_dir / "cert.pem", state_dir / "key.pem", tmp_path / "ca.pem"
    cert.cert_chain_pems[0].write_to_path(certfile)
    cert.private_key_pem.write_to_path(keyfile)
    ca.cert_pem.write_to_path(cafile)
    server = start_server("--certfile", str(certfile), "--keyfile", str(keyfile))
    assert server.url.startswith("https://")
    (tmp_path / "main.py").write_text("print('over tls')\n")
    refused = run("submit", str(tmp_path / "main.py"), "--server", server.url)
    assert "--cacert FILE" in one_line_error(refused)
    trusted = run(
        "submit",
        str(tmp_path / "main.py"),
        "--follow",
        "--server",
        server.url,
        "--cacert",
        str(cafile),
    )
    assert trusted.returncode == 0, trusted.stderr
    assert "over tls" in trusted.stdout and "signature valid" in trusted.stderr  # wss:// too
    queued = re.search(r"job (\S+) queued", trusted.stderr)
    assert queued is not None
    job_id = queued.group(1)
    status = run(
        "status", job_id, env={"JOBRUNNER_SERVER": server.url, "JOBRUNNER_CACERT": str(cafile)}
    )
    assert status.returncode == 0 and '"completed"' in status.stdout
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("no certificate here\n")
    line = one_line_error(run("status", job_id, "--server", server.url, "--cacert", str(not_pem)))
    assert f"the CA file {not_pem} cannot be used" in line


# --- outputs: when there are none, why ------------------------------------------------------------


def test_outputs_says_why_there_are_none(server, state_dir, tmp_path):
    (tmp_path / "main.py").write_text("open('result.txt', 'w').write('made')\n")
    submitted = run(
        "submit",
        str(tmp_path / "main.py"),
        "--follow",
        "--output",
        "results/*.txt",
        "--output",
        "*.txt",
        "--server",
        server.url,
    )
    assert submitted.returncode == 0, submitted.stderr
    assert "--output 'results/*.txt' matched no file of the job's work dir" in submitted.stderr
    assert "'*.txt' matched no" not in submitted.stderr

    (tmp_path / "main.py").write_text("print('nothing written')\n")
    submitted = run("submit", str(tmp_path / "main.py"), "--server", server.url)
    job_id = submitted.stdout.strip()
    wait_finished(server.url, job_id)
    listed = run("outputs", job_id, "--server", server.url)
    assert listed.returncode == 0 and listed.stdout == ""
    assert listed.stderr.startswith(
        "jobrunner: no outputs: when the job ended (completed), no file in its work dir matched "
        "its outputs patterns"
    )

    held = submit(server.url, {"main.py": HELD}, {"entrypoint": "main.py"}).json()["job_id"]
    assert wait_until(lambda: "held" in log_of(server.url, held), timeout=60)
    listed = run("outputs", held, "--server", server.url)
    assert listed.stderr.startswith("jobrunner: no outputs yet: the job is running")
    release(server.url, state_dir / "s0", held)
    wait_finished(server.url, held)


# --- shell completion, as the README documents it -------------------------------------------------


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_shell_completion_scripts(shell):
    script = run(env={"_JOBRUNNER_COMPLETE": f"{shell}_source"})
    assert script.returncode == 0 and "_jobrunner_completion" in script.stdout


def test_completion_names_the_commands():
    completed = run(
        env={"_JOBRUNNER_COMPLETE": "bash_complete", "COMP_WORDS": "jobrunner s", "COMP_CWORD": "1"}
    )
    assert completed.stdout.split() == ["plain,serve", "plain,status", "plain,submit"]


# --- the READMEs: a user has the repository, nothing beside it ------------------------------------


def test_no_readme_sends_a_user_outside_the_repository():
    readmes = [ROOT / "README.md", *(ROOT / "packages" / name / "README.md" for name in PACKAGES)]
    for readme in readmes:
        text = readme.read_text()
        for found in re.finditer(r"(\.\./)?shared/(seeds|design)\b", text):
            line = text[: found.start()].count("\n") + 1
            raise AssertionError(f"{readme.relative_to(ROOT)}:{line} points to {found.group()}")
