"""Making a page inert: nothing in a snapshot may run, navigate, or load from the network.

Removed: script-bearing and plugin elements, every `on*` attribute, any attribute whose value is a
`javascript:`/`vbscript:` URL (as a browser reads it: tabs and line breaks inside ignored, leading
spaces and control characters stripped), `<base>`, every `<meta http-equiv>` (refresh, cookies,
policies, prefetch control: a static page needs none), SVG animations (they can set an `href` to
script), and `<link>` elements (stylesheets are inlined before).
`<noscript>` is unwrapped: a snapshot never runs script, so its fallback is what a reader sees.
Iframes are the inliner's business; here their `srcdoc` is sanitised again, recursively.

Nothing loads from the network, even opened from a file without the server's policy (a tracker
would learn the page was read): an attribute that loads (`src`, `srcset`, `poster`,
`background`, `ping`, an SVG `href` that is not a fragment) keeps only a `data:` value, and CSS
(elements, `style` and SVG presentation attributes) loses `@import`, `url()`s that are not
`data:` or fragments, and strings naming a network URL (`image-set("https://...")`), spelt with
CSS escapes or not. Iframes keep no `src` (the inliner made the ones it fetched `srcdoc`).

No markup survives in raw text (mutation XSS): lexbor writes the text of `style`, `xmp`,
`noembed`, ... verbatim even inside SVG or MathML, where a browser reads it as markup (and the
table rules can move an element there on the next parse). So CSS text holds no `<` (written
`\3c `, the same character to CSS), `xmp`/`plaintext` become `<pre>`, and the never-shown text of
`noembed`, `noframes` and `iframe` is dropped.

This is the second line: the server also serves every snapshot under `Content-Security-Policy:
sandbox`, so even a sanitiser miss runs nothing with marks' origin.
"""

import re

from selectolax.lexbor import LexborHTMLParser, LexborNode

from marks import extract

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
LOADING = ("src", "srcset", "poster", "background", "lowsrc", "dynsrc", "ping", "data")
LINKS = ("a", "area", "form")  # their URLs are followed when clicked, not loaded
# Attributes a browser reads as CSS (SVG presentation attributes that may name a URL).
CSS_ATTRIBUTES = frozenset(
    [
        "style",
        "fill",
        "stroke",
        "filter",
        "mask",
        "clip-path",
        "cursor",
        "marker",
        "marker-start",
        "marker-mid",
        "marker-end",
    ]
)
RAW_TEXT_HIDDEN = "noembed, noframes, iframe"  # text a browser never shows
RAW_TEXT_SHOWN = "xmp, plaintext"
# An identifier or at-keyword spelt with CSS escapes (`\75rl(`, `@\69mport`).
_CSS_NAME = re.compile(r"(?:[A-Za-z0-9_-]|\\[0-9A-Fa-f]{1,6}[ \t\n\r\f]?|\\[^\n\r\f0-9A-Fa-f])+")
_CSS_ESCAPE = re.compile(r"\\([0-9A-Fa-f]{1,6})[ \t\n\r\f]?|\\([^\n\r\f0-9A-Fa-f])")
_LOADING_NAMES = frozenset(["url", "import", "image-set", "-webkit-image-set", "image", "src"])
_CSS_IMPORT = re.compile(r"@import\b[^;{}]*;?", re.IGNORECASE)
_CSS_REMOTE_URL = re.compile(r"""(?<![\w-])url\((?![\s"']*(?:data:|\#))""", re.IGNORECASE)
# Comments are matched so that a quote inside one does not start a string. Like CSS, a comment or
# string left open ends at the end (a string also at a line break), and nothing backtracks: linear.
_CSS_STRING = re.compile(
    r"""/\*(?:[^*]|\*(?!/))*+(?:\*/)?"""
    r"""|"((?:[^"\\\n]|\\[\s\S]?)*+)"?|'((?:[^'\\\n]|\\[\s\S]?)*+)'?"""
)
_NETWORK = re.compile(r"^\s*(?:(?:https?|ftp|wss?):|//|\\\\)", re.IGNORECASE)


