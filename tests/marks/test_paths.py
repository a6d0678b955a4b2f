"""marks.paths names files as pathlib does (every command uses it instead of pathlib): the same
text for any path, so the config file, the library file and their messages stay as they were."""

import os
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from marks import paths
from marks.store import Store, StoreError

# Paths built from the parts that pathlib treats specially: slashes (one, two, three), `.`,
# `..`, empty parts, and names with spaces, dots and non-ASCII letters.
PARTS = st.sampled_from(["", "/", "//", "///", ".", "..", "a", "b.db", "é x", ".hidden", "~"])
PATHS = st.lists(PARTS, max_size=8).map("".join)


@settings(max_examples=500, deadline=None)
@given(PATHS)
@example("//a/b")
@example("///a/./b/")
@example("")
def test_tidy_and_parent_are_pathlibs(path):
    assert paths.tidy(path) == str(PurePosixPath(path))
    assert paths.parent(path) == str(PurePosixPath(path).parent)


def test_is_dir_is_pathlibs(tmp_path):
    (tmp_path / "file").write_text("x")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    for name in ["", "file", "missing", "file/below", "loop", "missing/below", "a\0b"]:
        path = tmp_path / name if name else tmp_path
        text = str(path) if "\0" not in name else str(tmp_path) + "/a\0b"
        assert paths.is_dir(text) == Path(text).is_dir(), name


@pytest.mark.parametrize("given", ["{dir}//missing/lib.db", "{dir}/missing/./lib.db/"])
def test_a_library_in_a_missing_directory_is_named_as_before(tmp_path, given):
    # The message names the directory as `Path(...).parent` did.
    path = given.format(dir=tmp_path)
    with pytest.raises(StoreError) as error:
        Store(path)
    assert str(error.value) == (
        f"cannot open {path}: directory {PurePosixPath(path).parent} does not exist"
    )
    assert os.listdir(tmp_path) == []
