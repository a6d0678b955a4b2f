"""Running the real `marks` CLI in-process (Click's runner) or as a subprocess."""

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

MARKS = str(Path(sys.executable).with_name("marks"))


@dataclass
class Result:
    code: int
    out: str
    err: str


class Runner:
    def __init__(self, db: Path) -> None:
        self.db = db

    def __call__(self, *args: str, input: str | None = None, db: bool = True) -> Result:
        from marks.cli import cli
        from marks.cli.edge import handled

        argv = (["--db", str(self.db)] if db else []) + list(args)
        with CliRunner().isolation(input=input) as (out, err, _):
            code = handled(lambda: cli.main(args=argv, prog_name="marks", standalone_mode=False))
            sys.stdout.flush()
            sys.stderr.flush()
            return Result(code, out.getvalue().decode(), err.getvalue().decode())

    def process(self, *args: str, input: str | None = None, **kwargs) -> Result:
        done = subprocess.run(
            [MARKS, "--db", str(self.db), *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=120,
            **kwargs,
        )
        return Result(done.returncode, done.stdout, done.stderr)
