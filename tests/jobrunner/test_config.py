"""Settings: defaults are the interface's limits; TOML < JOBRUNNER_* variables < options."""

import os
import subprocess

import pytest

from jobrunner.config import load
from support.jobclient import JOBRUNNER


def test_defaults_are_the_interface_limits():
    settings = load()
    assert (settings.rate_concurrent, settings.rate_per_hour, settings.rate_cpu_seconds) == (
        2,
        20,
        10.0,
    )
    assert (settings.max_memory_mb, settings.max_timeout, settings.storage_mb) == (512, 300, 100)
    assert settings.host == "127.0.0.1" and settings.max_upload_mb == 50
    # A slot per CPU and one more, so no core idles while a slot is between jobs.
    assert settings.concurrency == (os.cpu_count() or 1) + 1


def test_precedence(tmp_path, monkeypatch):
    config = tmp_path / "jobrunner.toml"
    config.write_text('port = 9000\nconcurrency = 3\ntrusted_proxies = ["10.0.0.1"]\n')
    assert load(config).port == 9000
    monkeypatch.setenv("JOBRUNNER_PORT", "9100")
    monkeypatch.setenv("JOBRUNNER_TRUSTED_PROXIES", "10.0.0.2,10.0.0.3")
    settings = load(config)
    assert settings.port == 9100 and settings.concurrency == 3
    assert settings.trusted_proxies == ["10.0.0.2", "10.0.0.3"]
    assert load(config, port=9200).port == 9200


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("colour = 'red'\n", "colour"),
        ("port = 'eighty'\n", "port"),
    ],
)
def test_bad_settings_are_one_line_errors(tmp_path, text, message):
    config = tmp_path / "bad.toml"
    config.write_text(text)
    with pytest.raises(ValueError, match=message):
        load(config)
    result = subprocess.run(
        [JOBRUNNER, "serve", "--config", str(config)], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 1
    assert result.stderr.startswith("jobrunner: invalid setting") and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("how", "named"),
    [
        ("variable", "$JOBRUNNER_PORT"),
        ("option", "--rate-cpu-seconds"),
        ("file", "`retention` in "),
    ],
)
def test_bad_setting_names_the_variable_flag_or_key_at_fault(tmp_path, how, named):
    config = tmp_path / "jobrunner.toml"
    config.write_text("retention = 'long'\n" if how == "file" else "")
    env = {"JOBRUNNER_PORT": "eighty"} if how == "variable" else {}
    options = ["--rate-cpu-seconds", "lots"] if how == "option" else []
    result = subprocess.run(
        [JOBRUNNER, "serve", "--config", str(config), *options],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, **env},
    )
    assert result.returncode != 0
    assert named in result.stderr, result.stderr
    if how != "option":  # options are typed by click, which adds its usage line
        assert len(result.stderr.strip().splitlines()) == 1


def test_write_timeout_from_each_source(tmp_path, monkeypatch):
    assert load().write_timeout == 30.0
    config = tmp_path / "jobrunner.toml"
    config.write_text("write_timeout = 5\n")
    assert load(config).write_timeout == 5.0
    monkeypatch.setenv("JOBRUNNER_WRITE_TIMEOUT", "7.5")
    assert load(config).write_timeout == 7.5
    assert load(config, write_timeout=2.0).write_timeout == 2.0
    with pytest.raises(ValueError, match=r"JOBRUNNER_WRITE_TIMEOUT.*> 0"):
        monkeypatch.setenv("JOBRUNNER_WRITE_TIMEOUT", "0")
        load(config)
    for command in ("serve", "pool"):
        usage = subprocess.run([JOBRUNNER, command, "--help"], capture_output=True, text=True)
        assert "--write-timeout" in usage.stdout