def is_script_url(value: str) -> bool:
    """Whether a browser would run `value` as script if it were a URL."""
    cleaned = _LEADING.sub("", _IGNORED_IN_URLS.sub("", value)).lower()
    return cleaned.startswith(SCRIPT_SCHEMES)


def _web_url(value: str) -> bool:
    return _LEADING.sub("", _IGNORED_IN_URLS.sub("", value)).lower().startswith(WEB)


def safe_css(css: str) -> str:
    """CSS that cannot end its `<style>` element early, nor be read as markup anywhere: every `<`
    is written `\\3c ` (the same to CSS; `<!--`, which CSS ignores, goes)."""
    return css.replace("<!--", "").replace("<", "\\3c ")


def _unescaped_name(match: "re.Match[str]") -> str:
    name = match.group(0)
    if "\\" not in name:
        return name
    plain = _CSS_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)) if m.group(1) else m.group(2), name)
    # Only the names that load (`url`, `import`, ...): anything else keeps its escapes, so a
    # selector's escaped digit (`.\\31 0px`) or a string's escaped quote keeps its meaning.
    return plain if plain.lower() in _LOADING_NAMES else name


def _string(match: "re.Match[str]") -> str:
    text = match.group(1) if match.group(1) is not None else match.group(2)
    return '"data:,"' if text is not None and _NETWORK.match(text) else match.group(0)


def offline_css(css: str) -> str:
    """CSS that loads nothing from the network (see the module's docstring)."""
    css = _CSS_NAME.sub(_unescaped_name, css)
    css = _CSS_IMPORT.sub("", css)
    css = _CSS_REMOTE_URL.sub("x-url(", css)  # an unknown function: the declaration is dropped
    return _CSS_STRING.sub(_string, css)


def _data_only(value: str) -> bool:
    return _LEADING.sub("", _IGNORED_IN_URLS.sub("", value)).lower().startswith("data:")


def _pre(text: str) -> LexborNode:
    pre = LexborHTMLParser("<pre></pre>").css_first("pre")
    assert pre is not None
    if text:
        pre.insert_child(text)
    return pre


def _clear(node: LexborNode) -> None:
    for child in list(node.iter(include_text=True)):
        child.decompose()


def clean_tree(tree: LexborHTMLParser, depth: int = 0) -> None:
    """Sanitise a parsed document in place."""
    for node in tree.css(REMOVED):
        node.decompose()
    for node in tree.css("meta[http-equiv]"):
        node.decompose()
    for node in tree.css("noscript"):
        node.unwrap()
    for node in tree.css(RAW_TEXT_HIDDEN):
        _clear(node)
    for node in tree.css(RAW_TEXT_SHOWN):
        node.replace_with(_pre(node.text(deep=True)))
    for node in tree.css("style"):
        css = node.text(deep=True)
        inert = safe_css(offline_css(css))
        if inert != css:
            _clear(node)
            node.insert_child(inert)
    root = tree.root
    if root is None:
        return
    for node in root.traverse(include_text=False):
        attributes = node.attributes
        for name, value in list(attributes.items()):
            lowered = name.lower()
            if (
                lowered.startswith("on")
                or (value is not None and is_script_url(value))
                or _loads(node.tag, lowered, value)
            ):
                del node.attrs[name]
            elif lowered == "srcdoc":
                if depth >= _MAX_DEPTH or value is None:
                    del node.attrs[name]
                else:
                    node.attrs[name] = clean(value, depth + 1)
            elif value and lowered in CSS_ATTRIBUTES:
                node.attrs[name] = safe_css(offline_css(value))


def _loads(tag: str | None, name: str, value: str | None) -> bool:
    """Whether this attribute would make a browser fetch something other than a `data:` URL."""
    if not value:
        return False
    if tag == "iframe" and name == "src":
        return True  # a web page, or a data:/blob: document carrying its own script
    if name in LOADING:
        return not _data_only(value)
    if name in ("href", "xlink:href") and tag not in LINKS:
        return not (value.strip().startswith("#") or _data_only(value))
    return False


def clean(html: str, depth: int = 0) -> str:
    """`html` made inert (see the module's docstring)."""
    tree = extract.parse(html)
    clean_tree(tree, depth)
    return tree.html or ""
