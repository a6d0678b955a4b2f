"""The shell's commands that change bookmarks: star, visit, tag, untag, mv, cp, edit, rm,
trash, undo. Bulk ones act on every bookmark of the directory after asking."""

import os
import shlex

from marks import clock, vfs
from marks.exceptions import MarksError
from marks.shell.lexer import ShellError
from marks.shell.session import EDITABLE, HELP, Base, _line, command


class Changing(Base):
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
