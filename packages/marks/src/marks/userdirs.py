"""The user's directories for marks' config, data, state and cache: XDG on Linux, platformdirs
elsewhere.

On Linux the rules are the XDG Base Directory specification's, as platformdirs 4.14 applies them:
`$XDG_CONFIG_HOME/marks` when the variable holds an absolute path (an empty or relative value is
ignored, as the specification says), else `~/.config/marks`, the home directory being `$HOME` when
it is absolute and the account's (`pwd`) otherwise. Computing them here spares every command
importing platformdirs' Unix module, which loads `tempfile`, `shutil` and `random` and compiles
regular expressions for directories marks never asks for (about 25 million instructions, a fifth
of what a short command costs above the interpreter and its libraries). Android, macOS, Windows
and the other Unixes keep platformdirs' own rules. `tests/marks/test_userdirs.py` checks these
paths against platformdirs' for random environments.
"""

import os
import sys

APP = "marks"

# Each directory: its XDG variable and its default under the home directory.
XDG = {
    "config": ("XDG_CONFIG_HOME", "~/.config"),
    "data": ("XDG_DATA_HOME", "~/.local/share"),
    "state": ("XDG_STATE_HOME", "~/.local/state"),
    "cache": ("XDG_CACHE_HOME", "~/.cache"),
}


def _plain_linux() -> bool:
    """Linux, and not an Android app (platformdirs gives those the app's own folders)."""
    if sys.platform != "linux" or hasattr(sys, "getandroidapilevel"):
        return False
    return not (
        os.environ.get("ANDROID_DATA") == "/data" and os.environ.get("ANDROID_ROOT") == "/system"
    )


def _home_based(default: str) -> str:
    """`default` (`~/...`) under the home directory: `$HOME` if absolute, else the account's."""
    home = os.environ.get("HOME")
    if home is not None and not home.startswith("/"):  # set but empty or relative: not trusted
        expanded = default
        try:
            import pwd

            expanded = pwd.getpwuid(os.getuid()).pw_dir.rstrip("/") + default[1:] or "/"
        except (ImportError, KeyError):
            pass
    else:
        expanded = os.path.expanduser(default)
    if not expanded.startswith("/"):
        raise RuntimeError(
            f"could not determine the home directory for {default!r}, "
            "set an absolute HOME or XDG variable"
        )
    return expanded


def user_dir(kind: str) -> str:
    """marks' own directory of `kind` (config, data, state or cache); not created here."""
    if not _plain_linux():
        import platformdirs

        return str(getattr(platformdirs, f"user_{kind}_dir")(APP))
    variable, default = XDG[kind]
    base = os.environ.get(variable, "")
    if not base.startswith("/"):
        base = _home_based(default)
    return os.path.join(base, APP)
