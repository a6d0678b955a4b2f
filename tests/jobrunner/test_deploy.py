"""deploy/: the systemd unit of a rootless server is one systemd accepts as written."""

import shutil
import subprocess
from pathlib import Path

from support import require

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
UNIT = DEPLOY / "jobrunner.service"


def _unit_settings() -> dict[str, str]:
    settings = {}
    for line in UNIT.read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            settings[key] = value
    return settings


def test_the_unit_passes_systemd_analyze_verify(tmp_path):
    analyze = shutil.which("systemd-analyze")
    require(analyze, "systemd-analyze (Debian package systemd)")
    # A root of its own: the shipped unit names /opt/jobrunner/bin/jobrunner, which verify wants
    # to be an executable, and the system's units it depends on.
    (tmp_path / "etc/systemd/system").mkdir(parents=True)
    shutil.copy(UNIT, tmp_path / "etc/systemd/system/jobrunner.service")
    (tmp_path / "usr/lib/systemd").mkdir(parents=True)
    shutil.copytree("/usr/lib/systemd/system", tmp_path / "usr/lib/systemd/system", symlinks=True)
    executable = tmp_path / "opt/jobrunner/bin/jobrunner"
    executable.parent.mkdir(parents=True)
    executable.write_text("#!/bin/sh\n")
    executable.chmod(0o755)
    done = subprocess.run(
        [str(analyze), "verify", f"--root={tmp_path}", "jobrunner.service"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    # Exit status 0 alone is not enough: an unknown or misspelt setting is only a warning.
    assert (done.returncode, done.stdout + done.stderr) == (0, ""), done


def test_the_unit_is_rootless_delegated_and_hardened():
    settings = _unit_settings()
    assert settings["User"] == "jobrunner" and "DynamicUser" not in settings
    assert settings["Delegate"] == "yes" and settings["StateDirectory"] == "jobrunner"
    assert settings["ProtectSystem"] == "strict" and settings["PrivateTmp"] == "yes"
    assert settings["ExecStart"].startswith("/opt/jobrunner/bin/jobrunner serve ")
    # What would break the sandbox is off (see the unit's comments).
    for breaking in ("ProtectKernelTunables", "ProtectControlGroups", "PrivateUsers"):
        assert breaking not in settings
