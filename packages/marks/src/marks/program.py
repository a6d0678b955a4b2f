"""The `marks` program: the process that runs one command line (the console script's entry).

What a process may do that an importer of `marks.cli` (the tests, the server) must not have done
to its interpreter lives here. Python's cyclic garbage collector costs a short command about a
tenth of its instructions and finds nothing to free in them:

- While the command line's modules load it is off: `marks.cli`, Click, then the command's
  group (`marks.cli.bookmark` with msgspec) as Click parses the line. What they made is frozen
  (`gc.freeze`: kept out of every later collection) just before the command runs (`run`'s
  `starting`). Imports make classes, functions and tables that live as long as the process; the
  collections they triggered walked them again and again (about 15 million instructions of
  `bookmark list`). It is on again for the command itself, which is what may make garbage: an
  import of a million bookmarks, a server running for days.
- At exit what is left is frozen too: the interpreter's last collections would walk every object
  of the process to free memory that the exit gives back anyway (about 24 million instructions).
  Nothing waits on them: the command's library file is closed when its command ends
  (`marks.cli.State`), and files are closed where they are written.
- Then the process leaves without the interpreter's teardown of every module (about 6 million
  instructions of `bookmark list`), but only once what that teardown would finish is done: the
  output is flushed, the `atexit` functions have run, and only when no SQLite connection is
  open, no other thread runs and no plugin's code was loaded (else the ordinary exit, which
  waits for them and finalizes what a plugin may have left open).
"""

import atexit
import gc
import os
import sys
import threading


def main() -> None:
    gc.disable()
    try:
        from marks.cli import run

        status = run(starting=_collect_from_here)
    finally:
        gc.freeze()
    leave(status)


def _collect_from_here() -> None:
    """Once the command line is parsed and its group's modules (msgspec with them) are loaded:
    what they made is frozen and the collector is on for the command itself."""
    gc.freeze()
    gc.enable()


def leave(status: int) -> None:
    """Exit with `status`: straight away when nothing is left for the interpreter to finish."""
    if threading.active_count() > 1 or _connections_open() or _plugins_loaded():
        sys.exit(status)  # the ordinary exit waits for threads and closes what is open
    atexit._run_exitfuncs()  # e.g. logging's last flush: what the ordinary exit runs first
    try:
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            if stream is not None:
                stream.flush()
    except BaseException:  # e.g. a closed pipe: the ordinary exit reports it as it always did
        sys.exit(status)
    os._exit(status)


def _plugins_loaded() -> bool:
    """Whether a plugin's code ran here: marks closes every file it writes, a plugin may not."""
    plugins = sys.modules.get("marks.plugins")
    return plugins is not None and bool(plugins.foreign_code_loaded)


def _connections_open() -> bool:
    """Whether any SQLite connection is still open (one the command did not close itself)."""
    apsw = sys.modules.get("apsw")  # loaded only by a command that opened a library
    return apsw is not None and bool(apsw.connections())
