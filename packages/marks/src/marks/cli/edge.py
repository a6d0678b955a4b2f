"""The CLI's edge: any failure of a command becomes one line on stderr and an exit code.

The domain errors themselves live in `marks.exceptions` (one root, `MarksError`)."""

import sys
from collections.abc import Callable

import click

from marks.exceptions import MarksError
from marks.printable import escape


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
    except UnicodeEncodeError:  # undecodable bytes on the command line reached SQLite
        print("marks: an argument is not valid text in this locale (UTF-8)", file=sys.stderr)
        return 1
    except Exception as error:
        if isinstance(error, MarksError | OSError):
            message = str(error) or type(error).__name__
            # The message may quote a title or a file's text: shown, never obeyed.
            print(f"marks: {escape(message.splitlines()[0])}", file=sys.stderr)
            return 1
        raise
    return result if isinstance(result, int) else 0
