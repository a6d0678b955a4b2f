"""The snapshot sanitiser, by property: whatever HTML goes in -- tags in any case, handlers,
`javascript:` URLs spelt as browsers accept them (entities, tabs, leading spaces), frames holding
more of the same, text that tries to close a `<style>` -- no script element, no `on*` attribute
and no script URL comes out, in the page or in any frame, as a browser would parse it."""

import html
import re

from hypothesis import example, given, settings
from hypothesis import strategies as st
from selectolax.lexbor import LexborHTMLParser

from marks import extract
from marks.snapshots.sanitise import clean, is_script_url

TAGS = [
    "script",
    "ScRiPt",
    "svg",
    "math",
    "iframe",
    "img",
    "a",
    "style",
    "noscript",
    "base",
    "meta",
    "template",
    "textarea",
    "xmp",
    "object",
    "embed",
    "link",
    "form",
    "set",
    "animate",
    "p",
    "div",
    "title",
    "select",
    "option",
    "table",
    "frameset",
    "mtext",
    "mglyph",
    "mi",
    "noembed",
    "noframes",
    "plaintext",
    "foreignObject",
    "desc",
    "video",
    "use",
    "image",
]
ATTRIBUTES = [
    "onclick",
    "ONLOAD",
    "onerror",
    "href",
    "src",
    "xlink:href",
    "action",
    "formaction",
    "srcdoc",
    "style",
    "http-equiv",
    "content",
    "data",
    "to",
    "values",
    "poster",
    "background",
    "srcset",
    "title",
    "ping",
    "fill",
    "cursor",
]
SCRIPTY = st.sampled_from(
    [
        "javascript:alert(1)",
        " JaVaScRiPt:x",
        "java\tscript:x",
        "java\nscript:x",
        "\x01javascript:x",
        "&#106;avascript:x",
        "&#x6A;avascript:x",
        "vbscript:x",
        "javascript&colon;x",
        "alert(1)",
        "</style><script>alert(1)</script>",
        'x" onload="alert(1)',
        "https://ok.example/",
        "refresh",
        "0;url=javascript:alert(1)",
        "&lt;img src=x onerror=alert(1)&gt;",
        "http://tracker.example/x.png",
        "url(//tracker.example/x.png)",
        "\\75rl(http://tracker.example/x.png)",
    ]
)
TEXT = st.text(alphabet=st.sampled_from(list("<>/\"'=&; \tabsx!-")), max_size=12)


@st.composite
def fragments(draw, depth: int = 0) -> str:
    parts = []
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.integers(0, 3))
        if kind == 0:
            parts.append(draw(TEXT) + draw(SCRIPTY))
            continue
        tag = draw(st.sampled_from(TAGS))
        attributes = "".join(
            f" {draw(st.sampled_from(ATTRIBUTES))}="
            + draw(st.sampled_from(['"{}"', "'{}'", "{}"])).format(
                html.escape(draw(fragments(depth + 1)), quote=True)
                if depth < 2 and draw(st.booleans())
                else draw(SCRIPTY)
            )
            for _ in range(draw(st.integers(0, 3)))
        )
        inner = draw(fragments(depth + 1)) if depth < 2 else draw(TEXT)
        closing = draw(st.sampled_from([f"</{tag}>", "", f"</{tag.upper()} >"]))
        parts.append(f"<{tag}{attributes}>{inner}{closing}")
    return "".join(parts)


def _assert_inert(document: str, depth: int = 0) -> None:
    tree = LexborHTMLParser(document)
    assert tree.css("script") == [], document
    if tree.root is None:
        return
    for node in tree.root.traverse(include_text=False):
        for name, value in node.attributes.items():
            assert not name.lower().startswith("on"), (name, document)
            assert value is None or not is_script_url(value), (name, value, document)
            if node.tag in ("iframe", "frame") and name.lower() == "src":
                assert value.strip().lower().startswith(("http:", "https:")), (value, document)
            if name.lower() == "srcdoc" and value:
                _assert_inert(value, depth + 1)
    for style in tree.css("style"):  # nothing after a <style> closes it early
        assert "</style" not in style.text().lower()
    assert not _loads_the_tracker(tree), document


# CSS that fetches: `url(` (also spelt `\75rl(`), `@import`, or a string naming a network URL.
_CSS_FETCH = re.compile(
    r"""(?:(?<![\w-])(?:url|\\75 ?rl)\(\s*["']?|@import\s*["']?|["']\s*)(?:https?:)?//tracker""",
    re.IGNORECASE,
)


