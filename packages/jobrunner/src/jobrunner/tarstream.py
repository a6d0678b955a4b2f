"""Reading a tar stream by our own code: one block at a time, in bounded memory and linear time.

The standard library's `tarfile` is not used to read uploads (the README's decisions say why: on
the Pythons we support it is the vulnerability). This reader follows the formats' documentation:
v7 and POSIX ustar headers (512-byte blocks, octal or base-256 numbers, a checksum that is the
unsigned or the historic signed byte sum, a name prefix only under the POSIX `ustar\\0` magic),
pax extended headers (`x`, Solaris `X`) and global headers (`g`) of `LEN KEY=VALUE\\n` records,
and GNU long names (`L`). Regular files and directories come out as members; every other entry
is refused, naming it, before any of its data is read.

Memory: one extended header (at most `max_extended` bytes) and what the caller asks `read` for.
Time: every byte is looked at a bounded number of times; records are parsed left to right. All
extended headers together are charged to a `HeaderBudget`, which several archives may share (the
parts of one upload), so the bound on their bytes and parsing work holds for all of them at once.
"""

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

BLOCK = 512
_ZERO = bytes(BLOCK)
_SKIP = 1 << 16  # unread content is skipped in pieces of this size
_POSIX_MAGIC = b"ustar\0"  # GNU's magic is b"ustar  \0", and GNU keeps other fields in the prefix
_REGULAR = (b"0", b"\0")
_DIRECTORY = b"5"
_PAX = (b"x", b"X")
_GLOBAL = b"g"
_LONG_NAME = b"L"
_REFUSED = {
    b"1": "a hard link",
    b"2": "a symbolic link",
    b"3": "a character device",
    b"4": "a block device",
    b"6": "a fifo",
    b"7": "a contiguous file",
    b"S": "a sparse file",
    b"K": "a GNU long link name",
    b"V": "a volume label",
    b"M": "a multi-volume continuation",
    b"N": "an old GNU long-name entry",
}
_UNSIGNED = struct.Struct("148B8x356B")
_SIGNED = struct.Struct("148b8x356b")  # the historic sum of signed chars (old Sun and BSD tars)
_OCTAL = b"01234567"
_MAX_LENGTH_DIGITS = 12  # a record's length cannot need more digits than its header's size
_MAX_SIZE_DIGITS = 30
# Each pax record counts at least this many bytes against the `HeaderBudget`, so that bound
# also bounds the parsing work: 5-byte records cost 13 times the parsing per byte of 64-byte ones.
_RECORD_COST = 64


class Source(Protocol):
    def read(self, size: int, /) -> bytes: ...


class TarError(ValueError):
    """The archive is refused: `reason` says why, `name` names the entry when there is one."""

    def __init__(self, reason: str, name: str | None = None) -> None:
        super().__init__(reason if name is None else f"{name}: {reason}")
        self.reason = reason
        self.name = name


class NotATar(TarError):
    """The stream does not begin with a tar header."""


class Corrupt(TarError):
    """A header or a pax record breaks the format, or the stream ends inside an entry."""


class Refused(TarError):
    """An entry of a kind we never extract: links, devices, fifos, sparse files and the like."""


class TooLarge(TarError):
    """An extended header, or all of them together, beyond their bound."""


