"""The `marks` command line: thin commands over the service layer (`marks.library`).

Groups load lazily, so `marks --help` imports neither SQLite nor the formats. `--db`, `--output`
and `--yes` are accepted before or after a group or command. Operation errors print one line on
stderr and exit 1; usage errors exit 2.
"""

import importlib
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

try:  # Click 8.2's parser, which `_Parser` below extends
    from click.parser import _normalize_opt, _OptionParser, _ParsingState
except ImportError:  # a Click laid out otherwise: its own parser, as it is
    _SHORT_OPTIONS_AT_ONCE = False
else:
    _SHORT_OPTIONS_AT_ONCE = True

from marks import __version__

if TYPE_CHECKING:  # imported lazily at run time: `marks --help` needs no SQLite
    from pathlib import Path

    from marks.library import Library
    from marks.plugins import Plugins
    from marks.store import Store

F = TypeVar("F", bound=Callable[..., Any])

OUTPUTS = ("table", "json", "csv", "urls", "plain")
GROUPS = {
    "bookmark": ("marks.cli.bookmark", "Add, list, search, edit and visit bookmarks."),
    "tag": ("marks.cli.tag", "List, tree, rename, add and remove tags."),
    "content": ("marks.cli.content", "Fetch pages' text for search, view it, auto-tag."),
    "snapshot": ("marks.cli.snapshot", "Keep self-contained copies of pages; list, view, prune."),
    "import": ("marks.cli.transfer", "Import bookmarks from files (invalid entries skipped)."),
    "export": ("marks.cli.transfer", "Export every bookmark to a file or stdout."),
    "db": ("marks.cli.db", "Inspect and maintain the database."),
    "config": ("marks.cli.config", "Show and change settings."),
    "plugin": ("marks.cli.plugin", "List, describe, enable and disable plugins."),
    "queue": ("marks.cli.queue", "Keep a reading queue with priorities and progress."),
    "browser": ("marks.cli.browser", "Find browser profiles and import from them."),
    "graph": ("marks.cli.graph", "Build the bookmark graph; neighbours, stats, export."),
    "shell": ("marks.cli.shell", "Browse the library as a filesystem (interactive or -c)."),
    "serve": ("marks.cli.serve", "Run the REST API and the web UI."),
    "trash": ("marks.cli.trash", "Deleted bookmarks: list, restore, empty."),
    "undo": ("marks.cli.trash", "Undo the last destructive change (delete, tag rename...)."),
}


class State:
    """The global options of one command line and what it opened, each on first use.

    A plain class: `dataclasses` would be imported by every command for one constructor."""

    def __init__(self) -> None:
        self.db: str | None = None
        self.output: str | None = None
        self.yes = False
        self._library: Any = None
        self._config: dict | None = None
        self._plugins: Plugins | None = None
        self._store: Store | None = None  # the library's file, closed when the command ends
        self._ending = False  # whether `_end` runs then

    @property
    def config(self) -> dict:
        if self._config is None:
            from marks import settings

            self._config = settings.load()
        return self._config

    @property
    def db_file(self) -> str:
        """The library file: --db, $MARKS_DB, the config's, or the default (as `db_path`)."""
        from marks import paths, settings

        chosen = self.db or os.environ.get("MARKS_DB") or self.config["db"]
        return paths.tidy(os.path.expanduser(chosen)) if chosen else settings.default_db_file()

    @property
    def db_path(self) -> "Path":
        from pathlib import Path

        return Path(self.db_file)

    @property
    def format(self) -> str:
        return self.output or self.config["output"]

    @property
    def plugins(self) -> "Plugins":
        """The command's plugins (discovered on first use); `on_unload` runs when it ends."""
        if self._plugins is None:
            from marks import settings
            from marks.plugins import Plugins

            self._plugins = Plugins(
                enabled=self.config["plugins"],
                report=lambda message: click.echo(f"marks: {message}", err=True),
                index_path=settings.cache_file("plugins.json"),
            )
            self._end_with_command()
        return self._plugins

    @property
    def library(self) -> "Library":
        if self._library is None:
            from marks.library import Library
            from marks.plugins import Context
            from marks.store import Store

            store = Store(self.db_file)
            self._store = store
            self._end_with_command()
            for notice in store.notices:  # e.g. tags merged by a migration: never silent
                click.echo(f"marks: {notice}", err=True)
            self._library = Library(
                store, plugins=self.plugins, trash_days=self.config["trash_days"]
            )
            self.plugins.start(Context(library=self._library, config=self.config))
        return self._library

    def _end_with_command(self) -> None:
        if not self._ending:
            context = click.get_current_context(silent=True)
            if context is not None:
                context.find_root().call_on_close(self._end)
                self._ending = True

    def _end(self) -> None:
        """When the command ends: the plugins' `on_unload` (which may still use the library),
        then the library's file is closed, here rather than whenever the garbage collector
        finds the connection (the program freezes what is left at exit: `marks.program`)."""
        try:
            if self._plugins is not None:
                self._plugins.close()
        finally:
            store, self._store, self._library = self._store, None, None
            if store is not None:
                store.close()


