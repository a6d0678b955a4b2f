"""The shell's commands: each a thin call into `marks.library` or `marks.listing`.

Commands act on the current location: inside a bookmark they act on it; inside a directory,
bulk ones act on its bookmarks after asking. Every failure is a ShellError (one line).
"""

import datetime as dt
import os
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from marks import clock, limits, vfs
from marks.exceptions import MarksError
from marks.library import Library
from marks.listing import Entry, Filesystem
from marks.printable import escape
from marks.rows import NAMES
from marks.shell.lexer import Invocation, ShellError
from marks.wire import Bookmark

if TYPE_CHECKING:  # the health service loads only when a command needs it (start-up time)
    from marks.health import Health

FIELDS = (*NAMES[1:], "id")  # what `ls` shows in a bookmark: its fields, the id last
EDITABLE = ("title", "description", "url", "tags")
HELP: dict[str, tuple[str, str]] = {}  # name -> (usage, summary), filled by @command


Handler = Callable[["Commands", list[str]], None]


def command(usage: str, summary: str) -> Callable[[Handler], Handler]:
    def register(function: Handler) -> Handler:
        HELP[function.__name__.removeprefix("do_").replace("_", "-")] = (usage, summary)
        return function

    return register


@dataclass
class Session:
    """What a shell remembers between commands."""

    library: Library
    write: Callable[[str], None]
    confirm: Callable[[str], bool | None]  # None: nobody can be asked (stdin is no terminal)
    now: Callable[[], dt.datetime] = clock.now
    cwd: str = "/"
    previous: str = "/"
    aliases: dict[str, str] = field(default_factory=dict)
    save_aliases: Callable[[dict[str, str]], None] = lambda aliases: None
    history: Callable[[], list[str]] = list
    edit_text: Callable[[str, str], str] | None = None
    config: dict[str, Any] = field(default_factory=dict)  # the user's settings (health rules)
    notify: Callable[[str], None] = lambda text: None  # a remark beside the output (CLI: stderr)
    noted: set[str] = field(default_factory=set)  # remarks made already: each is made once
    fs: Filesystem = field(init=False)

    def __post_init__(self) -> None:
        self.fs = Filesystem(self.library, self.now)


