"""`make demo`: runs each product's main path on embedded defaults and shows what happens."""

import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent


def run(*argv: str) -> str:
    print(f"$ {' '.join(argv)}", flush=True)
    result = subprocess.run([str(BIN / argv[0]), *argv[1:]], capture_output=True, text=True)
    print(result.stdout + result.stderr, end="", flush=True)
    if result.returncode != 0:
        sys.exit(f"demo step failed: {' '.join(argv)}")
    return result.stdout


def main() -> None:
    print("== jobrunner ==")
    run("jobrunner", "--version")
    print("\n== marks ==")
    run("marks", "--version")


if __name__ == "__main__":
    main()
