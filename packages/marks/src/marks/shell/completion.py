"""Tab completion: commands and aliases, paths, tags, and field names."""

import shlex
from collections.abc import Iterator

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

from marks import vfs
from marks.shell.session import EDITABLE, FIELDS, HELP, Session

PATH_COMMANDS = {"cd", "ls", "stat", "file", "which", "cat", "rm", "star", "visit"}
TAG_COMMANDS = {"tag", "untag", "mv", "cp"}


class ShellCompleter(Completer):
    def __init__(self, session: Session) -> None:
        self.session = session

    def get_completions(
        self, document: Document, complete_event: CompleteEvent | None
    ) -> Iterator[Completion]:
        text = document.text_before_cursor
        try:
            words = shlex.split(text)
        except ValueError:
            words = text.split()
        if text.endswith(" ") or not words:
            words.append("")
        current = words[-1]
        if len(words) == 1:
            names = sorted({*HELP, *self.session.aliases, "exit"})
            yield from (Completion(n, -len(current)) for n in names if n.startswith(current))
            return
        name = words[0]
        if name in TAG_COMMANDS and not (name == "cp" and len(words) > 2):
            yield from self._tags(current)
        elif name in ("edit",) and len(words) == 2:
            yield from (Completion(f, -len(current)) for f in EDITABLE if f.startswith(current))
        elif name == "grep" and len(words) == 3:
            yield from (Completion(f, -len(current)) for f in FIELDS if f.startswith(current))
        elif name == "help":
            yield from (Completion(n, -len(current)) for n in sorted(HELP) if n.startswith(current))
        elif name in PATH_COMMANDS or name == "cat":
            yield from self._paths(current, fields=name == "cat")

    def _tags(self, prefix: str) -> Iterator[Completion]:
        for tag in self.session.library.tag_names(prefix):
            yield Completion(tag, -len(prefix))

    def _paths(self, word: str, fields: bool = False) -> Iterator[Completion]:
        directory, _, partial = word.rpartition("/")
        base = directory + "/" if directory or word.startswith("/") else ""
        try:
            location = self.session.fs.locate(
                self.session.cwd, directory or ("/" if word.startswith("/") else ".")
            )
        except (vfs.PathError, Exception):
            return
        if location.is_bookmark:
            names = list(FIELDS)
        else:
            listing = self.session.fs.listing(location)
            names = [e.name + ("/" if e.is_dir else "") for e in listing.entries]
            if fields and not directory:
                names = [*names, *FIELDS]
        for name in names:
            if name.startswith(partial):
                yield Completion(base + name, -len(word))