class Commands:
    def __init__(self, session: Session) -> None:
        self.s = session

    def run(self, invocation: Invocation) -> None:
        if invocation.name == "!":
            return self.system(invocation.system or "")
        method = getattr(self, "do_" + invocation.name.replace("-", "_"), None)
        if method is None or invocation.name not in HELP:
            raise ShellError(f"{invocation.name}: command not found (try `help`)")
        try:
            method(list(invocation.args))
        except MarksError as error:  # the domain's errors, mapped once here
            raise ShellError(f"{invocation.name}: {error}") from None
        except UnicodeEncodeError:  # a lone surrogate typed or pasted: SQLite cannot store it
            raise ShellError(f"{invocation.name}: the text is not valid Unicode") from None

    # --- helpers ---------------------------------------------------------------------------------

    def out(self, text: str = "") -> None:
        # Titles and descriptions came from pages and files: shown, never obeyed.
        self.s.write(escape(text, keep="\n\t") + "\n")

    def here(self, path: str = ".") -> vfs.Location:
        return self.s.fs.locate(self.s.cwd, path)

    def target(self, args: list[str], name: str) -> Bookmark:
        """The bookmark a single-bookmark command means: an id or path, or the current one."""
        if args:
            spec = args[0]
            if spec.isdigit():
                return self.s.library.get(int(spec))
            location = self.here(spec)
        else:
            location = self.here()
        if location.bookmark_id is None:
            raise ShellError(f"{name}: not in a bookmark (give an id, or cd into one)")
        return self.s.library.get(location.bookmark_id)

    def ask(self, question: str, name: str, force: str = "") -> None:
        """Ask before a bulk or destructive change; like the CLI, refuse when nobody can be
        asked (stdin is not a terminal) unless told to go ahead (`--yes`, or the command's own
        `force` option such as `rm -f`)."""
        answer = self.s.confirm(question)
        if answer is None:
            how = f"{name} {force}, or " if force else ""
            raise ShellError(
                f"{name}: {question} -- not asked (no terminal): use {how}marks --yes shell"
            )
        if not answer:
            raise ShellError(f"{name}: cancelled, nothing changed")

    def many(
        self, location: vfs.Location, verb: str, name: str, force: str | None = None
    ) -> list[int]:
        """The bookmarks a bulk command acts on here, after asking (`force`: the command's
        option that skips the question, "" when given, None when it has none)."""
        ids = self.s.fs.ids(location)
        if not ids:
            raise ShellError(f"{name}: no bookmarks in {location.path}")
        if (len(ids) > 1 or not location.is_bookmark) and force != "":
            self.ask(f"{verb} {len(ids)} bookmark(s) in {location.path}?", name, force or "")
        return ids

    # --- moving around ---------------------------------------------------------------------------

    @command("ls [-l] [-a] [PATH]", "list a directory (-l: details, -a: every bookmark)")
    def do_ls(self, args: list[str]) -> None:
        flags = {a for a in args if a.startswith("-")}
        paths = [a for a in args if not a.startswith("-")] or ["."]
        unknown = {f for f in flags if not set(f[1:]) <= {"l", "a"}}
        if unknown:
            raise ShellError(f"ls: unknown option {sorted(unknown)[0]} (use -l, -a)")
        long, everything = any("l" in f for f in flags), any("a" in f for f in flags)
        for path in paths:
            location = self.here(path)
            if len(paths) > 1:
                self.out(f"{location.path}:")
            if location.bookmark_id is not None:
                self._ls_bookmark(location.bookmark_id, long)
                continue
            listing = self.s.fs.listing(location, everything=everything, counts=long)
            pending = self._unconfirmed(location, listing.entries)
            lines = []
            for entry in listing.entries:
                line = self._entry_line(entry, long)
                if not entry.is_dir and entry.bookmark is not None and entry.bookmark.id in pending:
                    line += "  (not yet confirmed)"
                lines.append(line)
            shown = sum(1 for e in listing.entries if not e.is_dir)
            if listing.bookmarks_total > shown:
                lines.append(f"… and {listing.bookmarks_total - shown} more (ls -a shows all)")
            if lines:  # one write (and one pass of escaping) for 10,000 tags, not one each
                self.out("\n".join(lines))

    def _unconfirmed(self, location: vfs.Location, entries: list[Entry]) -> set[int]:
        """In /broken: the links whose failure is not confirmed by a later check yet."""
        if location.path != "/broken":
            return set()
        ids = [e.bookmark.id for e in entries if not e.is_dir and e.bookmark is not None]
        return self._health().unconfirmed_ids(ids)

    def _entry_line(self, entry: Entry, long: bool) -> str:
        if entry.is_dir:
            count = f" ({entry.count})" if entry.count is not None else ""
            if not long:
                return f"{entry.name}/{count}"
            return f"d {'' if entry.count is None else entry.count:>7}  {entry.name}/"
        b = entry.bookmark
        assert b is not None  # a file entry is a bookmark
        star = "★" if b.starred else " "
        if not long:
            return f"{b.id:>7} {star} {b.title or b.url}"
        return (
            f"- {b.id:>7} {star} {b.visit_count:>4}  {(clock.to_text(b.added) or '')[:10]}  "
            f"{(b.title or '')[:50]:<50}  {b.url}"
        )

    def _ls_bookmark(self, bookmark_id: int, long: bool) -> None:
        bookmark = self.s.library.get(bookmark_id)
        for name in FIELDS:
            self.out(f"{name:>13} = {_show(getattr(bookmark, name))}" if long else name)

    @command("cd [PATH|-]", "change directory (a bookmark id is a directory too)")
    def do_cd(self, args: list[str]) -> None:
        if len(args) > 1:
            raise ShellError("cd: too many arguments")
        path = args[0] if args else "/"
        if path == "-":
            path = self.s.previous
        location = self.here(path)
        self.s.previous, self.s.cwd = self.s.cwd, location.path

    @command("pwd", "print the current directory")
    def do_pwd(self, args: list[str]) -> None:
        self.out(self.s.cwd)

    @command("which ID", "every path where a bookmark appears")
    def do_which(self, args: list[str]) -> None:
        if len(args) != 1 or not args[0].isdigit():
            raise ShellError("which: give one bookmark id")
        for path in self.s.fs.paths_of(int(args[0])):
            self.out(path)

    @command("find QUERY", "ranked full-text search in this directory and below")
    def do_find(self, args: list[str]) -> None:
        if not args:
            raise ShellError('find: give a search (words, "phrases", prefix*, #tag, OR, NOT)')
        from marks.query import quote_words  # the search language loads with `find` only

        location = self.here()
        # The shell removed the person's quotes: put back the phrases they meant.
        hits = self.s.library.search(quote_words(args), fts=True, limit=None)
        if hits.fallback and hits.fallback not in self.s.noted:  # once a session, not per find
            self.s.noted.add(hits.fallback)
            self.s.notify(f"find: {hits.fallback}")
        scope = None if location.path == "/" else set(self.s.fs.ids(location, below=True))
        for hit in hits:
            if scope is None or hit.bookmark.id in scope:
                b = hit.bookmark
                snippet = f"  — {hit.snippet}" if hit.snippet else ""
                self.out(_line(f"{b.id:>7}  {b.title or b.url}{snippet}"))

    @command("grep PATTERN FIELD", "bookmarks here and below whose FIELD matches a regex")
    def do_grep(self, args: list[str]) -> None:
        if len(args) != 2 or args[1] not in FIELDS:
            raise ShellError(f"grep: usage: grep PATTERN FIELD (fields: {', '.join(FIELDS)})")
        try:
            pattern = re.compile(args[0], re.IGNORECASE)
        except re.error as error:
            raise ShellError(f"grep: bad pattern: {error}") from None
        location = self.here()
        for b in self.s.fs.bookmarks_of(location, below=True):
            value = _show(getattr(b, args[1]))
            if pattern.search(value):
                self.out(_line(f"{b.id:>7}  {value}"))

    @command("recent [visited|added|starred] [--limit N]", "the latest activity")
    def do_recent(self, args: list[str]) -> None:
        activity, limit = "visited", limits.RECENT_SHOWN
        rest = list(args)
        while rest:
            word = rest.pop(0)
            if word in ("--limit", "-n") and rest and rest[0].isdigit():
                limit = int(rest.pop(0))
            elif word in vfs.ACTIVITIES:
                activity = word
            else:
                raise ShellError("recent: usage: recent [visited|added|starred] [--limit N]")
        for b in self.s.fs.bookmarks(vfs.activity(activity), limit):
            moment = b.last_visited if activity == "visited" else b.added
            self.out(f"{b.id:>7}  {clock.to_text(moment)}  {b.title or b.url}")

    # --- looking at bookmarks --------------------------------------------------------------------

    @command("cat FIELD | ID[/FIELD]", "print a field of the current bookmark (or all of one)")
    def do_cat(self, args: list[str]) -> None:
        if len(args) != 1:
            raise ShellError("cat: give one field, ID or ID/FIELD")
        spec = args[0]
        head, _, name = spec.rpartition("/")
        if name in FIELDS:
            bookmark = self.target([head] if head else [], "cat")
            self.out(_show(getattr(bookmark, name)))
            return
        if head and (head.isdigit() or self.here(head).is_bookmark):
            raise ShellError(f"cat: no field {name!r} (fields: {', '.join(FIELDS)})")
        bookmark = self.target([spec], "cat")
        self._ls_bookmark(bookmark.id, True)

    @command("file [ID]", "what kind of bookmark this is")
    def do_file(self, args: list[str]) -> None:
        b = self.target(args, "file")
        kind = "PDF document" if b.url.lower().split("?")[0].endswith(".pdf") else "web page"
        scheme = b.url.split(":", 1)[0].lower()
        facts = [
            f"{kind} ({scheme})",
            "starred" if b.starred else "",
            "archived" if b.archived else "",
            f"{len(b.tags)} tag(s)",
            f"visited {b.visit_count} time(s)",
            {None: "never checked", True: "reachable", False: "broken"}[b.reachable],
        ]
        self.out(f"{b.id}: bookmark, " + ", ".join(fact for fact in facts if fact))

    @command("stat [PATH]", "details of a bookmark or a directory")
    def do_stat(self, args: list[str]) -> None:
        location = self.here(args[0] if args else ".")
        if location.bookmark_id is not None:
            self._ls_bookmark(location.bookmark_id, True)
            self._health_line(location.bookmark_id)

            return
        listing = self.s.fs.listing(location)
        self.out(f"    path: {location.path}")
        self.out("    type: directory")
        self.out(f"    dirs: {sum(1 for e in listing.entries if e.is_dir)}")
        self.out(f"   marks: {listing.bookmarks_total}")

    def _health(self) -> "Health":
        """The health service with the user's rules (`health_confirm_hours`), as the CLI uses."""
        from marks.health import Health, options_from_config

        return Health(self.s.library, options_from_config(self.s.config))

    def _health_line(self, bookmark_id: int) -> None:
        last = self._health().last(bookmark_id)
        if last is None:
            self.out(f"{'health':>13} = never checked")
            return
        verdict = last.result + (f" {last.status}" if last.status else "")
        if last.final_url:
            verdict += f" -> {last.final_url}"
        if not last.reachable:
            since = clock.to_text(last.failing_since)
            verdict += f", failing since {since}, " + (
                "confirmed broken" if last.confirmed else "not yet confirmed"
            )
        self.out(f"{'health':>13} = {verdict} (checked {clock.to_text(last.checked_at)})")

    @command("neighbors [ID] [-n N]", "the closest bookmarks in the graph, and why")
    def do_neighbors(self, args: list[str]) -> None:
        from marks.graph.query import neighbours

        limit, rest = 10, list(args)
        if "-n" in rest:
            at = rest.index("-n")
            if at + 1 >= len(rest) or not rest[at + 1].isdigit() or int(rest[at + 1]) < 1:
                raise ShellError("neighbors: -n needs a positive number")
            limit = int(rest[at + 1])
            del rest[at : at + 2]
        b = self.target(rest, "neighbors")
        found = neighbours(self.s.library.store, b.id, limit)
        if not found:
            self.out(f"{b.id} has no neighbours in the graph (`marks graph build` updates it)")
        for n in found:
            self.out(f"{n.id:>7}  {n.weight:.3f}  {n.title or n.url}  ({n.why})")

    # --- changing bookmarks ----------------------------------------------------------------------

    @command("star [ID]", "star or unstar a bookmark")
    def do_star(self, args: list[str]) -> None:
        b = self.target(args, "star")
        changed = self.s.library.update(b.id, starred=not b.starred)
        self.out(f"{changed.id} {'starred' if changed.starred else 'unstarred'}")

    @command("visit [ID] [--open]", "record a visit (and open it in the browser)")
    def do_visit(self, args: list[str]) -> None:
        open_it = "--open" in args
        b = self.s.library.visit(self.target([a for a in args if a != "--open"], "visit").id)
        if open_it:
            import webbrowser

            webbrowser.open(b.url)
        self.out(f"{b.id} visited ({b.visit_count} time(s)): {b.url}")

    @command("tag TAG...", "add tags to this bookmark, or to every bookmark here")
    def do_tag(self, args: list[str]) -> None:
        if not args:
            raise ShellError("tag: give one or more tags")
        ids = self.many(self.here(), "Tag", "tag")
        added = {name: self.s.library.tag_add(name, ids) for name in args}
        if all(count == len(ids) for count in added.values()):
            self.out(f"tagged {len(ids)} bookmark(s) with {', '.join(args)}")
            return
        for name, count in added.items():  # say only what changed, tag by tag
            had = len(ids) - count
            if count == 0:
                self.out(f"{name}: nothing changed, {had} bookmark(s) already had it")
            else:
                already = f", {had} already had it" if had else ""
                self.out(f"tagged {count} bookmark(s) with {name}{already}")

    @command("untag TAG...", "remove tags from this bookmark, or from every bookmark here")
    def do_untag(self, args: list[str]) -> None:
        if not args:
            raise ShellError("untag: give one or more tags")
        ids = self.many(self.here(), "Untag", "untag")
        removed = sum(self.s.library.tag_remove(name, ids) for name in args)
        self.out(f"removed {removed} tag(s)")

    @command("mv OLD-TAG NEW-TAG", "rename a tag and its subtags (asks first)")
    def do_mv(self, args: list[str]) -> None:
        if len(args) != 2:
            raise ShellError("mv: usage: mv OLD-TAG NEW-TAG")
        old, new, affected = self.s.library.rename_preview(*args)
        self.ask(f"Rename {old!r} to {new!r} on {affected} bookmark(s)?", "mv")
        self.s.library.tag_rename(old, new)
        self.out(f"renamed {old!r} to {new!r} on {affected} bookmark(s)")

    @command("cp TAG .|ID|*", "copy a tag onto this bookmark (.), one (ID), or all here (*)")
    def do_cp(self, args: list[str]) -> None:
        if len(args) != 2:
            raise ShellError("cp: usage: cp TAG .|ID|*")
        tag, where = args
        if not self.s.library.has_tag(tag):  # cp copies a tag; it never invents one
            raise ShellError(f"cp: no tag {tag!r} to copy (`tag {tag}` adds a new one)")
        if where == "*":
            ids = self.many(self.here(), "Copy tag to", "cp")
        elif where == ".":
            ids = [self.target([], "cp").id]
        elif where.isdigit():
            ids = [self.s.library.get(int(where)).id]
        else:
            raise ShellError("cp: the target is . (this bookmark), an id, or * (all here)")
        added = self.s.library.tag_copy(tag, ids)
        self.out(f"copied {tag!r} to {added} bookmark(s)")

    @command("edit FIELD [ID]", "edit a field in $EDITOR (or at a prompt)")
    def do_edit(self, args: list[str]) -> None:
        if not args or args[0] not in EDITABLE:
            raise ShellError(f"edit: give a field ({', '.join(EDITABLE)})")
        name = args[0]
        b = self.target(args[1:], "edit")
        current = ", ".join(b.tags) if name == "tags" else str(getattr(b, name))
        new = self._edit(name, current).strip()
        if new == current.strip():
            self.out("unchanged")
            return
        value = (
            [t for t in new.replace("\n", ",").split(",") if t.strip()] if name == "tags" else new
        )
        self.s.library.update(b.id, **{name: value})
        self.out(f"{b.id}: {name} changed")

    def _edit(self, name: str, current: str) -> str:
        import subprocess
        import tempfile

        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
        if not editor:
            if self.s.edit_text is None:
                raise ShellError("edit: set $EDITOR, or use the interactive shell")
            return self.s.edit_text(f"{name}: ", current)
        with tempfile.NamedTemporaryFile("w+", suffix=f"-{name}.txt", delete=False) as handle:
            handle.write(current + "\n")
        try:
            result = subprocess.run([*shlex.split(editor), handle.name], check=False)
            if result.returncode != 0:
                raise ShellError(f"edit: the editor exited with {result.returncode}")
            with open(handle.name) as edited:
                return edited.read()
        finally:
            os.unlink(handle.name)

    @command("rm [-f] [ID|*]", "delete this bookmark, one by id, or all here (asks; -f: do not)")
    def do_rm(self, args: list[str]) -> None:
        force = "-f" in args
        args = [a for a in args if a != "-f"]
        unknown = [a for a in args if a.startswith("-")]
        if unknown or len(args) > 1:
            raise ShellError(f"rm: usage: rm [-f] [ID|*] (not {' '.join(unknown or args)})")
        if args == ["*"]:
            ids = self.many(self.here(), "Delete", "rm", "" if force else "-f")
        else:
            b = self.target(args, "rm")
            if not force:
                self.ask(f"Delete {b.id} ({b.title or b.url})?", "rm", "-f")
            ids = [b.id]
        deleted = self.s.library.delete(ids)
        if self.here_missing():
            self.s.cwd = vfs.parent(self.s.cwd)
        self.out(f"deleted {deleted} bookmark(s)")

    @command(
        "trash [list | restore ID... | empty [-f] [--older-than DAYS]]",
        "deleted bookmarks: list them, put them back, or forget them for good",
    )
    def do_trash(self, args: list[str]) -> None:
        from marks import trash

        verb, rest = (args[0], args[1:]) if args else ("list", [])
        if verb == "list" and not rest:
            found = trash.entries(self.s.library)
            for entry in found:
                when = (clock.to_text(entry.deleted_at) or "")[:16].replace("T", " ")
                self.out(_line(f"{entry.id:>7}  {when}  {entry.title or entry.url}"))
            if not found:
                self.out("the trash is empty")
        elif verb == "restore" and rest and all(a.isdigit() for a in rest):
            restored = trash.restore(self.s.library, [int(a) for a in rest])
            for note in trash.notes(restored):
                self.out(note)
            self.out(f"restored {len(restored)} bookmark(s)")
        elif verb == "empty":
            self._trash_empty(rest)
        else:
            raise ShellError(f"trash: usage: {HELP['trash'][0]}")

    def _trash_empty(self, args: list[str]) -> None:
        from marks import trash

        force = "-f" in args
        rest = [a for a in args if a != "-f"]
        days = None
        if rest:
            if len(rest) != 2 or rest[0] != "--older-than" or not rest[1].isdigit():
                raise ShellError(f"trash: usage: {HELP['trash'][0]}")
            days = int(rest[1])
        if not force:
            what = "all" if days is None else f"deleted more than {days} day(s) ago"
            self.ask(f"Empty the trash ({what})? This cannot be undone.", "trash", "empty -f")
        self.out(f"removed {trash.empty(self.s.library, days)} bookmark(s) for good")

    @command("undo", "undo the last delete, tag rename/merge/delete, bulk tagging or edit")
    def do_undo(self, args: list[str]) -> None:
        from marks import trash

        if args:
            raise ShellError("undo: takes no arguments (run it again for the change before)")
        report = trash.undo(self.s.library)
        for note in report.notes:
            self.out(note)
        self.out(report.message)

    def here_missing(self) -> bool:
        try:
            self.here()
        except MarksError:
            return True
        return False

    # --- the shell itself ------------------------------------------------------------------------

    @command("help [COMMAND]", "list commands, or explain one")
    def do_help(self, args: list[str]) -> None:
        if args:
            if args[0] not in HELP:
                raise ShellError(f"help: no command {args[0]!r}")
            usage, summary = HELP[args[0]]
            self.out(f"{usage}\n  {summary}")
            return
        width = max(len(usage) for usage, _ in HELP.values())
        for name in sorted(HELP):
            usage, summary = HELP[name]
            self.out(f"  {usage:<{width}}  {summary}")
        self.out("  !COMMAND  run a system command; exit or Ctrl-D leaves")

    @command("history", "the commands you typed, kept between sessions")
    def do_history(self, args: list[str]) -> None:
        for number, line in enumerate(self.s.history(), 1):
            self.out(f"{number:>5}  {line}")

    @command("clear", "clear the screen")
    def do_clear(self, args: list[str]) -> None:
        self.s.write("\x1b[2J\x1b[H")

    @command("alias [NAME=VALUE]", "define or list aliases (kept in the config file)")
    def do_alias(self, args: list[str]) -> None:
        if not args:
            for name, value in sorted(self.s.aliases.items()):
                self.out(f"alias {name}={shlex.quote(value)}")
            return
        for spec in args:
            name, sep, value = spec.partition("=")
            if not sep or not re.fullmatch(r"[A-Za-z_][\w-]*", name) or not value.strip():
                raise ShellError("alias: usage: alias NAME='COMMAND ARGS'")
            self.s.aliases[name] = value
        self.s.save_aliases(self.s.aliases)

    @command("unalias NAME", "forget an alias")
    def do_unalias(self, args: list[str]) -> None:
        for name in args:
            if self.s.aliases.pop(name, None) is None:
                raise ShellError(f"unalias: no alias {name}")
        self.s.save_aliases(self.s.aliases)

    @command("tutorial", "a short guided tour")
    def do_tutorial(self, args: list[str]) -> None:
        from marks.shell.tutorial import TEXT

        self.out(TEXT.strip())

    def system(self, text: str) -> None:
        # The person typed a command for their own system shell, as `!` means in every shell.
        import subprocess

        result = subprocess.run(text, shell=True, check=False, capture_output=True, text=True)  # noqa: S602
        self.s.write(result.stdout + result.stderr)
        if result.returncode != 0:
            raise ShellError(f"!: exit status {result.returncode}")


def _line(text: str) -> str:
    """One output line per bookmark, whatever line breaks its title or snippet holds."""
    return "".join(" " if ch != " " and ch.isspace() else ch for ch in text)


def _show(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return ", ".join(value)
    if isinstance(value, dt.datetime):
        return clock.to_text(value) or ""
    return str(value)
