"""A node's other processes and its mounts' write-back journals (issue 36): what is unstaged, and the wait for it."""

from __future__ import annotations

import logging
import os

import pytest

from lakemount.errors import Unavailable
from lakemount.fuse.journal import Journal
from lakemount.node import unstaged, wait_for_mounts


def journal_of(home: str, slug: str, *, alive: bool) -> Journal:
    """A journal as a mount with pid file ``slug`` keeps it: this process's pid when ``alive``."""
    os.makedirs(os.path.join(home, "run"), exist_ok=True)
    with open(os.path.join(home, "run", f"mount-{slug}.pid"), "w") as f:
        f.write(f"{os.getpid() if alive else 2 ** 22 + 12345}\n")
    return Journal(os.path.join(home, "journal", slug), fsync=False)


def put(journal: Journal, repo: str, branch: str, path: str) -> int:
    return journal.append({"op": "put", "repo": repo, "branch": branch, "path": path, "data": "", "size": 0})


def test_unstaged_counts_a_branchs_records_past_the_last_done(tmp_path: os.PathLike[str]) -> None:
    j = Journal(os.fspath(tmp_path), fsync=False)
    try:
        assert unstaged(j.log_path, "r", "main") == 0
        a = put(j, "r", "main", "a")
        put(j, "r", "other", "x")
        j.append({"op": "apply", "repo": "r", "branch": "main", "changes": [["d/", None]]})
        assert (unstaged(j.log_path, "r", "main"), unstaged(j.log_path, "r", "other"), unstaged(j.log_path, "s", "main")) == (2, 1, 0)
        j.append({"op": "done", "upto": a})
        assert unstaged(j.log_path, "r", "main") == 1
        with open(j.log_path, "ab") as f:
            f.write(b"LMJ1\xff\xff\x00\x00torn")  # a record the mount is writing this moment
        assert unstaged(j.log_path, "r", "main") == 1
    finally:
        j.close()
    assert unstaged(os.path.join(os.fspath(tmp_path), "missing", "log"), "r", "main") == 0


def test_a_commit_waits_for_a_live_mounts_records_and_not_for_a_dead_ones(
    tmp_path: os.PathLike[str], caplog: pytest.LogCaptureFixture,
) -> None:
    home = os.fspath(tmp_path)
    live = journal_of(home, "live", alive=True)
    dead = journal_of(home, "dead", alive=False)
    try:
        last = put(live, "r", "main", "a")
        put(dead, "r", "main", "b")
        slept: list[float] = []

        def sleep(s: float) -> None:  # the mount's pipeline stages the record while the commit waits
            slept.append(s)
            if len(slept) == 3:
                live.append({"op": "done", "upto": last})

        with caplog.at_level(logging.WARNING, logger="lakemount.node"):
            assert wait_for_mounts(home, "", "r", "main", timeout=60, sleep=sleep) == 1
        assert len(slept) == 3  # it waited until the record was done, and no longer
        assert "its mount is not running" in caplog.text and "dead" in caplog.text
        assert wait_for_mounts(home, "", "r", "other", timeout=60, sleep=sleep) == 0
        assert len(slept) == 3
    finally:
        live.close()
        dead.close()


def test_a_commit_is_refused_when_a_live_mounts_records_stay_unstaged(tmp_path: os.PathLike[str]) -> None:
    home = os.fspath(tmp_path)
    live = journal_of(home, "live", alive=True)
    try:
        put(live, "r", "main", "a")
        clock = [0.0]

        def sleep(s: float) -> None:
            clock[0] += s

        with pytest.raises(Unavailable, match=r"still holds 1 write\(s\) to r/main .* after 5s"):
            wait_for_mounts(home, "", "r", "main", timeout=5, sleep=sleep, now=lambda: clock[0])
        assert clock[0] >= 5  # it waited the whole timeout first
    finally:
        live.close()
    assert wait_for_mounts(os.path.join(home, "nowhere"), "", "r", "main", timeout=5) == 0
