"""Rendering results for people (table, plain) and for programs (json, csv, urls).

JSON output is only JSON (messages go to stderr; an empty result is `[]`). Every other format
shows a bookmark's text with its control characters escaped (`marks.printable`): always in table,
plain and urls; in CSV when it goes to a terminal (a file or a pipe gets the data exactly, as GNU
`ls` shows names). Tables fit the terminal; piped, nothing is cut.
"""

import datetime as dt
import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO, cast

import click
import msgspec

from marks import clock
from marks.printable import Escaping, escape
from marks.wire import Bookmark, SearchHit

_json = msgspec.json.Encoder()


def emit_json(value: Any) -> None:
    sys.stdout.write(_json.encode(value).decode() + "\n")


def emit_json_chunks(chunks: Iterable[bytes]) -> None:
    """One JSON document written as it is encoded (each chunk whole UTF-8)."""
    for chunk in chunks:
        sys.stdout.write(chunk.decode())
    sys.stdout.write("\n")


def _cell(text: str) -> str:
    """A table cell: one line (line breaks and tabs become spaces), controls escaped."""
    return escape(" ".join(text.split()))


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def terminal_width() -> int | None:
    """The columns a table may fill: the terminal's, or none when stdout is not a terminal
    (a pipe or a file gets whole lines, as `gh` and `kubectl get` give them)."""
    if not sys.stdout.isatty():
        return None
    import shutil  # with bz2 and lzma: 3 ms of every command's start-up otherwise

    return shutil.get_terminal_size((120, 20)).columns


TABLE_BLOCK = 1000  # lines of a table written at once


def table(rows: Sequence[Sequence[object]], headers: Sequence[str]) -> None:
    """Columns as wide as they need; on a terminal, the last ones shortened to fit it."""
    if not rows:
        return
    texts = [[_cell(str(c)) for c in row] for row in rows]
    width = terminal_width()
    widths = [max(len(str(h)), *(len(r[i]) for r in texts)) for i, h in enumerate(headers)]
    for index in range(len(widths) - 1, 0, -1):
        overflow = sum(widths) + 2 * (len(widths) - 1) - (width or 0)
        if width is None or overflow <= 0:
            break
        widths[index] = max(8, widths[index] - overflow)
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [line.format(*(_fit(str(h), w) for h, w in zip(headers, widths, strict=True)))]
    lines += (line.format(*(_fit(c, w) for c, w in zip(row, widths, strict=True))) for row in texts)
    # Written a block at a time: each `click.echo` looks up its stream and flushes it (a write
    # of its own), over 10,000 instructions a line.
    for start in range(0, len(lines), TABLE_BLOCK):
        click.echo("\n".join(text.rstrip() for text in lines[start : start + TABLE_BLOCK]))


def text_out() -> TextIO:
    """Where a file format (CSV, Markdown, HTML) goes: stdout, through `printable.Escaping` when
    that is a terminal (shown there, never obeyed; a pipe or a file gets the data exactly)."""
    return cast(TextIO, Escaping(sys.stdout)) if sys.stdout.isatty() else sys.stdout


def _csv(hits: Sequence[SearchHit], first: tuple[str, Sequence[str]] | None) -> None:
    """Bookmarks in marks' one CSV format (`marks.formats.csvfile`, as `export csv` writes it),
    with a leading column (`first`) and the search's score and snippet when there are any."""
    from marks.formats import csvfile

    scored = any(hit.snippet is not None or hit.score is not None for hit in hits)
    headers = [
        *([first[0]] if first else []),
        *csvfile.COLUMNS,
        *(["score", "snippet"] if scored else []),
    ]
    writer = csvfile.Writer(text_out())
    writer.writerow(headers)
    for number, hit in enumerate(hits):
        row = csvfile.cells(hit.bookmark)
        if first:
            row.insert(0, first[1][number])
        if scored:
            row += ["" if hit.score is None else hit.score, csvfile.guard(hit.snippet or "")]
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
            click.echo(escape(bookmark.url))
    elif fmt == "plain":
        for bookmark in marks:
            click.echo(f"{bookmark.id}\t{escape(bookmark.url)}\t{escape(bookmark.title)}")
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
            shown = escape("" if value is None else str(value), keep="\n")
            click.echo(f"{name:>13}: {shown}")
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
        from marks.formats.csvfile import Writer, guard

        writer = Writer(text_out())
        writer.writerow(headers)
        for row in rows:
            writer.writerow([guard(v) if isinstance(v, str) else v for v in row.values()])
    elif fmt in ("plain", "urls"):
        for row in rows:
            click.echo("\t".join(escape(str(row[h])) for h in headers))
    else:
        table([[row[h] for h in headers] for row in rows], [h.upper() for h in headers])


def when(moment: dt.datetime | None) -> str:
    return clock.to_text(moment) or ""