class HeaderBudget:
    """What extended headers may still cost, in bytes: each header block 512, each pax record at
    least `_RECORD_COST`. One budget can be shared by several archives read one after another."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def charge(self, cost: int, name: str) -> None:
        self.used += max(cost, 0)
        if self.used > self.limit:
            raise TooLarge(f"extended headers exceed {self.limit} bytes in total", name)


@dataclass(frozen=True)
class Member:
    """A regular file or a directory; names are bytes decoded UTF-8 with surrogateescape."""

    name: str
    is_dir: bool
    size: int
    mode: int


@dataclass(frozen=True)
class _Header:
    name: str
    kind: bytes
    size: int
    mode: int


@dataclass
class _Records:
    """The pax keys we use; every other record is checked and dropped."""

    path: str | None = None
    size: int | None = None
    sparse: bool = False  # any GNU.sparse.* key
    count: int = 0


@dataclass
class _Pending:
    """What the extended headers since the last member said about the next one."""

    pax: _Records | None = None
    long_name: str | None = None
    last: str | None = None  # the last extended header's name, for a chain without a member

    @property
    def open(self) -> bool:
        return self.pax is not None or self.long_name is not None


class TarReader:
    """`members()` yields each member; while it is current, `read` gives its content."""

    def __init__(self, source: Source, *, max_extended: int, headers: HeaderBudget) -> None:
        self._source = source
        self._max_extended = max_extended
        self._headers = headers
        self._left = 0  # content of the current member not read yet
        self._padding = 0
        self._current = ""

    def read(self, size: int) -> bytes:
        """Up to `size` bytes of the current member's content; b"" once it is all read."""
        if self._left == 0:
            return b""
        data = self._source.read(min(size, self._left))
        if not data:
            raise Corrupt("unexpected end of data", self._current)
        self._left -= len(data)
        return data

    def members(self) -> Iterator[Member]:
        pending = _Pending()
        first = True
        while True:
            self._skip_rest()
            block = self._read_exactly(BLOCK)
            if block == _ZERO or not block:
                self._end(block, first, pending)
                return
            if len(block) < BLOCK:
                raise (NotATar if first else Corrupt)("truncated header")
            header = _parse_header(block, first)
            first = False
            if header.kind in _PAX:
                self._pax(header, pending)
            elif header.kind == _GLOBAL:
                self._global(header)
            elif header.kind == _LONG_NAME:
                self._long_name(header, pending)
            else:
                member = _member(header, pending)
                pending = _Pending()
                if not member.is_dir:
                    self._current = member.name
                    self._left = member.size
                    self._padding = -member.size % BLOCK
                yield member

    # --- extended headers ------------------------------------------------------------------------

    def _pax(self, header: _Header, pending: _Pending) -> None:
        if pending.pax is not None:
            raise Corrupt("two pax extended headers before one member", header.name)
        pending.pax = self._records(header)
        pending.last = header.name

    def _global(self, header: _Header) -> None:
        # Global records (`git archive` writes a comment with the commit) change nothing we keep.
        if self._records(header).sparse:
            raise Refused("a sparse file is not allowed", header.name)

    def _records(self, header: _Header) -> _Records:
        data = self._extended(header)
        records = _parse_pax(data, header.name)
        self._headers.charge(_RECORD_COST * records.count - len(data), header.name)
        return records

    def _long_name(self, header: _Header, pending: _Pending) -> None:
        if pending.long_name is not None:
            raise Corrupt("two GNU long-name headers before one member", header.name)
        pending.long_name = _text(self._extended(header).split(b"\0", 1)[0])
        pending.last = header.name

    def _extended(self, header: _Header) -> bytes:
        """An extended header's payload, within both bounds, before any of it is read."""
        if header.size > self._max_extended:
            raise TooLarge(
                f"an extended (pax or long-name) header of {header.size} bytes exceeds "
                f"{self._max_extended // 1024} KiB",
                header.name,
            )
        self._headers.charge(BLOCK + header.size, header.name)
        data = self._read_exactly(header.size)
        if len(data) < header.size:
            raise Corrupt("unexpected end of data", header.name)
        self._read_exactly(-header.size % BLOCK)
        return data

    # --- the stream ------------------------------------------------------------------------------

    def _end(self, block: bytes, first: bool, pending: _Pending) -> None:
        """At a zero block or the end of the stream: the archive must end here."""
        if not block and first:
            raise NotATar("empty file")
        if block:  # one zero block: the next is the second one, or the stream ends (tarfile's)
            after = self._read_exactly(BLOCK)
            if after.count(0) != len(after):
                raise Corrupt("a lone zero block in the middle of the archive")
        if pending.open:
            raise Corrupt("an extended header with no member after it", pending.last)

    def _skip_rest(self) -> None:
        """Past what the caller left of the current member, and its padding."""
        while self._left:
            self.read(_SKIP)
        # A stream that ends inside the last member's padding is tolerated (tarfile does).
        self._read_exactly(self._padding)
        self._padding = 0

    def _read_exactly(self, size: int) -> bytes:
        """`size` bytes, or fewer only where the stream ends."""
        data = self._source.read(size) if size else b""
        if len(data) < size and data:
            parts = [data]
            got = len(data)
            while got < size and (more := self._source.read(size - got)):
                parts.append(more)
                got += len(more)
            data = b"".join(parts)
        return data


