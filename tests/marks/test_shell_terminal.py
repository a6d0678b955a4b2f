"""The shell as a person uses it: a real pseudo-terminal, keys, Tab, Ctrl-C, history."""

import os

import pexpect
import pytest

from marks.library import Library
from marks.store import Store
from support.marksrun import MARKS

PROMPT = r"marks:(/[^>]*)>"


@pytest.fixture
def filled(db_path):
    library = Library(Store(db_path))
    library.add("https://python.org/", title="Python", tags=["dev/python"])
    library.add("https://rust-lang.org/", title="Rust", tags=["dev/rust"], starred=True)
    library.store.close()
    return db_path


def spawn(db_path, tmp_path) -> pexpect.spawn:
    env = {
        **os.environ,
        "TERM": "xterm",
        "PROMPT_TOOLKIT_NO_CPR": "1",
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "COLUMNS": "100",
        "LINES": "40",
    }
    child = pexpect.spawn(
        MARKS,
        ["--db", str(db_path), "shell"],
        env=env,
        encoding="utf-8",
        timeout=15,
        dimensions=(40, 100),
    )
    child.expect("`help` lists commands")
    child.expect(PROMPT)
    return child


def test_typing_completion_ctrl_c_and_exit(filled, tmp_path):
    child = spawn(filled, tmp_path)
    child.sendline("ls")
    child.expect(r"bookmarks/ \(2\)")
    child.expect(r"starred/ \(1\)")
    child.expect(PROMPT)
    child.send("cd ta")
    child.send("\t")  # completes the directory name: the screen gains the rest of it
    child.expect("gs/")
    child.send("\r")
    child.expect(r"marks:/tags>")
    child.send("cd de\t")
    child.expect("v/")
    child.send("\r")
    child.expect(r"marks:/tags/dev>")
    child.sendline("ls")
    child.expect("python/")
    child.expect(PROMPT)
    child.send("half-typed line")
    child.sendcontrol("c")  # abandons the line; the shell stays
    child.expect(PROMPT)
    child.sendline("nosuch")
    child.expect("nosuch: command not found")
    child.expect(PROMPT)
    child.sendline("pwd")
    child.expect("/tags/dev")
    child.expect(PROMPT)
    child.sendline("exit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_confirmation_at_the_prompt_and_ctrl_d(filled, tmp_path):
    child = spawn(filled, tmp_path)
    child.sendline("rm 1")
    child.expect(r"Delete 1 \(Python\)\? \[y/N\]")
    child.sendline("n")
    child.expect("cancelled")
    child.expect(PROMPT)
    child.sendline("rm 1")
    child.expect(r"\[y/N\]")
    child.sendline("y")
    child.expect("deleted 1 bookmark")
    child.expect(PROMPT)
    child.sendcontrol("d")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_history_is_kept_between_sessions(filled, tmp_path):
    child = spawn(filled, tmp_path)
    for line in ("cd /starred", "ls", "pwd"):
        child.sendline(line)
        child.expect(PROMPT)
    child.sendline("exit")
    child.expect(pexpect.EOF)
    assert (tmp_path / "state" / "marks" / "history").exists()
    again = spawn(filled, tmp_path)
    again.sendline("history")
    again.expect(r"1  cd /starred")
    again.expect(r"2  ls")
    again.expect(r"3  pwd")
    again.expect(PROMPT)
    again.send("\x1b[A")  # the up arrow brings back the last line
    again.expect("history")
    again.sendline("")
    again.expect(PROMPT)
    again.sendline("exit")
    again.expect(pexpect.EOF)


def test_one_shot_mode_as_a_subprocess(filled, tmp_path):
    import subprocess

    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    run = lambda *args, **kw: subprocess.run(  # noqa: E731
        [MARKS, "--db", str(filled), "shell", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        **kw,
    )
    done = run("-c", "cd /tags/dev/python; ls")
    assert done.returncode == 0 and done.stdout.split()[0] == "1"
    # stdin is no terminal: nothing is asked and nothing deleted without -f, as in the CLI
    refused = run("-c", "rm 2", input="yes\n")
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr == (
        "marks: rm: Delete 2 (Rust)? -- not asked (no terminal): use rm -f, or marks --yes shell\n"
    )
    assert run("-c", "ls /bookmarks").stdout.split()[::3] == ["2", "1"]
    accepted = run("-c", "rm -f 2")
    assert accepted.returncode == 0 and accepted.stdout == "deleted 1 bookmark(s)\n"
    failing = run("-c", "cd /nowhere; pwd")
    assert failing.returncode == 1 and failing.stdout == "/\n"
    assert failing.stderr == "marks: cd: no such directory: /nowhere\n"
    run("-c", "alias ll='ls -l'")
    assert "ll" in (tmp_path / "config" / "marks" / "config.toml").read_text()
    assert run("-c", "ll /tags").stdout.startswith("d")


def test_rm_in_one_shot_mode_asks_on_a_terminal(filled, tmp_path):
    env = {**os.environ, "TERM": "xterm", "XDG_CONFIG_HOME": str(tmp_path / "config")}
    child = pexpect.spawn(
        MARKS,
        ["--db", str(filled), "shell", "-c", "rm 1; rm 2; ls /bookmarks"],
        env=env,
        encoding="utf-8",
        timeout=15,
    )
    child.expect(r"Delete 1 \(Python\)\? \[y/N\] ")
    child.sendline("n")
    child.expect("rm: cancelled, nothing changed")
    child.expect(r"Delete 2 \(Rust\)\? \[y/N\] ")
    child.sendline("y")
    child.expect("deleted 1 bookmark\\(s\\)")
    child.expect(r"\s+1\s+Python")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 1  # one command on the line failed (was cancelled)


def test_history_of_the_interactive_shell_in_one_shot_mode(filled, tmp_path):
    import subprocess

    child = spawn(filled, tmp_path)
    # each command's own effect, not just a prompt (prompt-toolkit redraws it while typing)
    for line, effect in (("pwd", r"/\r\n"), ("cd /tags", r"marks:/tags>"), ("ls", "dev/")):
        child.sendline(line)
        child.expect(effect)
    child.expect(r"marks:/tags>")
    child.sendcontrol("d")
    child.expect(pexpect.EOF)
    child.close()
    shown = subprocess.run(
        [MARKS, "--db", str(filled), "shell", "-c", "history"],
        capture_output=True,
        text=True,
        env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")},
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    assert [line.split(None, 1) for line in shown.stdout.splitlines()] == [
        ["1", "pwd"],
        ["2", "cd /tags"],
        ["3", "ls"],
    ]