def _loads_the_tracker(tree: LexborHTMLParser) -> bool:
    """Whether a browser opening the document would fetch from tracker.example: a loading
    attribute or a non-link `href` naming it, or CSS (elements, attributes) fetching it."""
    if any(_CSS_FETCH.search(style.text()) for style in tree.css("style")):
        return True
    if tree.root is None:
        return False
    for node in tree.root.traverse(include_text=False):
        for name, value in node.attributes.items():
            if not value:
                continue
            loads = name in ("src", "srcset", "poster", "background", "ping") or (
                name.endswith("href") and node.tag not in ("a", "area")
            )
            css = name in ("style", "fill", "filter", "mask", "cursor")
            if (loads and "tracker.example" in value) or (css and _CSS_FETCH.search(value)):
                return True
    return False


@settings(max_examples=250, deadline=None)
@given(fragments() | st.text(max_size=200))
@example('<iframe src=" data:text/html,<script>alert(1)</script>"></iframe>')
@example('<a href="java&#9;script:alert(1)">x</a><svg><script>alert(2)</script></svg>')
@example('<style>a{}</style><script>x</script><iframe srcdoc="<img src=x onerror=alert(1)>">')
# Mutation XSS: a raw-text element's text written verbatim, read as markup on the next parse.
@example("<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>")
@example("<svg><style>&lt;img src=x onerror=alert(1)&gt;</style></svg>")
@example("<math><xmp>&lt;img src=x onerror=alert(1)&gt;</xmp></math>")
@example("<math><mtext><table><mglyph><noembed><img src=x onerror=alert(1)>")
@example("<svg><iframe>&lt;img src=x onerror=alert(1)&gt;</iframe></svg>")
@example("<math><plaintext>&lt;img src=x onerror=alert(1)&gt;</plaintext></math>")
# Network loads left in a page (a tracker learns it was read).
@example("<img src=http://tracker.example/i><video poster=//tracker.example/p></video>")
@example("<svg><image href=http://tracker.example/i /><use href=//tracker.example/u#a /></svg>")
@example("<p style='background:\\75rl(http://tracker.example/x)'>")
@example("<style>@\\69mport 'http://tracker.example/a.css'</style>")
@example("<style>p{b:image-set('//tracker.example/i' 1x)}</style><svg fill=url(//tracker.example)>")
@example("<style>/* ' */ p{b:image-set(\"http://tracker.example/i\" 1x)} /* ' */</style>")
def test_nothing_that_runs_survives(document):
    once = clean(document)
    _assert_inert(once)
    _assert_inert(clean(once))  # and cleaning again keeps it so


def test_the_browser_spellings_of_script_urls():
    for value in ("javascript:x", " \x00JAVASCRIPT:x", "java\tscr\nipt:x", "vbscript:x"):
        assert is_script_url(value), value
    for value in ("https://a.example/javascript:x", "data:image/png;base64,AA", "#javascript:"):
        assert not is_script_url(value), value


def test_hostile_sizes_take_linear_work_and_stay_inert():
    """Input built to make a parser or a regular expression go quadratic: 200,000 nested tags
    (lexbor alone took 25 s for 40,000 before nesting was bounded, so this would not finish),
    and CSS full of open strings, open comments and spaces. No clock: the test ends or times out."""
    deep = "<div>" * 200_000 + "<img src=x onerror=alert(1)><p>bottom</p>"
    once = clean(deep)
    _assert_inert(once)
    assert "bottom" in once  # what is past the cut is kept, as text
    page = extract.Page("https://deep.example/", "text/html", "utf-8", deep.encode())
    assert "bottom" in extract.html_text(page).text  # content, which shares the fetch, too
    css = '"\\' * 200_000 + "/* '" * 200_000 + "url(" + " " * 1_000_000 + "@import x" * 100_000
    _assert_inert(clean(f"<style>{css}</style><div style='{css}'>x</div>"))


def test_css_that_loads_nothing_keeps_its_meaning():
    """Only what would load is rewritten: escaped selectors, quotes and icon-font code points,
    `data:` and fragment URLs stay byte for byte."""
    css = (
        '.\\31 0px{color:red} .md\\:flex{display:flex} a::before{content:"\\f101 \\201C"} '
        "b{background:url(data:image/gif;base64,R0lG) url('#grad')} c{d:\"e > f\"}"
    )
    tree = LexborHTMLParser(clean(f"<style>{css}</style>"))
    assert tree.css_first("style").text() == css
