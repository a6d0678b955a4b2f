"""`escape` writes exactly the unsafe characters (less those kept) as visible escapes.

The pattern is one character class built from `UNSAFE` less `keep` (it was a lookahead before the
class, which made `ls /tags` try the class at every position). The oracle here is the rule as
first written, applied character by character.
"""

from hypothesis import example, given
from hypothesis import strategies as st

from marks.printable import UNSAFE, _pattern, escape

RANGES = ((0x00, 0x1F), (0x7F, 0x9F), (0x2028, 0x2029), (0x202A, 0x202E), (0x2066, 0x2069))


def unsafe(ch: str) -> bool:
    return any(low <= ord(ch) <= high for low, high in RANGES)


def oracle(text: str, keep: str) -> str:
    return "".join(repr(ch)[1:-1] if unsafe(ch) and ch not in keep else ch for ch in text)


near = st.sampled_from([*UNSAFE, "a", "é", "\u2027", "\u202f", "\u2065", "\u206a", "\xa0", " "])
texts = st.one_of(st.text(near, max_size=40), st.text(max_size=40))
keeps = st.one_of(st.sampled_from(["", "\n\t", "\n", "\t", UNSAFE]), st.text(near, max_size=5))


@given(texts, keeps)
@example("a\x1b[2Jb\r\n\tc\u202ed\x9b", "\n\t")
@example("\x00\x7f", UNSAFE)
@example("dev/\nrust/\n", "\n\t")
@example("dev/\nrust/\r\n", "\n\t")
@example("a\tb\nc", "\n")
def test_escape_shows_each_unsafe_character_not_kept(text, keep):
    assert escape(text, keep) == oracle(text, keep)


def test_lines_of_printable_text_are_returned_unsearched():
    # A listing is many lines and keeps its line breaks: with the kept characters left out it is
    # printable, so the pattern (3 million instructions to compile, then a pass over the whole
    # text: 8.8 million for `ls /tags`' 144 KB at a million) is not needed.
    _pattern.cache_clear()
    listing = "".join(f"{name}/\n" for name in ("dev", "Zürich", "東京", "e\u0301", "🙂")) * 100
    assert escape(listing, keep="\n\t") is listing
    assert _pattern.cache_info().currsize == 0
    assert escape(listing + "\x1b", keep="\n\t") == listing + "\\x1b"


def test_the_unsafe_set_is_the_documented_one():
    assert set(UNSAFE) == {chr(code) for code in range(0x10000) if unsafe(chr(code))}


def test_every_unsafe_character_is_one_python_calls_unprintable():
    # `escape` returns printable text as it is, unsearched: no unsafe character may be printable.
    assert not any(ch.isprintable() for ch in UNSAFE)
