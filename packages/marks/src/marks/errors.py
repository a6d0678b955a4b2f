"""Turning any failure of a command into one line on stderr and an exit code."""

import sys
from collections.abc import Callable

import click


def _expected() -> tuple[type[BaseException], ...]:
    from marks.filters import FilterError
    from marks.formats import FormatError
    from marks.library import MarksError
    from marks.settings import ConfigError
    from marks.store import StoreError

    return MarksError, FormatError, ConfigError, StoreError, FilterError, OSError


def handled(run: Callable[[], object]) -> int:
    try:
        result = run()
    except click.exceptions.Exit as done:
        return done.exit_code
    except click.ClickException as error:
        error.show()
        return error.exit_code  # 2 for usage errors
    except click.Abort:
        print("marks: aborted", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("marks: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0  # `marks bookmark list | head` is not an error
    except Exception as error:
        if isinstance(error, _expected()):
            message = str(error) or type(error).__name__
            print(f"marks: {message.splitlines()[0]}", file=sys.stderr)
            return 1
        raise
    return result if isinstance(result, int) else 0
