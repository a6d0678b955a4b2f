"""The shell's commands that move around and look: ls, cd, pwd, which, find, grep, recent,
cat, file, stat, neighbors. They change nothing."""

import re
from typing import TYPE_CHECKING

from marks import clock, limits, vfs
from marks.listing import Entry
from marks.shell.lexer import ShellError
from marks.shell.session import FIELDS, Base, _line, _show, command

if TYPE_CHECKING:  # the health service loads only when a command needs it (start-up time)
    from marks.health import Health


class Reading(Base):
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
            names = None if long else self.s.fs.names(location)
            if names is not None:  # /tags, /domains: their lines as one text
                if names:
                    self.out(names)
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
