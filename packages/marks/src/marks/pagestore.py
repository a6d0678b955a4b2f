"""Kept page bodies (service layer): each body once, compressed, keyed by the SHA-256 of its bytes.

Snapshots and page content both keep pages here (`snapshot_blobs`, schema 9), so the same page
kept twice costs one row. Living in the database file, the bodies share its transactions (a
snapshot and its body commit together or not at all), its backups and its integrity check.
zlib, not zstd: zlib is in the standard library and content's originals were zlib already.
"""

import hashlib
import zlib

from marks.store import Store

LEVEL = 6  # zlib's default: most of level 9's ratio on HTML at a fraction of its time


def key(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def put(store: Store, data: bytes) -> str:
    """Keep `data` (once) and answer its key."""
    digest = key(data)
    if store.value("SELECT 1 FROM snapshot_blobs WHERE sha256 = ?", (digest,)) is None:
        store.execute(
            "INSERT INTO snapshot_blobs (sha256, size, data) VALUES (?, ?, ?)",
            (digest, len(data), zlib.compress(data, LEVEL)),
        )
    return digest


def get(store: Store, digest: str) -> bytes | None:
    data = store.value("SELECT data FROM snapshot_blobs WHERE sha256 = ?", (digest,))
    return None if data is None else zlib.decompress(data)


def collect(store: Store, digests: "list[str] | None" = None) -> int:
    """Remove blobs nothing refers to any more (among `digests`, or all); answer how many."""
    unused = (
        "NOT EXISTS (SELECT 1 FROM snapshots s WHERE s.blob = snapshot_blobs.sha256) "
        "AND NOT EXISTS (SELECT 1 FROM page_content c WHERE c.blob = snapshot_blobs.sha256) "
        # A deleted bookmark's snapshots and page wait in the trash (schema 10): their bodies
        # stay until the trash forgets them, or a restore would bring back rows without pages.
        "AND sha256 NOT IN (SELECT r.row ->> '$.blob' FROM trash_rows r "
        "WHERE r.tbl IN ('snapshots', 'page_content'))"
    )
    if digests is None:
        return len(
            store.execute(f"DELETE FROM snapshot_blobs WHERE {unused} RETURNING 1").fetchall()
        )
    removed = 0
    for digest in set(digests):
        removed += len(
            store.execute(
                f"DELETE FROM snapshot_blobs WHERE sha256 = ? AND {unused} RETURNING 1", (digest,)
            ).fetchall()
        )
    return removed


def check(store: Store) -> list[str]:
    """Problems: blobs whose bytes no longer match their key, references to missing blobs."""
    problems = []
    for digest, size, data in store.execute("SELECT sha256, size, data FROM snapshot_blobs"):
        try:
            body = zlib.decompress(data)
        except zlib.error as error:
            problems.append(f"blob {digest}: cannot be decompressed ({error})")
            continue
        if key(body) != digest or len(body) != size:
            problems.append(f"blob {digest}: its bytes do not match its key")
    for table, column in (("snapshots", "id"), ("page_content", "bookmark_id")):
        for (row,) in store.execute(
            f"SELECT {column} FROM {table} t WHERE t.blob IS NOT NULL AND NOT EXISTS "
            "(SELECT 1 FROM snapshot_blobs b WHERE b.sha256 = t.blob)"
        ):
            problems.append(f"{table} {row}: its page is missing from snapshot_blobs")
    return problems
