"""Tar bytes written by hand, block by block: the hostile archives of the upload attacks, and
headers the standard library would not write (signed checksums, base-256 sizes, v7).

Every builder returns a gzip-compressed archive (what /submit unpacks) unless it says otherwise.
"""

import zlib

BLOCK = 512
MAIN = b"print(1)\n"
POSIX = b"ustar\x0000"
GNU = b"ustar  \x00"


def header(
    name: bytes,
    size: int = 0,
    kind: bytes = b"0",
    *,
    mode: int = 0o644,
    magic: bytes = POSIX,
    prefix: bytes = b"",
    size_field: bytes | None = None,
    signed_checksum: bool = False,
    extra: dict[int, bytes] | None = None,
) -> bytes:
    """One 512-byte header block with a correct checksum (unsigned, or the historic signed sum)."""
    block = bytearray(BLOCK)
    block[0 : len(name)] = name
    block[100:108] = b"%07o\x00" % mode
    block[108:116] = b"%07o\x00" % 0
    block[116:124] = b"%07o\x00" % 0
    block[124:136] = size_field if size_field is not None else b"%011o\x00" % size
    block[136:148] = b"%011o\x00" % 0
    block[156:157] = kind
    block[257:265] = magic
    block[345 : 345 + len(prefix)] = prefix
    for offset, data in (extra or {}).items():
        block[offset : offset + len(data)] = data
    block[148:156] = b" " * 8
    if signed_checksum:
        total = sum(byte - 256 if byte > 127 else byte for byte in block)
    else:
        total = sum(block)
    block[148:156] = b"%06o\x00 " % total
    return bytes(block)


def padded(data: bytes) -> bytes:
    return data + bytes(-len(data) % BLOCK)


def entry(name: bytes, data: bytes, kind: bytes = b"0", **fields) -> bytes:
    return header(name, len(data), kind, **fields) + padded(data)  # type: ignore[arg-type]


def record(key: bytes, value: bytes) -> bytes:
    """One pax record, `LEN KEY=VALUE\\n`, LEN counting itself."""
    body = b" " + key + b"=" + value + b"\n"
    length = len(body) + 1
    while len(str(length)) + len(body) != length:
        length += 1
    return str(length).encode() + body


def end() -> bytes:
    return bytes(2 * BLOCK)


def gz(*parts: bytes, level: int = 9) -> bytes:
    compressor = zlib.compressobj(level, zlib.DEFLATED, 31)
    return b"".join(compressor.compress(part) for part in parts) + compressor.flush()


def main_py() -> bytes:
    return entry(b"main.py", MAIN)


# --- the attacks (/tmp/attack in the report), one builder each ----------------------------------


def pax_of_digits(headers: int = 10, digits: int = 64000) -> bytes:
    """CVE-2024-6232: pax headers of nothing but digits; tarfile's regex over them is quadratic
    and holds the GIL (5 headers froze a server for about 40 s)."""
    hostile = b"".join(
        entry(b"pax", b"1" * digits, b"x") + header(b"f%d" % i) for i in range(headers)
    )
    return gz(main_py(), hostile, end())


def pax_sharing_one_equals(kind: bytes = b"g", headers: int = 3) -> bytes:
    """Records `4 xA` ... ending in one `=`: tarfile makes ~16,000 keys of ~32 KB per header."""
    hostile = b"".join(
        entry(b"g", b"4 x%c" % (65 + i) * 15990 + b"=\n", kind) + header(b"f%d" % i)
        for i in range(headers)
    )
    return gz(main_py(), hostile, end())


