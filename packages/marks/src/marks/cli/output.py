"""Rendering results for people (table, plain) and for programs (json, csv, urls).

JSON output is only JSON (messages go to stderr; an empty result is `[]`).
"""

import csv
import datetime as dt
import shutil
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import click
import msgspec

from marks import clock
from marks.wire import Bookmark, SearchHit

_json = msgspec.json.Encoder()


def emit_json(value: Any) -> None:
    sys.stdout.write(_json.encode(value).decode() + "\n")


def emit_json_chunks(chunks: Iterable[bytes]) -> None:
    """One JSON document written as it is encoded (each chunk whole UTF-8)."""
    for chunk in chunks:
        sys.stdout.write(chunk.decode())
    sys.stdout.write("\n")


def _fit(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def table(rows: Sequence[Sequence[object]], headers: Sequence[str]) -> None:
    """Columns as wide as they need, the last ones shortened to fit the terminal."""
    if not rows:
        return
    width = shutil.get_terminal_size((120, 20)).columns
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]
    for index in range(len(widths) - 1, 0, -1):
        overflow = sum(widths) + 2 * (len(widths) - 1) - width
        if overflow <= 0:
            break
        widths[index] = max(8, widths[index] - overflow)
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    click.echo(
        line.format(*(_fit(str(h), w) for h, w in zip(headers, widths, strict=True))).rstrip()
    )
    for row in rows:
        click.echo(
            line.format(*(_fit(str(c), w) for c, w in zip(row, widths, strict=True))).rstrip()
        )


CSV_FIELDS = ("id", *Bookmark.__struct_fields__[1:])  # the id first, then every field


def _csv(hits: Sequence[SearchHit], first: tuple[str, Sequence[str]] | None) -> None:
    """Bookmarks as CSV with their ids (the export format has none: it is for other tools)."""
    scored = any(hit.snippet is not None or hit.score is not None for hit in hits)
    headers = [
        *([first[0]] if first else []),
        *CSV_FIELDS,
        *(["score", "snippet"] if scored else []),
    ]
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(headers)
    for number, hit in enumerate(hits):
        fields = msgspec.to_builtins(hit.bookmark)
        row = [
            ",".join(value) if isinstance(value, list) else "" if value is None else value
            for value in (fields[name] for name in CSV_FIELDS)
        ]
        if first:
            row.insert(0, first[1][number])
        if scored:
            row += ["" if hit.score is None else hit.score, hit.snippet or ""]
        writer.writerow(row)


def bookmarks(
    items: Iterable[Bookmark | SearchHit],
    fmt: str,
    first: tuple[str, Sequence[str]] | None = None,
) -> None:
    """Bookmarks in any output format; `first` is an extra leading CSV column (name, values)."""
    hits = [item if isinstance(item, SearchHit) else SearchHit(item) for item in items]
    marks = [hit.bookmark for hit in hits]
    if fmt == "json":
        if any(hit.snippet is not None or hit.score is not None for hit in hits):
            emit_json(
                [
                    {
                        **msgspec.to_builtins(hit.bookmark),
                        "score": hit.score,
                        "snippet": hit.snippet,
                    }
                    for hit in hits
                ]
            )
        else:
            emit_json(marks)
    elif fmt == "csv":
        _csv(hits, first)
    elif fmt == "urls":
        for bookmark in marks:
            click.echo(bookmark.url)
    elif fmt == "plain":
        for bookmark in marks:
            click.echo(f"{bookmark.id}\t{bookmark.url}\t{bookmark.title}")
    else:
        rows = []
        for hit in hits:
            b = hit.bookmark
            title = ("★ " if b.starred else "") + (b.title or "")
            if hit.snippet and hit.snippet.replace("[", "").replace("]", "") != b.title:
                title += f" — {hit.snippet}"
            rows.append((str(b.id), title, b.url, ", ".join(b.tags)))
        table(rows, ("ID", "TITLE", "URL", "TAGS"))


def bookmark_detail(bookmark: Bookmark, fmt: str) -> None:
    if fmt in ("table", "plain"):
        fields = msgspec.to_builtins(bookmark)
        for name, value in fields.items():
            if isinstance(value, list):
                value = ", ".join(value)
            click.echo(f"{name:>13}: {'' if value is None else value}")
        if bookmark.archived_url and bookmark.archived_at:
            click.echo(f"{'status':>13}: dead; archived copy from {bookmark.archived_at:%Y-%m-%d}")
    else:
        bookmarks([bookmark], fmt)


def records(rows: Sequence[dict[str, Any]], fmt: str) -> None:
    """Generic rows (tags, stats): a table for people, JSON or CSV for programs."""
    if fmt == "json":
        emit_json(list(rows))
        return
    if not rows:
        return
    headers = list(rows[0])
    if fmt == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(headers)
        writer.writerows([[row[h] for h in headers] for row in rows])
    elif fmt in ("plain", "urls"):
        for row in rows:
            click.echo("\t".join(str(row[h]) for h in headers))
    else:
        table([[row[h] for h in headers] for row in rows], [h.upper() for h in headers])


def when(moment: dt.datetime | None) -> str:
    return clock.to_text(moment) or ""
