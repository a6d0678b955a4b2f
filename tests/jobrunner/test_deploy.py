"""deploy/: the systemd units (a rootless server, a cluster node, a cluster front end) are ones
systemd accepts as written, and the Kubernetes manifests parse and give `jobrunner serve` only
options it has."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from support import require
from support.jobclient import JOBRUNNER

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
UNIT = DEPLOY / "jobrunner.service"
UNITS = ["jobrunner.service", "jobrunner-node.service", "jobrunner-frontend.service"]
KUBERNETES = DEPLOY / "kubernetes"


def _unit_settings(unit: Path = UNIT) -> dict[str, str]:
    settings = {}
    for line in unit.read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            settings[key] = value
    return settings


@pytest.mark.parametrize("name", UNITS)
def test_the_unit_passes_systemd_analyze_verify(tmp_path, name):
    analyze = shutil.which("systemd-analyze")
    require(analyze, "systemd-analyze (Debian package systemd)")
    # A root of its own: the shipped unit names /opt/jobrunner/bin/jobrunner, which verify wants
    # to be an executable, and the system's units it depends on.
    (tmp_path / "etc/systemd/system").mkdir(parents=True)
    shutil.copy(DEPLOY / name, tmp_path / f"etc/systemd/system/{name}")
    (tmp_path / "usr/lib/systemd").mkdir(parents=True)
    shutil.copytree("/usr/lib/systemd/system", tmp_path / "usr/lib/systemd/system", symlinks=True)
    executable = tmp_path / "opt/jobrunner/bin/jobrunner"
    executable.parent.mkdir(parents=True)
    executable.write_text("#!/bin/sh\n")
    executable.chmod(0o755)
    done = subprocess.run(
        [str(analyze), "verify", f"--root={tmp_path}", name],
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


# --- cluster units and Kubernetes manifests (issue 24, item 7) ---------------------------------


def _serve_options() -> set[str]:
    shown = subprocess.run(
        [JOBRUNNER, "serve", "--help"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    return set(re.findall(r"(--[a-z0-9-]+)", shown))


def _options(argv: list[str]) -> list[str]:
    return [arg.partition("=")[0] for arg in argv if arg.startswith("--")]


def _manifests() -> list[dict]:
    documents = []
    for path in sorted(KUBERNETES.glob("*.yaml")):
        documents += [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
    return documents


def _serving(documents: list[dict]) -> dict[str, dict]:
    """The Deployments that run `jobrunner serve`, by name: their pod spec."""
    found = {}
    for doc in documents:
        if doc["kind"] == "Deployment":
            spec = doc["spec"]["template"]["spec"]
            (container,) = spec["containers"]
            if container["command"][:2] == ["/opt/jobrunner/bin/jobrunner", "serve"]:
                found[doc["metadata"]["name"]] = spec
    return found


def _value(argv: list[str], option: str) -> str:
    return argv[argv.index(option) + 1]


def test_the_cluster_units_give_serve_only_options_it_has():
    known = _serve_options()
    for name in ("jobrunner-node.service", "jobrunner-frontend.service"):
        settings = _unit_settings(DEPLOY / name)
        argv = settings["ExecStart"].split()
        assert argv[:2] == ["/opt/jobrunner/bin/jobrunner", "serve"], name
        assert set(_options(argv)) <= known, (name, set(_options(argv)) - known)
        # The Valkey URL (with its password) never on a command line: $JOBRUNNER_CLUSTER.
        assert "--cluster" not in argv and settings["EnvironmentFile"], name
    node = _unit_settings(DEPLOY / "jobrunner-node.service")["ExecStart"].split()
    assert "--advertise" in node and _value(node, "--concurrency") != "0"
    front = _unit_settings(DEPLOY / "jobrunner-frontend.service")["ExecStart"].split()
    assert _value(front, "--concurrency") == "0"


def test_the_kubernetes_manifests_parse_and_name_only_options_serve_has():
    documents = _manifests()
    kinds = {(doc["kind"], doc["metadata"]["name"]) for doc in documents}
    assert {
        ("StatefulSet", "valkey"),
        ("Secret", "jobrunner-cluster"),
        ("Deployment", "jobrunner-node"),
        ("Deployment", "jobrunner-frontend"),
        ("Service", "jobrunner"),
        ("PodDisruptionBudget", "jobrunner-node"),
    } <= kinds
    secret = next(doc for doc in documents if doc["metadata"]["name"] == "jobrunner-cluster")
    assert secret["stringData"]["JOBRUNNER_CLUSTER"].startswith("rediss://jobrunner:")
    known = _serve_options()
    serving = _serving(documents)
    assert set(serving) == {"jobrunner-node", "jobrunner-frontend"}
    for name, spec in serving.items():
        (container,) = spec["containers"]
        argv = container["command"]
        assert set(_options(argv)) <= known, (name, set(_options(argv)) - known)
        assert container["readinessProbe"]["httpGet"]["path"] == "/health", name
        env = {item["name"]: item for item in container["env"]}
        assert env["JOBRUNNER_CLUSTER"]["valueFrom"]["secretKeyRef"]["name"] == "jobrunner-cluster"
        # The pod is given the whole drain before Kubernetes kills it: the jobs' grace, then
        # the retention its finished results are served for at most.
        drain = float(_value(argv, "--shutdown-grace"))
        if _value(argv, "--concurrency") != "0":
            drain += float(_value(argv, "--retention"))
        assert spec["terminationGracePeriodSeconds"] >= drain, name
    node = serving["jobrunner-node"]["containers"][0]["command"]
    assert _value(node, "--advertise") == "http://$(POD_IP):8080"
    assert _value(node, "--shutdown-grace") == _value(node, "--max-timeout")
