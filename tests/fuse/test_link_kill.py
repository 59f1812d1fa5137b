"""kill -9 of the mount in the middle of ``link(2)``: after a restart the branch holds the file's old names or
its new ones, never a half link (issue 40).  A link stages every name's entry (the group's, the new name's) in
one compare-and-set transaction; ``paused_mount.py`` stops the mount before it, inside it (the group's first
row written, or the staging file listed, nothing committed) and after it, and the test kills it there, then
reads the branch through a fresh mount and another App."""

from __future__ import annotations

import errno
import os
import signal
import sys
import threading

import pytest

from lakemount.app import App
from lakemount.catalog.links import group_of, members, with_group
from tests.fuse.conftest import REPO
from tests.fuse.mounting import env_for, needs_fuse, start, stop, wait_for

pytestmark = needs_fuse


@pytest.mark.parametrize(("staging", "where"), [
    ("sql", "link-before"), ("sql", "link-mid"), ("sql", "link-after"), ("lsm", "link-mid"), ("lsm", "link-after"),
])
def test_kill_9_during_a_link_leaves_the_old_names_or_the_new_never_half(
    app: App, home: str, tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch, staging: str, where: str,
) -> None:
    entry = app.catalog.put(REPO, "main", "f", b"linked bytes")
    shared = with_group(entry, "0123456789abcdef", ("f", "g"))
    app.catalog.apply(REPO, "main", [("f", shared), ("g", shared)])
    app.catalog.commit(REPO, "main", "a file of two names")
    monkeypatch.setenv("LAKEMOUNT_STAGING_BACKEND", staging)  # the mounts and the App that reads after the kill
    env = env_for(home)
    base = os.fspath(tmp_path)
    mp, marker = os.path.join(base, "mnt"), os.path.join(base, "reached")
    script = os.path.join(os.path.dirname(__file__), "paused_mount.py")
    m = start(home, mp, command=lambda fd: [sys.executable, script, mp, where, marker, str(fd)], env=env)
    errors: list[int | None] = []
    try:
        main = f"{mp}/{REPO}/main"
        assert os.stat(f"{main}/g").st_nlink == 2

        def link() -> None:
            try:
                os.link(f"{main}/f", f"{main}/h")
            except OSError as exc:
                errors.append(exc.errno)

        linking = threading.Thread(target=link)
        linking.start()
        assert wait_for(lambda: os.path.exists(marker), timeout=60), f"the link never reached {where}"
        with open(marker) as f:
            assert int(f.read()) == m.proc.pid
        os.kill(m.proc.pid, signal.SIGKILL)
        m.proc.wait(30)
        assert m.proc.returncode == -signal.SIGKILL
        linking.join(60)
        assert not linking.is_alive(), "link(2) never returned after the mount died"
        assert errors and errors[0] in (errno.ENOTCONN, errno.ECONNABORTED, errno.EIO), errors  # the kill hit it
    finally:
        stop(m)
    want = ["f", "g", "h"] if where == "link-after" else ["f", "g"]
    other = App.from_config()  # another process's view: fresh caches, the rows as the kill left them
    found = other.catalog.get_optional(REPO, "main", "f")
    assert found is not None
    assert list(members(found, "f", lambda n: other.catalog.get_optional(REPO, "main", n))) == want
    assert group_of(found) == group_of(shared)._replace(names=tuple(want))  # type: ignore[union-attr]
    assert [other.catalog.get_optional(REPO, "main", n) for n in want] == [found] * len(want)
    assert (other.catalog.get_optional(REPO, "main", "h") is None) == ("h" not in want)
    again = start(home, os.path.join(base, "mnt2"), env=env)
    try:
        main = f"{again.mountpoint}/{REPO}/main"
        stats = [os.stat(f"{main}/{n}") for n in want]
        assert {(s.st_ino, s.st_nlink) for s in stats} == {(stats[0].st_ino, len(want))}
        for name in want:
            with open(f"{main}/{name}", "rb") as data:
                assert data.read() == b"linked bytes"
        assert os.path.exists(f"{main}/h") == ("h" in want)
        # The branch takes the next link as if nothing happened.
        os.link(f"{main}/g", f"{main}/k")
        assert os.stat(f"{main}/f").st_nlink == len(want) + 1
    finally:
        stop(again)
    other.catalog.commit(REPO, "main", "after the kill", allow_empty=True)
    kept = other.catalog.get_optional(REPO, "main@", "k")
    assert kept is not None and group_of(kept).names == tuple(sorted([*want, "k"]))  # type: ignore[union-attr]
