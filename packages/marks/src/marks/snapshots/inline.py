"""One self-contained page: every stylesheet, image, font and frame a page needs, inlined.

Stylesheets (`<link rel=stylesheet>`, `@import`, recursively) become `<style>` elements; `url()`
in CSS (fonts, backgrounds), `<img src/srcset>`, `<picture><source srcset>`, posters and SVG
images become `data:` URIs; iframes become `srcdoc` snapshots themselves, `IFRAME_DEPTH` deep
(deeper ones are removed). Everything goes through the caller's `fetch`, which applies marks' web
rules. What does not fit in `budget` bytes, or cannot be fetched, is left out -- its URL removed,
so opening the snapshot never reaches the network -- and listed in `omitted` with the reason.
A `srcset` keeps one candidate: the one `src` names, else its first (the same picture again at
other sizes would multiply the page for nothing).
"""

import asyncio
import base64
import mimetypes
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import urldefrag, urljoin

from selectolax.lexbor import LexborHTMLParser, LexborNode

from marks import extract
from marks.content import Fetched
from marks.snapshots import sanitise

IFRAME_DEPTH = 2  # a page's frames, and their frames; deeper ones are removed
IMPORT_DEPTH = 5
Fetch = Callable[[str, int], Awaitable[Fetched]]

_CSS_URL = re.compile(r"""url\(\s*(?:"([^"]*)"|'([^']*)'|([^)'"\s]*))\s*\)""", re.IGNORECASE)
_IMPORT = re.compile(
    r"""@import\s+(?:url\(\s*["']?([^"')\s]+)["']?\s*\)|["']([^"']+)["'])\s*([^;]*);""",
    re.IGNORECASE,
)
_CHARSET = re.compile(r"@charset\s+[^;]*;", re.IGNORECASE)
IMAGE_SOURCES = "img[src], input[src], video[poster], image[href], image[xlink\\:href]"


@dataclass
class Omitted:
    url: str
    reason: str


