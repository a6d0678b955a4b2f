"""Making a page inert: nothing in a snapshot may run, navigate, or load from the network.

Removed: script-bearing and plugin elements, every `on*` attribute, any attribute whose value is a
`javascript:`/`vbscript:` URL (as a browser reads it: tabs and line breaks inside ignored, leading
spaces and control characters stripped), `<base>`, `<meta http-equiv>` refreshes and cookies,
iframe sources that are not web pages (a `data:` document carries its own script), SVG animations
(they can set an `href` to script), and `<link>` elements (stylesheets are inlined before).
`<noscript>` is unwrapped: a snapshot never runs script, so its fallback is what a reader sees.
Iframes are the inliner's business; here their `srcdoc` is sanitised again, recursively.

This is the second line: the server also serves every snapshot under `Content-Security-Policy:
sandbox`, so even a sanitiser miss runs nothing with marks' origin.
"""

import re

from selectolax.lexbor import LexborHTMLParser, LexborNode

REMOVED = (
    "script, base, object, embed, applet, frame, frameset, portal, template, link, "
    "animate, set, animatemotion, animatetransform, handler, listener"
)
SCRIPT_SCHEMES = ("javascript:", "vbscript:", "livescript:")
WEB = ("http:", "https:")
_IGNORED_IN_URLS = re.compile(r"[\t\n\r]")
_LEADING = re.compile(r"^[\x00-\x20]+")
_STYLE_END = re.compile(r"</(style)", re.IGNORECASE)
_MAX_DEPTH = 8  # nested srcdoc documents sanitised; deeper ones are dropped


def is_script_url(value: str) -> bool:
    """Whether a browser would run `value` as script if it were a URL."""
    cleaned = _LEADING.sub("", _IGNORED_IN_URLS.sub("", value)).lower()
    return cleaned.startswith(SCRIPT_SCHEMES)


def _web_url(value: str) -> bool:
    return _LEADING.sub("", _IGNORED_IN_URLS.sub("", value)).lower().startswith(WEB)


def safe_css(css: str) -> str:
    """CSS that cannot end its `<style>` element early (`<\\/style` means the same to CSS)."""
    return _STYLE_END.sub(r"<\\/\1", css)


def _drop_meta(node: LexborNode) -> bool:
    equiv = (node.attributes.get("http-equiv") or "").strip().lower()
    return equiv in ("refresh", "set-cookie", "content-security-policy")


def clean_tree(tree: LexborHTMLParser, depth: int = 0) -> None:
    """Sanitise a parsed document in place."""
    for node in tree.css(REMOVED):
        node.decompose()
    for node in tree.css("meta[http-equiv]"):
        if _drop_meta(node):
            node.decompose()
    for node in tree.css("noscript"):
        node.unwrap()
    for node in tree.css("iframe[src]"):  # a data: or blob: document would carry its own script
        if not _web_url(node.attributes.get("src") or ""):
            del node.attrs["src"]
    for node in tree.css("style"):
        css = node.text(deep=True)
        if _STYLE_END.search(css):
            for child in list(node.iter(include_text=True)):
                child.decompose()
            node.insert_child(safe_css(css))
    root = tree.root
    if root is None:
        return
    for node in root.traverse(include_text=False):
        attributes = node.attributes
        for name, value in list(attributes.items()):
            lowered = name.lower()
            if lowered.startswith("on") or (value is not None and is_script_url(value)):
                del node.attrs[name]
            elif lowered == "srcdoc":
                if depth >= _MAX_DEPTH or value is None:
                    del node.attrs[name]
                else:
                    node.attrs[name] = clean(value, depth + 1)
            elif lowered == "style" and value and _STYLE_END.search(value):
                node.attrs[name] = safe_css(value)


def clean(html: str, depth: int = 0) -> str:
    """`html` made inert (see the module's docstring)."""
    tree = LexborHTMLParser(html)
    clean_tree(tree, depth)
    return tree.html or ""