def gnu_sparse_map(pairs: int = 1_000_000) -> bytes:
    """A GNU sparse 1.0 member: its data starts with a map tarfile reads into a list."""
    keys = b"".join(
        record(key, value)
        for key, value in (
            (b"GNU.sparse.major", b"1"),
            (b"GNU.sparse.minor", b"0"),
            (b"GNU.sparse.name", b"sp"),
            (b"GNU.sparse.realsize", b"10"),
        )
    )
    compressor = zlib.compressobj(1, zlib.DEFLATED, 31)
    head = main_py() + entry(b"PaxHeaders/sp", keys, b"x") + header(b"sp", 10**8)
    parts = [compressor.compress(head + b"%d\n" % pairs)]
    line = b"1234567\n" * 65536
    parts += [compressor.compress(line) for _ in range(pairs * 2 // 65536 + 1)]
    return b"".join(parts) + compressor.flush()


def gnu_sparse_bad_map() -> bytes:
    """GNU sparse 0.1 keys whose map ends in an empty number: tarfile raised ValueError (500)."""
    keys = record(b"GNU.sparse.map", b"0,1," * 10000) + record(b"GNU.sparse.size", b"10")
    return gz(main_py(), entry(b"PaxHeaders/p", keys, b"x"), entry(b"p", b"x"), end())


def _old_sparse_header(extended: bool) -> bytes:
    return header(b"sp", 0, b"S", magic=GNU, extra={482: b"\x01" if extended else b"\x00"})


def old_sparse(blocks: int = 80000) -> bytes:
    """An old-style GNU sparse ('S') member with a long chain of extension blocks (tarfile
    built a list of them all before the member could be refused)."""
    extension = bytearray(BLOCK)
    for i in range(21):
        extension[i * 24 : i * 24 + 24] = b"00000000001\x00" * 2
    last = bytes(extension)
    extension[504] = 1  # another extension block follows
    chain = bytes(extension) * (blocks - 1) + last
    return gz(main_py(), _old_sparse_header(True), chain, end(), level=1)


def old_sparse_truncated() -> bytes:
    """An 'S' member first, announcing an extension block that never comes: IndexError (500)."""
    return gz(_old_sparse_header(True))


def chained(kind: bytes = b"x", count: int = 1500) -> bytes:
    """`count` extended headers in a row: tarfile recursed once per header (RecursionError)."""
    payload = b"11 a=bcdef\n" if kind == b"x" else b"name\x00"
    chain = entry(b"h", payload, kind) * count
    return gz(main_py(), chain, header(b"x"), end())


SHORTEST_RECORD = b"5 a=\n"  # the shortest valid pax record: the most records per byte to parse


def global_record_flood(headers: int = 23) -> bytes:
    """An archive of nothing but pax global headers, each 64 KiB of `5 a=\\n` records (13,107 to
    parse per header), and no member. Each header is charged about 839 KB against the extended
    headers' total of one archive (20.5 MB with the default 10,000 entries), so 23 of them pass:
    the work is parsing, and an upload of many such parts repeats it once per part."""
    flood = entry(b"g", SHORTEST_RECORD * (64 * 1024 // len(SHORTEST_RECORD)), b"g")
    return gz(flood * headers, end())


ATTACKS = {
    "pax-digits-cve-2024-6232": pax_of_digits,
    "pax-shared-equals-global": lambda: pax_sharing_one_equals(b"g"),
    "pax-shared-equals-extended": lambda: pax_sharing_one_equals(b"x"),
    "gnu-sparse-1.0-map": gnu_sparse_map,
    "gnu-sparse-bad-map": gnu_sparse_bad_map,
    "old-sparse-extension-blocks": old_sparse,
    "old-sparse-truncated": old_sparse_truncated,
    "pax-chain": lambda: chained(b"x"),
    "long-name-chain": lambda: chained(b"L"),
}
# What each answers in `details` now.
DETAILS = {
    "pax-digits-cve-2024-6232": "pax: malformed pax record at byte 0",
    "pax-shared-equals-global": "g: malformed pax record at byte 0",
    "pax-shared-equals-extended": "g: malformed pax record at byte 0",
    "gnu-sparse-1.0-map": "sp: a sparse file is not allowed",
    "gnu-sparse-bad-map": "p: a sparse file is not allowed",
    "old-sparse-extension-blocks": "sp: a sparse file is not allowed",
    "old-sparse-truncated": "sp: a sparse file is not allowed",
    "pax-chain": "h: two pax extended headers before one member",
    "long-name-chain": "h: two GNU long-name headers before one member",
}
