"""`make bench`: runs every benchmarks/bench_*.py (or those named) and prints one table.

Each benchmark module has `run() -> list[Row]`. A row names what was measured, the value, its unit
and the target, so the table says at a glance what meets its goal.
"""

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).parent


@dataclass
class Row:
    name: str
    value: float
    unit: str
    target: float | None = None
    higher_is_better: bool = False

    @property
    def verdict(self) -> str:
        if self.target is None:
            return ""
        ok = self.value >= self.target if self.higher_is_better else self.value <= self.target
        return "ok" if ok else "MISS"

    @property
    def target_text(self) -> str:
        if self.target is None:
            return "-"
        return f"{'>=' if self.higher_is_better else '<='} {self.target:g} {self.unit}"


def load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def print_table(rows: list[Row]) -> None:
    header = ("benchmark", "measured", "target", "")
    cells = [(r.name, f"{r.value:.4g} {r.unit}", r.target_text, r.verdict) for r in rows]
    widths = [max(len(str(c[i])) for c in [header, *cells]) for i in range(4)]

    def line(cell: tuple[str, ...]) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cell, widths, strict=True)) + " |"

    print(line(header))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for cell in cells:
        print(line(cell))


def main(selected: list[str]) -> None:
    sys.path.insert(0, str(HERE))
    rows: list[Row] = []
    for path in sorted(HERE.glob("bench_*.py")):
        if selected and not any(name in path.stem for name in selected):
            continue
        print(f"running {path.stem} ...", file=sys.stderr, flush=True)
        rows.extend(load(path).run())
    print_table(rows)


if __name__ == "__main__":
    main(sys.argv[1:])
