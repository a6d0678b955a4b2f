"""Readable text, title and description from a fetched page (HTML with selectolax, PDF with pypdf).

`Extracted` is what every extractor returns; `content.py` asks the extractors it is given (plugins,
later) before these built-in ones, so a `content_extractor` plugin is one more callable.
"""

import io
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from selectolax.lexbor import LexborHTMLParser

MAX_TEXT = 1_000_000  # characters of text kept (and indexed) per page
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([\w.:-]+)""", re.IGNORECASE)
_BLOCKS = (
    "p, div, br, li, dt, dd, tr, h1, h2, h3, h4, h5, h6, pre, blockquote, section, article, "
    "header, ul, ol, table, figure, figcaption, hr, address, main"
)
_NOISE = (
    "script, style, noscript, template, svg, nav, footer, aside, form, iframe, button, select, "
    "[role=navigation], [role=banner], [role=contentinfo], [aria-hidden=true]"
)


@dataclass
class Page:
    """A fetched page, as extractors see it."""

    url: str
    content_type: str  # without parameters, lower case
    charset: str | None
    body: bytes


@dataclass
class Extracted:
    text: str = ""
    title: str = ""
    description: str = ""
    extractor: str = ""


def kind_of(content_type: str, url: str = "") -> str:
    if content_type in ("text/html", "application/xhtml+xml"):
        return "html"
    if content_type == "application/pdf" or (
        content_type in ("", "application/octet-stream") and url.lower().endswith(".pdf")
    ):
        return "pdf"
    if content_type == "text/plain":
        return "text"
    return "other"


def decode(body: bytes, charset: str | None) -> str:
    """The header's charset, else a <meta charset> near the top, else UTF-8 (replacing errors)."""
    candidates = [charset] if charset else []
    found = _META_CHARSET.search(body[:4096])
    if found:
        candidates.append(found.group(1).decode("ascii", "replace"))
    for name in candidates:
        try:
            return body.decode(name)
        except (LookupError, UnicodeDecodeError):
            continue
    return body.decode("utf-8", "replace")


def _tidy(text: str) -> str:
    lines = (" ".join(line.split()) for line in text.splitlines())
    out, blank = [], False
    for line in lines:
        if line:
            out.append(line)
            blank = False
        elif not blank and out:
            out.append("")
            blank = True
    return "\n".join(out).strip()[:MAX_TEXT]


def html_meta(html: str) -> Extracted:
    """Title and description only (cheap: what `bookmark add` needs)."""
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(html)
    return Extracted(title=_title(tree), description=_description(tree), extractor="html")


def _title(tree: "LexborHTMLParser") -> str:
    node = tree.css_first("title")
    title = node.text(strip=True) if node is not None else ""
    if not title:
        og = tree.css_first('meta[property="og:title"]')
        title = (og.attributes.get("content") or "") if og is not None else ""
    return " ".join(title.split())


def _description(tree: "LexborHTMLParser") -> str:
    for selector in ('meta[name="description"]', 'meta[property="og:description"]'):
        node = tree.css_first(selector)
        if node is not None and (node.attributes.get("content") or "").strip():
            return " ".join((node.attributes.get("content") or "").split())
    return ""


def html_text(page: Page) -> Extracted:
    """The readable text of a page: <main> or the longest <article> when there is one, else the
    body, without scripts, styles, navigation, footers, forms and hidden parts."""
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(decode(page.body, page.charset))
    title, description = _title(tree), _description(tree)
    for node in tree.css(_NOISE):
        node.decompose()
    articles = tree.css("article")
    root = tree.css_first("main") or (
        max(articles, key=lambda n: len(n.text())) if articles else tree.body
    )
    if root is None:
        return Extracted(title=title, description=description, extractor="html")
    for node in root.css(_BLOCKS):
        node.insert_after("\n")
    return Extracted(_tidy(root.text()), title, description, "html")


def pdf_text(page: Page) -> Extracted:
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(page.body))
    parts, size = [], 0
    for pdf_page in reader.pages:
        text = pdf_page.extract_text() or ""
        parts.append(text)
        size += len(text)
        if size > MAX_TEXT:
            break
    title = ""
    if reader.metadata is not None and reader.metadata.title:
        title = " ".join(str(reader.metadata.title).split())
    return Extracted(_tidy("\n\n".join(parts)), title, "", "pdf")


def plain_text(page: Page) -> Extracted:
    return Extracted(_tidy(decode(page.body, page.charset)), extractor="text")


BUILT_IN = {"html": html_text, "pdf": pdf_text, "text": plain_text}