def _remember(name: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if value not in (None, False):
            setattr(ctx.ensure_object(State), name, value)
        return value

    return callback


def _global_options() -> list[click.Option]:
    return [
        click.Option(
            ["--db"],
            metavar="PATH",
            expose_value=False,
            is_eager=True,
            callback=_remember("db"),
            help="Database file [$MARKS_DB, config, XDG data dir].",
        ),
        click.Option(
            ["--output", "-o"],
            type=click.Choice(OUTPUTS),
            expose_value=False,
            is_eager=True,
            callback=_remember("output"),
            help="Output format [table].",
        ),
        click.Option(
            ["--yes", "-y"],
            is_flag=True,
            expose_value=False,
            is_eager=True,
            callback=_remember("yes"),
            help="Answer yes to confirmations.",
        ),
    ]


# Made once and shared by every command: an option holds no state of the command it is in (each
# parse keeps its values in the command's context), and each made anew cost about 60,000
# instructions, three for every group and command (27 for the `bookmark` group alone).
_GLOBAL_OPTIONS = _global_options()


def global_options(function: F) -> F:
    """--db, --output and --yes, usable at every level of the command line."""
    # What `click.option` does with each, in its order (a decorator's list is reversed later).
    params = function.__dict__.setdefault("__click_params__", [])
    params.extend(reversed(_GLOBAL_OPTIONS))
    return function


def state() -> State:
    return click.get_current_context().ensure_object(State)


def confirm(message: str) -> None:
    """Bulk and destructive operations: ask on a terminal, obey --yes, refuse otherwise."""
    from marks.exceptions import MarksError

    if state().yes:
        return
    if not sys.stdin.isatty():
        raise MarksError(f"{message} -- confirmation needed: run again with --yes")
    if not click.confirm(message, default=False, err=True):
        raise click.Abort()


# Click's own words for its help and version options. Click looks each up in `gettext` as it makes
# the option (its messages have no catalogue: they are these), and the first lookup imports
# `locale`: about 5 million instructions of every command, so marks makes the two options itself.
HELP = "Show this message and exit."
VERSION = "Show the version and exit."
_HELP_NAME = "_click_default_help"  # where Click keeps its help option's value: not a parameter's


def _show_help(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(ctx.get_help(), color=ctx.color)
        ctx.exit()


def _show_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(f"marks, version {__version__}", color=ctx.color)
        ctx.exit()


if _SHORT_OPTIONS_AT_ONCE:  # (defined only where Click's parser is the one it extends)

    class _Parser(_OptionParser):
        """Click's parser, but an argument that can only be short options goes to them at once.

        Click tries every argument that starts with `-` as a long option first (`-foo` may be one),
        and a miss makes a `NoSuchOption`, whose message is looked up in `gettext` (importing
        `locale`) and whose "did you mean" imports `difflib`: about 8 million instructions of every
        `shell -c ...`. The exception is then dropped and the argument read as short options. Here
        the same test is made first (the name before any `=` is not a long option, and the argument
        does not start with a two-character prefix such as `--`), and the same short-option reading
        follows; every other argument takes Click's own way."""

        def _process_opts(self, arg: str, state: _ParsingState) -> None:
            name = _normalize_opt(arg.partition("=")[0], self.ctx)
            if name not in self._long_opt and arg[:2] not in self._opt_prefixes:
                self._match_short_opt(arg, state)
            else:
                super()._process_opts(arg, state)


class Command(click.Command):
    """A command whose help option is made as Click makes it, without a `gettext` lookup, whose
    parser spares short options a long-option attempt, and which calls `run`'s `starting` before
    it runs."""

    def make_parser(self, ctx: click.Context) -> "_OptionParser":
        if not _SHORT_OPTIONS_AT_ONCE:
            return super().make_parser(ctx)
        parser = _Parser(ctx)  # Click's `make_parser` with the parser above
        for param in self.get_params(ctx):
            param.add_to_parser(parser, ctx)
        return parser

    def invoke(self, ctx: click.Context) -> Any:
        if _starting and not isinstance(self, click.Group):
            _starting.pop()()
        return super().invoke(ctx)

    def get_help_option(self, ctx: click.Context) -> click.Option | None:
        names = self.get_help_option_names(ctx)
        if not names or not self.add_help_option:
            return None
        if self._help_option is None:  # one object, as Click keeps it (the order of eager options)
            self._help_option = click.Option(
                [*names, _HELP_NAME],
                is_flag=True,
                expose_value=False,
                is_eager=True,
                help=HELP,
                callback=_show_help,
            )
        return self._help_option


class WordsCommand(Command):
    """A command whose arguments may start with `-`: `search python -rust` (NOT rust),
    `config set list_limit -5`.

    Click would read `-rust` as the options -r -u -s -t. Here only the command's own option
    spellings are options; every other argument, whatever it starts with, is an argument (as if
    it came after `--`)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        takes_value: dict[str, bool] = {}
        for param in self.get_params(ctx):
            if isinstance(param, click.Option):
                for name in (*param.opts, *param.secondary_opts):
                    takes_value[name] = not param.is_flag and not param.count
        options: list[str] = []
        words: list[str] = []
        position = 0
        while position < len(args):
            arg = args[position]
            position += 1
            if arg == "--":
                words += args[position:]
                break
            name = arg.split("=", 1)[0] if arg.startswith("--") else arg
            if name in takes_value:
                options.append(arg)
                if takes_value[name] and "=" not in arg and position < len(args):
                    options.append(args[position])
                    position += 1
            elif arg.startswith("--") and len(arg) > 2:
                options.append(arg)  # an unknown long option: Click says so
            else:
                words.append(arg)
        return super().parse_args(ctx, [*options, "--", *words] if words else options)


class Group(Command, click.Group):
    """Every command of a group takes the global options too. `lazy` names commands kept in
    a module of their own ("module:attribute"), imported only when that command runs or help
    lists it: `bookmark list` need not load the link checker's command."""

    command_class = Command

    def __init__(self, *args: Any, lazy: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy or {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy and name not in self.commands:
            module, _, attribute = self.lazy[name].partition(":")
            self.add_command(getattr(importlib.import_module(module), attribute), name)
        return super().get_command(ctx, name)

    def command(self, *args: Any, **kwargs: Any) -> Any:  # Click's overloads, one behaviour
        decorator = super().command(*args, **kwargs)
        return lambda function: decorator(global_options(function))

    def group(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("cls", Group)
        decorator = super().group(*args, **kwargs)
        return lambda function: decorator(global_options(function))


class LazyGroup(Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(GROUPS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in GROUPS:
            return None
        module = importlib.import_module(GROUPS[name][0])
        return getattr(module, name.replace("import", "import_") if name == "import" else name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, text) for name, (_, text) in GROUPS.items()])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    help=VERSION,
    callback=_show_version,
)
@global_options
def cli() -> None:
    """Keep, search and check your bookmarks."""


# What runs once the command line is parsed, just before its command does (`run(starting=...)`).
_starting: list[Callable[[], object]] = []


def run(starting: Callable[[], object] | None = None) -> int:
    """The command line in `sys.argv`, run: its exit status (the program is `marks.program`).
    `starting` is called once the command line is parsed and its group's module loaded, just
    before the command itself runs (not for `--help`, `--version` or a usage error)."""
    from marks.cli.edge import handled

    _starting[:] = [starting] if starting is not None else []
    try:
        return handled(lambda: cli.main(standalone_mode=False, prog_name="marks"))
    finally:
        _starting.clear()


def main() -> None:
    sys.exit(run())
