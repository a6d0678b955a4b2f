"""Whole-command benchmarks run `marks` as a user's install does: with its modules byte-compiled.

`pip install marks` writes every module's `.pyc`. An editable install (`make dev`) under
`PYTHONDONTWRITEBYTECODE=1`, as on the project's machines, has none for marks' own sources, so
each run would compile some 55 modules from source, about 70 ms of every short command that no
user pays. `compile_marks()` writes them once before the measurements (compileall writes whatever
that variable says; a source changed since is compiled again, as Python itself checks the times).
"""

import compileall
from pathlib import Path

import marks


def compile_marks() -> None:
    package = Path(marks.__file__).parent
    if not compileall.compile_dir(str(package), quiet=1):
        raise RuntimeError(f"marks' sources in {package} do not compile")
