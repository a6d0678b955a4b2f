"""Reading an import file in a second process: the child reads, parses and checks, the parent
writes, so on two cores the parsing and the checks run beside SQLite's work.

The child is a `fork` of the CLI's process, made once the import's transaction has begun. It
inherits the open SQLite connection and must never touch it: it runs only the reader, sends what
it finds through a pipe and leaves with `os._exit` whatever happens (no destructors, no `atexit`,
no flushing of the parent's buffers). What it finds crosses in batches as msgpack, items of one
msgspec type (the import's checked entries, whose `Record`s round-trip exactly: their times are
UTC instants, which is all the library keeps of them).

Whatever the reader would have raised in the parent crosses as well: a `FormatError`'s line and an
undecodable file's position come back as the same exceptions, so the import fails with the same
one line; anything else the child raises becomes one line too. A child that stops without saying
it is done (killed, out of memory) fails the import with `ReaderDied`; the parent's transaction
then rolls back, so the library is as it was. The parent that stops early (an error, Ctrl-C)
kills and reaps the child.

Only the CLI importing a named file uses this (`transfer.import_file(..., separate=True)`): the
server has threads, which `fork` does not copy.
"""

import contextlib
import fcntl
import os
import signal
import struct
import types
from collections.abc import Callable, Iterator
from typing import IO, Generic, TypeVar

import msgspec

from marks.exceptions import MarksError
from marks.formats import FormatError

BATCH = 2000  # items per message
PIPE_BYTES = 1 << 20  # Linux's pipe-max-size by default: several messages (about 200 KB each)
_SIZE = struct.Struct("<I")  # each message: its length, then its msgpack


class ReaderDied(MarksError):
    """The process reading the file stopped before its end: nothing is imported."""


Item = TypeVar("Item")


class _Batch(msgspec.Struct, Generic[Item], tag="batch"):
    items: list[Item]
    position: int  # bytes of the file read so far (for the progress bar)


class _Done(msgspec.Struct, tag="done"):
    warnings: list[str]  # about the whole file (its charset), found while reading


class _Failed(msgspec.Struct, tag="failed"):
    kind: str  # "format", "decode" or "other"
    message: str
    encoding: str = ""  # for "decode": what UnicodeDecodeError carried
    start: int = 0


class ReaderProcess(Generic[Item]):
    """Iterate it for the items (of msgspec type `kind`) `produce()` yields in a child process.

    `produce` is called in the child only; it appends its whole-file warnings to `warnings` (the
    child's copy), which come back into this object's `warnings` once the file is read.
    `position()` is called in the child after each batch; `self.position` follows it here.
    """

    def __init__(
        self,
        produce: Callable[[list[str]], Iterator[Item]],
        position: Callable[[], int],
        name: str,
        kind: type[Item],
    ) -> None:
        self.produce = produce
        self.kind = kind
        self.where = position
        self.name = name
        self.position = 0
        self.warnings: list[str] = []

    def __iter__(self) -> Iterator[Item]:
        read_end, write_end = os.pipe()
        _widen(write_end)
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(read_end)
            _child(write_end, self.produce, self.where)
        os.close(write_end)
        running = True
        try:
            # `_Batch[self.kind]`, spelt so that a type checker takes a subscript made at run time.
            batch = types.GenericAlias(_Batch, (self.kind,))
            decode = msgspec.msgpack.Decoder(batch | _Done | _Failed).decode
            with open(read_end, "rb", buffering=1 << 20) as pipe:
                while True:
                    head = pipe.read(_SIZE.size)
                    size = _SIZE.unpack(head)[0] if len(head) == _SIZE.size else 0
                    body = pipe.read(size) if size else b""
                    if not size or len(body) < size:  # the pipe ended: the child is gone
                        running = False
                        raise ReaderDied(self._death(os.waitpid(pid, 0)[1]))
                    message = decode(body)
                    if isinstance(message, _Batch):
                        self.position = message.position
                        yield from message.items
                        continue
                    running = False  # the child's last message: it is leaving
                    os.waitpid(pid, 0)
                    if isinstance(message, _Failed):
                        raise _rebuilt(message)
                    self.warnings = message.warnings
                    return
        finally:
            if running:  # the parent left early (an error, Ctrl-C): the child goes now
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)

    def _death(self, status: int) -> str:
        if os.WIFSIGNALED(status):
            how = f"was killed ({signal.Signals(os.WTERMSIG(status)).name})"
        else:
            how = f"exited with status {os.waitstatus_to_exitcode(status)}"
        return f"the process reading {self.name} {how} before its end; nothing imported"


def _rebuilt(failed: _Failed) -> Exception:
    """The child's error as the parent's reader would have raised it."""
    if failed.kind == "format":
        return FormatError(failed.message)
    if failed.kind == "decode":
        return UnicodeDecodeError(
            failed.encoding, b"", failed.start, failed.start + 1, failed.message
        )
    return ReaderDied(failed.message)


def _child(
    fd: int, produce: Callable[[list[str]], Iterator[Item]], position: Callable[[], int]
) -> None:
    """Read, send, and leave with os._exit: nothing of the parent's (its SQLite connection, its
    buffered output, its atexit handlers) runs here."""
    status = 1
    try:
        encode = msgspec.msgpack.Encoder().encode
        with open(fd, "wb", buffering=1 << 20) as pipe:
            try:
                warnings: list[str] = []
                batch: list[Item] = []
                for item in produce(warnings):
                    batch.append(item)
                    if len(batch) >= BATCH:
                        _send(pipe, encode(_Batch(batch, position())))
                        batch = []
                _send(pipe, encode(_Batch(batch, position())))
                _send(pipe, encode(_Done(warnings)))
                status = 0
            except FormatError as error:
                _send(pipe, encode(_Failed("format", str(error))))
            except UnicodeDecodeError as error:
                _send(pipe, encode(_Failed("decode", error.reason, error.encoding, error.start)))
            except Exception as error:  # one line for the parent; the child's trace is no use
                _send(pipe, encode(_Failed("other", f"reading the file failed: {error!r}")))
    finally:
        os._exit(status)


def _send(pipe: IO[bytes], data: bytes) -> None:
    pipe.write(_SIZE.pack(len(data)))
    pipe.write(data)
    # Each message goes into the pipe at once: held in a buffer of the child's, it would reach
    # the parent only with the next megabyte, and the two processes would take turns.
    pipe.flush()


def _widen(fd: int) -> None:
    """Give the pipe room for several messages (Linux: 64 KiB by default, less than one), so
    the child parses the next batches while the parent writes this one, instead of waiting for
    it to read. Where the kernel refuses (another system, a per-user limit), the default stays."""
    with contextlib.suppress(AttributeError, OSError):
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
