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
# lexbor has no depth limit and its tree building slows with the depth of open elements, so
# thousands of nested tags cost quadratic time (measured: 40,000 nested <div>s, 200 KB, took 25 s
# to parse; a 20 MB page of them would never finish). Past MAX_DEPTH, as Chromium's parser caps
# its tree at 512, further start tags are written `&lt;`: text, never markup (in an attribute
# value `&lt;` is `<` again, in raw text it stays text), so the cut can add nothing that runs.
MAX_DEPTH = 512
# Every `<name`, also in scripts, comments and attribute values: a scanner that skipped those
# could be told where they start (`<p title="<script">`) and skip a whole hostile page. Tags in
# script strings come in pairs (`"<div>" + x + "</div>"`), so they rarely move the count.
_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9:-]*)")
# Tags that never stay open (void) or close themselves when a sibling starts: no depth.
_FLAT = frozenset(
    [
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "source",
        "track",
        "wbr",
        "param",
        "keygen",
        "frame",
        "basefont",
        "bgsound",
        "p",
        "li",
        "dt",
        "dd",
        "tr",
        "td",
        "th",
        "option",
        "optgroup",
        "rb",
        "rt",
        "rtc",
        "rp",
        "thead",
        "tbody",
        "tfoot",
        "colgroup",
        "caption",
        "html",
        "head",
        "body",
    ]
)
_NOISE = (
    "script, style, noscript, template, svg, nav, footer, aside, form, iframe, button, select, "
    "[role=navigation], [role=banner], [role=contentinfo], [aria-hidden=true]"
)


def shallow(html: str, limit: int = MAX_DEPTH) -> str:
    """`html` with start tags past `limit` open elements made text (see MAX_DEPTH); one pass."""
    if html.count("<") <= limit:
        return html
    depth = 0

    def visit(match: "re.Match[str]") -> str:
        nonlocal depth
        if match.group(2).lower() in _FLAT:
            return match.group(0)
        if match.group(1):
            depth = max(0, depth - 1)
        elif depth >= limit:
            return "&lt;" + match.group(0)[1:]
        else:
            depth += 1
        return match.group(0)

    return _TAG.sub(visit, html)


def parse(html: str) -> "LexborHTMLParser":
    """A page's tree, its nesting bounded (see MAX_DEPTH): every parse of a fetched page."""
    from selectolax.lexbor import LexborHTMLParser

    return LexborHTMLParser(shallow(html))


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
    tree = parse(html)
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
    tree = parse(decode(page.body, page.charset))
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
