"""The sandbox: nsjail with a shipped policy, per-job cgroups and a per-job tmpfs work dir."""

from jobrunner.sandbox.jail import RunResult, RunSpec, Sandbox, SandboxUnavailable

__all__ = ["RunResult", "RunSpec", "Sandbox", "SandboxUnavailable"]
