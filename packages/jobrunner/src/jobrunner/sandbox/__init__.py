"""The sandbox: nsjail with a shipped policy, per-job cgroups and a per-job tmpfs work dir."""

from jobrunner.sandbox.jail import Sandbox, SandboxUnavailable
from jobrunner.sandbox.runs import RunResult, RunSpec

__all__ = ["RunResult", "RunSpec", "Sandbox", "SandboxUnavailable"]
