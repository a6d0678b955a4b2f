"""How a server takes the host uids of its job slots (sandbox/ids.py): never an id that another
server on the host holds, that the user database names, or outside the uid range."""

import pytest

from jobrunner.sandbox.ids import DEFAULT_BASE, JobIds, NoFreeIds


def test_two_servers_on_one_host_never_share_an_id(tmp_path):
    first = JobIds.claim(tmp_path, DEFAULT_BASE, 2)
    second = JobIds.claim(tmp_path, DEFAULT_BASE, 2)  # another open file: its locks conflict
    taken = [first.take(), first.take()], [second.take(), second.take()]
    assert taken == ([DEFAULT_BASE, DEFAULT_BASE + 1], [DEFAULT_BASE + 2, DEFAULT_BASE + 3])
    first.release()  # a server that stops (or dies) lets its ids go
    third = JobIds.claim(tmp_path, DEFAULT_BASE, 1)
    assert third.take() == DEFAULT_BASE
    second.release()
    third.release()


def test_ids_of_the_user_database_are_skipped(tmp_path):
    # 65534 is `nobody` (and `nogroup`) on every Linux system.
    claimed = JobIds.claim(tmp_path, 65534, 1)
    assert claimed.take() == 65535
    claimed.release()


def test_a_slot_gives_its_id_back_for_the_next_job(tmp_path):
    claimed = JobIds.claim(tmp_path, DEFAULT_BASE, 1)
    uid = claimed.take()
    assert claimed.free == 0
    claimed.give_back(uid)
    assert claimed.take() == uid
    claimed.release()


@pytest.mark.parametrize("base", [0, 2**31 - 1, 2**32])
def test_a_base_outside_the_range_is_refused(tmp_path, base):
    with pytest.raises(NoFreeIds, match="job uid base"):
        JobIds.claim(tmp_path, base, 1)


def test_the_base_is_a_setting(tmp_path, monkeypatch):
    from jobrunner.config import load

    assert load().jail_uid_base == DEFAULT_BASE
    monkeypatch.setenv("JOBRUNNER_JAIL_UID_BASE", "3000000")
    assert load().jail_uid_base == 3_000_000
    config = tmp_path / "jobrunner.toml"
    config.write_text("jail_uid_base = 4000000\n")
    monkeypatch.delenv("JOBRUNNER_JAIL_UID_BASE")
    assert load(config, jail_uid_base=5_000_000).jail_uid_base == 5_000_000
    assert load(config).jail_uid_base == 4_000_000


def test_ids_a_subordinate_file_delegates_are_skipped_unless_rootless(tmp_path):
    # Root: /etc/subuid names host ids, which a job must not share with a user's containers.
    # Rootless: the server's namespace maps ids 1..N for itself, and those files name host ids
    # (a container's root has `root:1:65535` there): they must not empty its range.
    subuid = tmp_path / "subuid"
    subuid.write_text("root:1:65535\n")
    with pytest.raises(NoFreeIds, match="only 0 of the 2"):
        JobIds.claim(tmp_path / "a", 1, 2, 65535, (subuid,))
    claimed = JobIds.claim(tmp_path / "b", 1, 2, 65535, ())
    assert claimed.free == 2
    claimed.release()