@dataclass
class Inliner:
    fetch: Fetch
    budget: int  # bytes the whole page may take, inlined resources included
    used: int = 0
    omitted: list[Omitted] = field(default_factory=list)
    _cache: dict[str, "asyncio.Future[str | None]"] = field(default_factory=dict)

    # --- resources -------------------------------------------------------------------------------

    async def _get(self, url: str) -> Fetched | None:
        if self.used >= self.budget:
            self.omitted.append(Omitted(url, f"over the {self._cap()} cap"))
            return None
        fetched = await self.fetch(url, self.budget - self.used)
        if fetched.too_large:
            self.omitted.append(Omitted(url, f"over the {self._cap()} cap"))
            return None
        if fetched.error or fetched.not_modified:
            self.omitted.append(Omitted(url, fetched.error or "no body"))
            return None
        return fetched

    def _cap(self) -> str:
        return f"{self.budget / 1048576:g} MB"

    def _take(self, url: str, size: int) -> bool:
        """Reserve `size` bytes of the budget for `url`, or list it as left out."""
        if self.used + size > self.budget:
            self.omitted.append(Omitted(url, f"over the {self._cap()} cap"))
            return False
        self.used += size
        return True

    async def data_uri(self, url: str) -> str | None:
        """`url` as a data: URI, fetched once per page however often it is used."""
        if url.startswith("data:"):
            return url
        if url not in self._cache:
            self._cache[url] = asyncio.ensure_future(self._data_uri(url))
        return await self._cache[url]

    async def _data_uri(self, url: str) -> str | None:
        fetched = await self._get(url)
        if fetched is None:
            return None
        kind = fetched.content_type or mimetypes.guess_type(url)[0] or "application/octet-stream"
        uri = f"data:{kind};base64,{base64.b64encode(fetched.body).decode('ascii')}"
        return uri if self._take(url, len(uri)) else None

    # --- CSS -------------------------------------------------------------------------------------

    async def css(self, text: str, base: str, depth: int = 0) -> str:
        """CSS with its imports and `url()`s inlined (failed ones become empty URLs)."""
        text = _CHARSET.sub("", text)
        imports = {m.group(0): m for m in _IMPORT.finditer(text)}
        for statement, match in imports.items():
            target = urljoin(base, match.group(1) or match.group(2) or "")
            media = match.group(3).strip()
            sheet = await self._stylesheet(target, depth + 1) if depth < IMPORT_DEPTH else None
            if sheet is None and depth >= IMPORT_DEPTH:
                self.omitted.append(Omitted(target, f"@import nested over {IMPORT_DEPTH} deep"))
            replacement = (
                "" if sheet is None else (f"@media {media} {{{sheet}}}" if media else sheet)
            )
            text = text.replace(statement, replacement, 1)
        found = {m.group(0): m for m in _CSS_URL.finditer(text)}
        targets = {}
        for whole, match in found.items():
            raw = (match.group(1) or match.group(2) or match.group(3) or "").strip()
            if not raw or raw.startswith(("#", "data:")):
                continue
            targets[whole] = urljoin(base, raw)
        uris = await asyncio.gather(*(self.data_uri(url) for url in targets.values()))
        for (whole, _url), uri in zip(targets.items(), uris, strict=True):
            text = text.replace(whole, f'url("{uri or "data:,"}")')
        return sanitise.safe_css(text)

    async def _stylesheet(self, url: str, depth: int) -> str | None:
        fetched = await self._get(url)
        if fetched is None:
            return None
        if not self._take(url, len(fetched.body)):
            return None
        body = fetched.body.decode(fetched.charset or "utf-8", errors="replace")
        return await self.css(body, fetched.final_url or url, depth)

    # --- HTML ------------------------------------------------------------------------------------

    async def page(self, html: str, url: str, depth: int = 0) -> str:
        """`html` (found at `url`) inlined and sanitised."""
        tree = extract.parse(html)
        base_node = tree.css_first("base[href]")
        base = urljoin(url, base_node.attributes.get("href") or "") if base_node else url
        await asyncio.gather(
            *(self._link(node, base) for node in tree.css("link[href]")),
            *(self._style_element(node, base) for node in tree.css("style")),
            *(self._style_attribute(node, base) for node in tree.css("[style]")),
            *(self._image(node, base) for node in tree.css(IMAGE_SOURCES)),
            *(self._srcset(node, base) for node in tree.css("img[srcset], source[srcset]")),
            *(self._media_source(node, base) for node in tree.css("source[src]")),
            *(self._frame(node, base, depth) for node in tree.css("iframe")),
        )
        for node in tree.css("a[href], area[href], form[action]"):
            name = "action" if node.tag == "form" else "href"
            value = node.attributes.get(name)
            if (
                value is not None
                and not value.startswith("#")
                and not sanitise.is_script_url(value)
            ):
                node.attrs[name] = urljoin(base, value)
        sanitise.clean_tree(tree)
        head = tree.head
        for node in tree.css("meta[charset]"):
            node.decompose()  # the snapshot is UTF-8, whatever the page was: said first, below
        meta = LexborHTMLParser('<meta charset="utf-8">').css_first("meta")
        if head is not None and meta is not None:
            if head.first_child is not None:
                head.first_child.insert_before(meta)
            else:
                head.insert_child(meta)
        return tree.html or ""

    async def _link(self, node: LexborNode, base: str) -> None:
        rel = (node.attributes.get("rel") or "").lower().split()
        if "stylesheet" not in rel or "alternate" in rel:
            return  # other links (icons, preloads, feeds) are removed by the sanitiser
        target = urljoin(base, node.attributes.get("href") or "")
        sheet = await self._stylesheet(target, 0)
        if sheet is None:
            return
        media = node.attributes.get("media")
        style = LexborHTMLParser("<style></style>").css_first("style")
        assert style is not None
        if media:
            style.attrs["media"] = media
        style.insert_child(sheet)
        node.replace_with(style)

    async def _style_element(self, node: LexborNode, base: str) -> None:
        css = node.text(deep=True)
        if "url(" not in css.lower() and "@import" not in css.lower():
            return
        inlined = await self.css(css, base)
        for child in list(node.iter(include_text=True)):
            child.decompose()
        node.insert_child(inlined)

    async def _style_attribute(self, node: LexborNode, base: str) -> None:
        value = node.attributes.get("style") or ""
        if "url(" in value.lower():
            node.attrs["style"] = await self.css(value, base)

    async def _image(self, node: LexborNode, base: str) -> None:
        for name in ("src", "poster", "href", "xlink:href"):
            value = node.attributes.get(name)
            if value is None or (node.tag == "input" and name == "src" and not value):
                continue
            uri = await self.data_uri(urljoin(base, value.strip()))
            if uri is None:
                del node.attrs[name]
            else:
                node.attrs[name] = uri

    async def _srcset(self, node: LexborNode, base: str) -> None:
        candidates = [
            c.strip().split()[0] for c in (node.attributes.get("srcset") or "").split(",")
        ]
        candidates = [c for c in candidates if c]
        src = node.attributes.get("src")
        del node.attrs["srcset"]
        if not candidates or (node.tag == "img" and src):
            return  # the img's own src stands for the set
        uri = await self.data_uri(urljoin(base, candidates[0]))
        if uri is not None:
            node.attrs["srcset"] = uri

    async def _media_source(self, node: LexborNode, base: str) -> None:
        target = urljoin(base, node.attributes.get("src") or "")
        uri = await self.data_uri(target)
        if uri is None:
            del node.attrs["src"]
        else:
            node.attrs["src"] = uri

    async def _frame(self, node: LexborNode, base: str, depth: int) -> None:
        src = (node.attributes.get("src") or "").strip()
        if "srcdoc" in node.attributes and depth >= IFRAME_DEPTH:  # nests like any frame
            self.omitted.append(Omitted("about:srcdoc", f"iframe nested over {IFRAME_DEPTH} deep"))
            node.decompose()
            return
        if "srcdoc" in node.attributes:
            if "src" in node.attributes:
                del node.attrs["src"]
            inner = await self.page(node.attributes.get("srcdoc") or "", base, depth + 1)
            node.attrs["srcdoc"] = inner
            return
        if not src or src.startswith("about:"):
            return
        target = urldefrag(urljoin(base, src)).url
        if depth >= IFRAME_DEPTH or not target.lower().startswith(("http:", "https:")):
            deep = depth >= IFRAME_DEPTH
            reason = f"iframe nested over {IFRAME_DEPTH} deep" if deep else "iframe not on the web"
            self.omitted.append(Omitted(target, reason))
            node.decompose()
            return
        fetched = await self._get(target)
        if fetched is None or not self._take(target, len(fetched.body)):
            node.decompose()
            return
        inner = extract.decode(fetched.body, fetched.charset)
        del node.attrs["src"]
        node.attrs["srcdoc"] = await self.page(inner, fetched.final_url or target, depth + 1)
