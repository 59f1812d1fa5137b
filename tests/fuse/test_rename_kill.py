"""kill -9 of the mount in the middle of a large directory rename: the old name whole before, the new name
whole after, never half (issue 40).  The rename is one move record swapped into the branch row, so there is
no "half": these tests kill the mount at the two sides of that swap (``paused_mount.py`` stops it there)
and read the branch from another App, then commit it."""

from __future__ import annotations

import errno
import os
import signal
import sys
import threading

import pytest

from lakemount.app import App
from lakemount.catalog.model import Entry, prefix_end
from tests.fuse.conftest import REPO
from tests.fuse.mounting import needs_fuse, reap, start, stop, wait_for

pytestmark = needs_fuse

# The rename's cost does not depend on the size (one move record); the suite renames 20,000 files and
# RENAME_KILL_FILES=1000000 runs the million once by hand (docs/TESTING.md).
N = int(os.environ.get("RENAME_KILL_FILES", "20000"))


def keys_under(app: App, ref: str, prefix: bytes) -> list[bytes]:
    return [k for k, _v in app.catalog.scan_records(REPO, ref, prefix, prefix_end(prefix))]


@pytest.mark.parametrize("where", ["before", "after"])
def test_kill_9_during_a_large_directory_rename_leaves_one_whole_name(
    app: App, home: str, tmp_path: os.PathLike[str], where: str
) -> None:
    real = app.catalog.put(REPO, "main", "top/d/real", b"real bytes")
    shared = Entry(real.address, real.size, real.etag, real.mtime_ns).value()
    names = sorted([b"top/d/real", *(b"top/d/p%02d/f%06d" % (i // 1000, i) for i in range(N - 1))])
    app.catalog.stage_records(REPO, "main", [(k, shared) for k in names if k != b"top/d/real"])
    app.catalog.commit(REPO, "main", "a large directory")
    base = os.fspath(tmp_path)
    mp, marker = os.path.join(base, "mnt"), os.path.join(base, "reached")
    script = os.path.join(os.path.dirname(__file__), "paused_mount.py")
    m = start(home, mp, command=lambda fd: [sys.executable, script, mp, where, marker, str(fd)])
    errors: list[int | None] = []
    try:
        main = f"{mp}/{REPO}/main"
        assert os.path.isdir(f"{main}/top/d")

        def rename() -> None:
            try:
                os.rename(f"{main}/top/d", f"{main}/e")
            except OSError as exc:
                errors.append(exc.errno)

        renaming = threading.Thread(target=rename)
        renaming.start()
        assert wait_for(lambda: os.path.exists(marker), timeout=60), f"the rename never reached the move ({where})"
        with open(marker) as f:
            assert int(f.read()) == m.proc.pid
        os.kill(m.proc.pid, signal.SIGKILL)
        reap(m)  # aborts the connection if a thread of the killed mount waits in the kernel (runner.abort_connection)
        assert m.proc.returncode == -signal.SIGKILL
        renaming.join(60)
        assert not renaming.is_alive(), "rename(2) never returned after the mount died"
        # The kill hit the rename: the syscall failed with the connection gone.
        assert errors and errors[0] in (errno.ENOTCONN, errno.ECONNABORTED, errno.EIO), errors
    finally:
        stop(m)
    other = App.from_config()  # another process's view: fresh caches, the rows as the kill left them
    old, new = keys_under(other, "main", b"top/d/"), keys_under(other, "main", b"e/")
    if where == "before":
        assert (old, new) == (names, [])
    else:
        assert (old, new) == ([], [b"e/" + k[len(b"top/d/"):] for k in names])
    assert other.catalog.get_optional(REPO, "main", "top/") is not None  # the old parent kept a marker
    other.catalog.commit(REPO, "main", "after the kill", allow_empty=True)
    assert keys_under(other, "main@", b"top/d/") == old and keys_under(other, "main@", b"e/") == new
    entry = other.catalog.get_optional(REPO, "main@", "e/real" if new else "top/d/real")
    assert entry is not None and other.catalog.read(other.catalog.repository(REPO), entry) == b"real bytes"