def _member(header: _Header, pending: _Pending) -> Member:
    pax = pending.pax or _Records()
    if pax.path is not None:
        name = pax.path
    elif pending.long_name is not None:
        name = pending.long_name
    else:
        name = header.name
    kind = header.kind
    if kind == b"\0" and name.endswith("/"):
        kind = _DIRECTORY  # v7 wrote directories as regular files whose name ends in '/'
    if pax.sparse:  # GNU.sparse.* pax keys: the data is a map, not the file
        raise Refused("a sparse file is not allowed", name)
    if kind in _REFUSED:
        raise Refused(f"{_REFUSED[kind]} is not allowed", name)
    if kind == _DIRECTORY:  # no data follows a directory, whatever its size says
        return Member(name.rstrip("/"), True, 0, header.mode)
    if kind not in _REGULAR:
        raise Refused(f"entry type {kind!r} is not allowed", name)
    size = header.size if pax.size is None else pax.size
    return Member(name, False, size, header.mode)


def _parse_header(block: bytes, first: bool) -> _Header:
    error = NotATar if first else Corrupt
    stored = _number(block[148:156])
    if stored is None:
        raise error("invalid header")
    if stored not in (256 + sum(_UNSIGNED.unpack(block)), 256 + sum(_SIGNED.unpack(block))):
        raise error("bad checksum")
    name = block[0:100].split(b"\0", 1)[0]
    prefix = block[345:500].split(b"\0", 1)[0]
    if prefix and block[257:263] == _POSIX_MAGIC:
        name = prefix + b"/" + name
    text = _text(name)
    size = _number(block[124:136])
    if size is None or size < 0:
        raise Corrupt("invalid size field", text)
    mode = _number(block[100:108])
    if mode is None:
        raise Corrupt("invalid mode field", text)
    return _Header(text, block[156:157], size, mode)


def _number(field: bytes) -> int | None:
    """An octal field (NUL- or space-terminated, maybe space-padded) or a GNU base-256 one."""
    if field[0] == 0x80:  # base-256, positive
        return int.from_bytes(field[1:], "big")
    if field[0] == 0xFF:  # base-256, negative (two's complement)
        return int.from_bytes(field[1:], "big") - (1 << (8 * (len(field) - 1)))
    digits = field.split(b"\0", 1)[0].strip(b" ")
    if digits.translate(None, _OCTAL):
        return None
    return int(digits, 8) if digits else 0


def _parse_pax(data: bytes, name: str) -> _Records:
    """Pax records read left to right, each `LEN KEY=VALUE\\n`; a malformed one is Corrupt.

    An empty value removes the key (POSIX), so it counts as absent."""
    records = _Records()
    end = len(data)
    pos = 0
    while pos < end:
        if data[pos] == 0:  # NUL padding after the last record (some writers leave it)
            if data.count(0, pos) != end - pos:
                raise Corrupt(f"malformed pax record at byte {pos}", name)
            break
        space = data.find(b" ", pos, pos + _MAX_LENGTH_DIGITS + 1)
        digits = data[pos:space] if space > pos else b""
        if not digits.isdigit():
            raise Corrupt(f"malformed pax record at byte {pos}", name)
        stop = pos + int(digits)  # the length counts itself, the space and the newline
        if not space + 4 <= stop <= end or data[stop - 1] != 0x0A:  # at least "k=\n"
            raise Corrupt(f"malformed pax record at byte {pos}", name)
        equals = data.find(b"=", space + 1, stop - 1)
        if equals <= space + 1:  # no '=', or no key before it
            raise Corrupt(f"malformed pax record at byte {pos}", name)
        key = data[space + 1 : equals]
        if key == b"path":
            records.path = _text(data[equals + 1 : stop - 1]) or None
        elif key == b"size":
            records.size = _pax_size(data[equals + 1 : stop - 1], name)
        elif key.startswith(b"GNU.sparse."):
            records.sparse = True
        records.count += 1
        pos = stop
    return records


def _pax_size(value: bytes, name: str) -> int | None:
    if not value:
        return None
    if not value.isdigit() or len(value) > _MAX_SIZE_DIGITS:
        raise Corrupt("invalid pax size", name)
    return int(value)


def _text(raw: bytes) -> str:
    # pax values are UTF-8; ustar names are bytes: either way undecodable bytes stay as
    # surrogates, so the caller can refuse a name that is not UTF-8 and show it.
    return raw.decode("utf-8", "surrogateescape")
