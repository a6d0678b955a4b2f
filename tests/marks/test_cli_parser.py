"""marks' command-line parser reads every argument list as Click's own parser does.

`marks.cli.Command` sends an argument that can only be short options straight to them, sparing
Click's long-option attempt (whose miss imports `locale` and `difflib`: tests/marks/
test_startup.py). Here both parsers read the same argument lists, for options of every shape
Click knows (flags, values, counts, repeats, combined short options, `-foo` spelled with one
dash, a `+` prefix, `=` values), and must give the same values, leftovers and order, or the same
error.
"""

import click
from hypothesis import example, given, settings
from hypothesis import strategies as st

from marks.cli import Command


@click.command(cls=Command)
@click.option("-a", "alpha", is_flag=True)
@click.option("-b", "bravo")
@click.option("--cee")
@click.option("-d", "--dee", is_flag=True)
@click.option("-v", "verbose", count=True)
@click.option("-m", "many", multiple=True)
@click.option("-foo", "foo")  # one dash, three letters: Click makes it a long option
@click.option("+p", "plus", is_flag=True)
@click.argument("words", nargs=-1)
def sample(**values: object) -> None:
    """Options of every shape."""


TOKENS = [
    *("-a", "-b", "-ab", "-ba", "-bx", "-b=1", "-a=1", "-abx", "-vav", "-vv", "-v", "-m", "-mx"),
    *("--cee", "--cee=v", "--ce", "-cee", "-d", "--dee", "--dee=1", "-D", "-dv"),
    *("-foo", "-foo=x", "-fo", "-f", "-FOO", "+p", "+pp", "+pa", "-z", "--zz", "-c", "-cls"),
    *("--", "-", "x", "y=1", "-=", "--=", "-a=", "+", "++p"),
]
ARGUMENTS = st.lists(
    st.sampled_from(TOKENS) | st.text(alphabet="-+=abcdfmpvxz", max_size=5), max_size=8
)
SETTINGS = st.sampled_from(
    [
        {},
        {"token_normalize_func": str.lower},
        {"ignore_unknown_options": True},
        {"allow_interspersed_args": False},
        {"ignore_unknown_options": True, "token_normalize_func": str.lower},
    ]
)


def reading(make_parser, settings: dict, args: list[str]) -> tuple:
    context = click.Context(sample, **settings)
    try:
        values, leftovers, order = make_parser(sample, context).parse_args(list(args))
    except click.UsageError as error:
        possibilities = getattr(error, "possibilities", None)
        return ("error", type(error).__name__, error.format_message(), possibilities)
    return ("read", values, leftovers, [param.name for param in order])


@settings(max_examples=500)  # each example is two parses, well under a millisecond
@given(ARGUMENTS, SETTINGS)
@example(["-c", "ls /"], {})
@example(["-a", "--cee=x", "-bv"], {})
@example(["-FOO", "x"], {"token_normalize_func": str.lower})
@example(["-z", "-a"], {"ignore_unknown_options": True})
@example(["-ab", "+p"], {})
def test_every_argument_list_reads_as_clicks_own_parser_reads_it(args, settings):
    ours = reading(Command.make_parser, settings, args)
    assert ours == reading(click.Command.make_parser, settings, args)


def test_the_shells_script_option_reads_as_before():
    # The benchmark's line: `-c` and its text, read by both parsers to the same value.
    ours = reading(Command.make_parser, {}, ["-c", "ls /"])
    assert ours[0] == "error"  # `sample` has no -c: the same error from both
    assert ours == reading(click.Command.make_parser, {}, ["-c", "ls /"])
    read = reading(Command.make_parser, {}, ["-bls /", "-m", "x"])
    assert (read[1]["bravo"], read[1]["many"]) == ("ls /", ["x"])
