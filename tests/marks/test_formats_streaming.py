"""Readers that take the file in pieces give what they would give for the whole file: the Netscape
reader whatever the cuts (inside tags, comments, quotes, entities), the charset rules whatever
the reads, and the JSON reader whatever its batches."""

import codecs
import io
import json
import random
import re
from unittest import mock

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marks.formats import FormatError, charset, dates, jsonfile, netscape

# --- Netscape HTML in pieces ---------------------------------------------------------------------

words = st.sampled_from(["Café", "東京", "a b", "x", "\n", "\r\n", "  ", "Ελλάδα", "&", ";"])
entities = st.sampled_from(["&amp;", "&lt;", "&gt;", "&#233;", "&eacute;", "&quot;", "&am", "&#"])
text = st.lists(words | entities, max_size=4).map("".join)
url = st.sampled_from(
    ["https://a.example/", "https://b.example/x?q=1&amp;r=2", " https://sp.example/a b ", "?abc"]
)
value = st.sampled_from(["1500000000", "1520000000000", "", "yesterday", "1", "true"])


@st.composite
def link(draw) -> str:
    attributes = [f'HREF="{draw(url)}"']
    for name in draw(st.lists(st.sampled_from(["ADD_DATE", "LAST_VISIT", "PRIVATE", "STARRED"]))):
        attributes.append(f'{name}="{draw(value)}"')
    if draw(st.booleans()):
        attributes.append(f"TAGS='{draw(text)}>x,<y>'")  # `>` and `<` inside a quoted value
    closing = draw(st.sampled_from(["</A>", "</a>", "", "\n"]))
    return f"<DT><A {' '.join(attributes)}>{draw(text)}{closing}"


@st.composite
def folder(draw) -> str:
    marker = draw(st.sampled_from(["", ' PERSONAL_TOOLBAR_FOLDER="true"', " ADD_DATE='1'"]))
    name = draw(st.sampled_from(["Bookmarks bar", "Dev", "Other", "a/b", "", "Read, later"]))
    return f"<DT><H3{marker}>{name}{draw(text)}</H3>\n<DL><p>"


# Markup that ends where a piece could end: comments holding `>`, an unclosed comment, stray `<`,
# a quote opened and never closed, declarations that look like comments.
odd = st.sampled_from(
    [
        "<!-- a > b -->",
        "<!-- never closed > ",
        "<!DOCTYPE NETSCAPE-Bookmark-file-1>",
        "<!->",
        "<!-->",
        "<!--->",
        "<",
        "</",
        "< a",
        "<3",
        "</3",
        "<!",
        '<A HREF="unclosed>',
        "<A TITLE='it>s'>",
        "<p>",
        "<HR>",
        "</DL><p>",
        "</H3>",
        "<H1>Read Archive</H1>",
        "<H1>Starred</H1>",
        "<H1>Bookmarks</H1>",
        ">",
        '"',
        "'",
    ]
)
description = text.map(lambda words: f"<DD>{words}")
fragment = link() | folder() | odd | description | text
documents = st.tuples(
    st.sampled_from(["<DL><p>\n", "<dl>", "", "   ", "<DT>"]), st.lists(fragment, max_size=40)
).map(lambda parts: parts[0] + "".join(parts[1]))


def outcome(document) -> list | str:
    """The records read, or the one-line error."""
    try:
        return list(netscape.read(document, base_url=None))
    except FormatError as error:
        return str(error)


def pieces(document: str, cuts: list[int]) -> list[str]:
    points = sorted({min(cut, len(document)) for cut in cuts})
    return [document[a:b] for a, b in zip([0, *points], [*points, len(document)], strict=True)]


@settings(max_examples=400, deadline=None)
@given(documents, st.lists(st.integers(0, 2000), max_size=30))
def test_netscape_in_pieces_reads_as_the_whole_document(document, cuts):
    whole = outcome(document)
    assert outcome(pieces(document, cuts)) == whole
    assert outcome(io.StringIO(document)) == whole


@settings(max_examples=100, deadline=None)
@given(documents, st.integers(1, 7))
def test_netscape_one_character_at_a_time(document, step):
    split = [document[start : start + step] for start in range(0, len(document), step)]
    assert outcome(split) == outcome(document)


