"""marks' directories are platformdirs' own, without importing platformdirs on Linux.

`marks.userdirs` computes the XDG directories itself (platformdirs' Unix module costs a short
command about 25 million instructions). These tests hold it to the installed platformdirs for
random environments: XDG variables absolute, relative, empty, with `~` or unset; HOME absolute,
`/`, relative, empty or unset.
"""

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

import platformdirs
from hypothesis import example, given, settings
from hypothesis import strategies as st

from marks import settings as marks_settings
from marks.userdirs import XDG, user_dir

VARIABLES = [variable for variable, _ in XDG.values()]
segment = st.text(alphabet="abc.-_ ~é", min_size=1, max_size=6)
value = st.one_of(
    st.none(),  # unset
    st.just(""),
    st.just("/"),
    st.builds(lambda parts: "/" + "/".join(parts), st.lists(segment, max_size=3)),
    st.builds(lambda parts: "/".join(parts), st.lists(segment, min_size=1, max_size=3)),
    st.builds(lambda parts: "//" + "/".join(parts) + "/", st.lists(segment, max_size=2)),
    st.sampled_from(["~", "~/x", " /abs", "./rel", "rel/", "/abs/"]),
)


@contextlib.contextmanager
def environment(values: dict[str, str | None]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    try:
        for name, text in values.items():
            if text is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = text
        yield
    finally:
        for name, text in saved.items():
            if text is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = text


def outcome(function, *args) -> str:
    try:
        return function(*args)
    except RuntimeError as error:  # no home directory to be found: both must say so
        return f"RuntimeError: {error}"


@settings(max_examples=300, deadline=None)
@given(st.fixed_dictionaries({name: value for name in [*VARIABLES, "HOME"]}))
@example({"HOME": "", **dict.fromkeys(VARIABLES, "")})
@example({"HOME": "relative/home", **dict.fromkeys(VARIABLES, "relative")})
@example({"HOME": None, **dict.fromkeys(VARIABLES)})
@example({"HOME": "/", **dict.fromkeys(VARIABLES)})
@example({"HOME": "/home/x//", **dict.fromkeys(VARIABLES, "/srv/xdg/")})
def test_each_directory_is_the_one_platformdirs_gives(values):
    with environment(values):
        for kind in XDG:
            ours = outcome(user_dir, kind)
            theirs = outcome(getattr(platformdirs, f"user_{kind}_dir"), "marks")
            assert ours == theirs, (kind, values)


def test_the_settings_paths_follow_the_xdg_variables(tmp_path):
    with environment({name: str(tmp_path / name) for name in VARIABLES}):
        assert marks_settings.config_path() == tmp_path / "XDG_CONFIG_HOME/marks/config.toml"
        assert marks_settings.data_dir() == tmp_path / "XDG_DATA_HOME/marks"
        assert marks_settings.state_dir() == tmp_path / "XDG_STATE_HOME/marks"
        assert marks_settings.cache_dir() == tmp_path / "XDG_CACHE_HOME/marks"
    with environment({"HOME": str(tmp_path), **dict.fromkeys(VARIABLES, "not/absolute")}):
        assert marks_settings.config_path() == tmp_path / ".config/marks/config.toml"
        assert marks_settings.data_dir() == tmp_path / ".local/share/marks"


def test_a_command_finds_its_directories_without_platformdirs(tmp_path):
    # The config file is found where XDG says, and platformdirs is never imported on Linux.
    config = tmp_path / "config" / "marks" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('output = "urls"\n')
    script = (
        "import sys\nfrom marks import settings\n"
        "print(settings.load()['output'], 'platformdirs' in sys.modules)"
    )
    shown = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config")},
    ).stdout
    assert shown.split() == ["urls", "False"]
