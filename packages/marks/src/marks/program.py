"""The `marks` program: the process that runs one command line (the console script's entry).

What a process may do that an importer of `marks.cli` (the tests, the server) must not have done
to its interpreter lives here. Python's cyclic garbage collector costs a short command about a
tenth of its instructions and finds nothing to free in them:

- While the command line's modules load it is off, and what they made is then frozen
  (`gc.freeze`: kept out of every later collection). Imports make classes, functions and tables
  that live as long as the process; the collections they triggered walked them again and again
  (about 13 million instructions of `bookmark list`). It is on again for the command itself,
  which is what may make garbage: an import of a million bookmarks, a server running for days.
- At exit what is left is frozen too: the interpreter's last collections would walk every object
  of the process to free memory that the exit gives back anyway (about 24 million instructions).
  Nothing waits on them: the command's library file is closed when its command ends
  (`marks.cli.State`), and files are closed where they are written.
"""

import gc
import sys


def main() -> None:
    gc.disable()
    try:
        from marks.cli import run
    finally:
        gc.freeze()
        gc.enable()
    try:
        status = run()
    finally:
        gc.freeze()
    sys.exit(status)