@settings(max_examples=400, deadline=None)
@given(documents, st.lists(st.integers(0, 2000), max_size=10))
def test_whole_links_read_as_their_tags_one_by_one(document, cuts):
    # The reader takes a common link (`<DT><A ...>text</A>`) in one match; with that alternative
    # made impossible it reads the same link tag by tag. Both must give the same records, lines,
    # descriptions and folders, in pieces too.
    general = re.compile(
        netscape._MARKUP.pattern.replace("<(?:((?:", "<(?:(?!)((?:", 1), netscape._MARKUP.flags
    )
    assert general.pattern != netscape._MARKUP.pattern
    fast = outcome(pieces(document, cuts))
    with mock.patch.object(netscape, "_MARKUP", general):
        assert outcome(pieces(document, cuts)) == fast


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 9_999_999_999).map(lambda n: f"{n:010d}"))
def test_ten_digit_epoch_seconds_read_as_the_general_rules_read_them(text):
    # `ADD_DATE="1431108460"` takes a fast path; what it gives (or refuses) must be what the
    # general rules give for the same number: seconds since 1970, nothing before 1980, 0 none.
    number = int(text)
    try:
        general = None if number == 0 else dates.from_epoch(number)
    except ValueError:
        with pytest.raises(ValueError):
            dates.parse(text)
        return
    assert dates.parse(text) == general


def test_lines_are_counted_across_pieces():
    document = "<DL>\n" + "".join(
        f'\n<DT><A HREF="https://{n}.example/">{n}</A>' for n in range(50)
    )
    records = list(netscape.read([document[start : start + 7] for start in range(0, 10_000, 7)]))
    assert [record.where for record in records] == [f"line {n + 3}" for n in range(50)]


def test_a_quote_left_open_holds_until_the_end_and_reads_as_a_whole_file_does():
    # Whether the open quote ever closes outside another quote is known only at the end of the
    # file; it never does here, so that `<A` is text and every tag after it is read.
    document = '<DL><DT><A HREF="https://open.example/>Open</A>\n' + "".join(
        f'<DT><A HREF="https://{n}.example/">{n}</A>\n' for n in range(3000)
    )
    whole = outcome(document)
    assert len(whole) == 3000 and whole[0].where == "line 2" and whole[-1].where == "line 3001"
    in_pieces = [document[start : start + 100] for start in range(0, len(document), 100)]
    assert outcome(in_pieces) == whole


def test_not_a_bookmark_file_is_found_past_a_blank_head():
    assert outcome([" " * 70_000, "\n", "text"]) == outcome(" " * 70_000 + "\ntext")
    assert "not a Netscape bookmark file" in outcome([" " * 70_000, "x"])
    assert outcome([" " * 70_000, "\n"]) == []


# --- charsets, read in pieces -------------------------------------------------------------------


class Trickle(io.RawIOBase):
    """A file that gives at most a few bytes per read (as a pipe may), seekable or not."""

    def __init__(self, data: bytes, seed: int, seekable: bool) -> None:
        self.data, self.offset, self.can_seek = data, 0, seekable
        self.sizes = random.Random(seed)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return self.can_seek

    def read(self, size: int = -1) -> bytes:
        size = len(self.data) if size < 0 else size
        size = min(size, self.sizes.randint(1, 5000))
        chunk = self.data[self.offset : self.offset + size]
        self.offset += len(chunk)
        return chunk

    def tell(self) -> int:
        return self.offset

    def seek(self, offset: int, whence: int = 0) -> int:
        assert self.can_seek and whence == 0
        self.offset = offset
        return offset


def decoded_whole(data: bytes, encoding: str | None) -> tuple[str, list[str]]:
    """The charset rules applied to the whole file at once (what the import did before)."""
    if encoding is not None:
        return data.decode(encoding, errors="replace"), []
    name, skip = charset.bom(data[:4])
    if name:
        return data[skip:].decode(name, errors="replace"), []
    meta = charset.declared(data[:4096])
    if meta and meta not in ("utf-8", "utf-16", "utf-16-le", "utf-16-be"):
        return data.decode(meta, errors="replace"), []
    try:
        return data.decode("utf-8"), []
    except UnicodeDecodeError as error:
        where = f"byte {error.start}"
        if meta:
            return data.decode("cp1252", errors="replace"), [
                f"declared {meta} but not valid {meta} ({where}): read as Windows-1252"
            ]
        return data.decode("cp1252", errors="replace"), [
            f"not UTF-8 ({where}) and no charset declared: read as Windows-1252"
        ]


BODY = "<DL><DT><A HREF='https://x.example/'>Größe “quoted” 東京 €</A></DL>\n"
META = '<META HTTP-EQUIV="Content-Type" CONTENT="text/html; charset={}">\n'


@st.composite
def files(draw) -> tuple[bytes, str | None]:
    """Real encodings with and without BOMs and declarations, then stray bytes anywhere."""
    codec = draw(st.sampled_from(["utf-8", "utf-16", "utf-16-be", "utf-32", "cp1252", "shift_jis"]))
    declared = draw(st.sampled_from(["", "utf-8", "iso-8859-1", "shift_jis", "nonsense"]))
    text = (META.format(declared) if declared else "") + BODY * draw(st.integers(0, 400))
    data = text.encode(codec, errors="replace")
    if draw(st.booleans()):
        data = codecs.BOM_UTF8 + data
    for _ in range(draw(st.integers(0, 3))):
        spot = draw(st.integers(0, len(data)))
        data = data[:spot] + draw(st.binary(min_size=1, max_size=3)) + data[spot:]
    encoding = draw(st.sampled_from([None, None, "latin-1", "utf-16", "shift_jis"]))
    return data, encoding


