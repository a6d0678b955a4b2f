"""Each package declares every distribution its code imports: `pip install marks` alone must give
`marks serve` what it imports (it imported servekit and starlette and declared neither; the
monorepo's one venv, which installs every package, hid it)."""

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import pytest

PACKAGES = Path(__file__).resolve().parents[2] / "packages"


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()  # PEP 503


def _declared(package: Path) -> set[str]:
    """The distributions its requirements bring: each named one, and what their extras add
    (`redis[hiredis]` brings hiredis)."""
    project = tomllib.loads((package / "pyproject.toml").read_text())["project"]
    requirements = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        requirements += extra
    declared = set()
    for requirement in requirements:
        match = re.match(r"([A-Za-z0-9._-]+)(?:\[([^\]]*)\])?", requirement)
        assert match is not None, requirement
        name, extras = match.group(1), match.group(2)
        declared.add(_normal(name))
        if not extras:
            continue
        wanted = {extra.strip() for extra in extras.split(",")}
        for added in importlib.metadata.requires(name) or []:
            if any(re.search(rf"extra == .{re.escape(extra)}.", added) for extra in wanted):
                declared.add(_normal(re.match(r"[A-Za-z0-9._-]+", added).group()))
    return declared


def _imported(source: Path) -> set[str]:
    """Top-level module names imported anywhere in `source` (outside `if TYPE_CHECKING:`)."""
    names: set[str] = set()
    for path in source.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        skipped = {
            id(child)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for child in ast.walk(node)
        }
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("name", sorted(p.name for p in PACKAGES.iterdir() if p.is_dir()))
def test_every_imported_distribution_is_declared(name):
    package = PACKAGES / name
    distributions = importlib.metadata.packages_distributions()
    # This repository's packages, installed editable: their modules are not in that map.
    distributions.update({p.name: [p.name] for p in PACKAGES.iterdir() if p.is_dir()})
    needed = set()
    for module in _imported(package / "src"):
        if module in sys.stdlib_module_names or module == name:
            continue
        # A module no installed distribution provides is optional (imported under a guard).
        needed |= {_normal(d) for d in distributions.get(module, [])}
    assert needed - _declared(package) == set(), f"{name} imports undeclared distributions"