@settings(max_examples=200, deadline=None)
@given(files(), st.integers(0, 2**32), st.booleans())
def test_html_text_in_pieces_is_the_whole_file_decoded_by_the_same_rules(file, seed, seekable):
    data, encoding = file
    warnings: list[str] = []
    text = "".join(
        charset.html_text(Trickle(data, seed, seekable), encoding=encoding, warnings=warnings)
    )
    assert (text, warnings) == decoded_whole(data, encoding)


@pytest.mark.parametrize("seekable", [True, False])
def test_undeclared_non_utf8_far_into_the_file_is_found_before_any_text(seekable):
    data = ("<DL>" + "<DT><A HREF='https://u.example/'>Größe</A>\n" * 20_000).encode()
    data += b"\x93late\x94"
    warnings: list[str] = []
    text = "".join(charset.html_text(Trickle(data, 1, seekable), warnings=warnings))
    assert warnings == [
        f"not UTF-8 (byte {len(data) - 6}) and no charset declared: read as Windows-1252"
    ]
    assert text == data.decode("cp1252", errors="replace")


# --- JSON arrays, in batches ---------------------------------------------------------------------

tricky = st.sampled_from(["plain", 'a "quoted" },{ title', "}, {", "ends with }", "東京 \\ é", ""])
moment = st.sampled_from(["2021-01-01T10:00:00Z", "2021-01-01T10:00:00", "1600000000", "soon"])
exported = st.fixed_dictionaries(
    {"url": st.sampled_from(["https://e.example/", "https://f.example/a"]), "title": tricky},
    optional={
        "id": st.integers(0, 9),
        "tags": st.lists(tricky, max_size=3),
        "added": moment,
        "starred": st.booleans(),
        "visit_count": st.integers(0, 3) | st.just("x"),
    },
)
pinboard = st.fixed_dictionaries(
    {"href": st.just("https://p.example/"), "description": tricky},
    optional={"tags": tricky, "toread": st.sampled_from(["yes", "no"]), "time": moment},
)
omnivore = st.fixed_dictionaries(
    {"url": st.just("https://o.example/"), "labels": st.lists(st.builds(dict, name=tricky))},
    optional={"state": st.just("Archived"), "savedAt": moment},
)
odd_items = st.sampled_from([{"title": "no url"}, "a string", 42, None, [], {"url": 42}, {}])
items = st.lists(exported | pinboard | omnivore | odd_items, max_size=30)
layouts = st.sampled_from(
    [{}, {"indent": 2}, {"indent": 1}, {"separators": (",", ":")}, {"separators": (" , ", " : ")}]
)


def read_json(data: bytes, chunk: int) -> list:
    with mock.patch.object(jsonfile, "CHUNK", chunk):
        try:
            return msgspec.to_builtins(list(jsonfile.read(io.BytesIO(data))))
        except FormatError as error:
            return [str(error)]


@settings(max_examples=300, deadline=None)
@given(items, layouts, st.integers(1, 400))
def test_json_array_in_batches_reads_as_in_one_batch(array, layout, chunk):
    data = json.dumps(array, ensure_ascii=False, **layout).encode()
    whole = read_json(data, 1 << 30)
    assert read_json(data, chunk) == whole
    assert [record["where"] for record in whole] == [f"item {n}" for n in range(1, len(array) + 1)]


def test_json_export_lines_are_read_a_batch_at_a_time():
    item = '{"url": "https://e.example/%d", "title": "t", "tags": ["a"]}'
    data = ("[\n" + ",\n".join(item % n for n in range(20_000)) + "\n]\n").encode()
    decoded = []
    real = jsonfile._batch

    def counted(batch: bytes, number: int):
        decoded.append(len(batch))
        return real(batch, number)

    with mock.patch.object(jsonfile, "_batch", counted), mock.patch.object(jsonfile, "CHUNK", 4096):
        records = list(jsonfile.read(io.BytesIO(data)))
    assert len(records) == 20_000 and records[-1].where == "item 20000"
    assert max(decoded) < 3 * 4096  # never more than a batch or two held
    assert sum(decoded) < 1.2 * len(data)  # each item decoded about once


@pytest.mark.parametrize(
    "tail",
    [b',\n{"url": "https://x.example/", "title": "broken"', b",\n{bad json}\n]", b"\n] trailing"],
)
def test_invalid_json_names_the_byte_of_the_file(tail):
    item = b'{"url": "https://e.example/", "title": "t"}'
    data = b"[\n" + b",\n".join([item] * 5000) + tail
    try:
        msgspec.json.decode(data)
    except msgspec.DecodeError as error:
        expected = f"not valid JSON: {error}"
    assert read_json(data, 4096) == [expected]
