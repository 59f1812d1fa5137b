"""The request handlers over the core (``lakemount/fuse/adapter.py``), driven in trio without the kernel."""

from __future__ import annotations

import os
import time

import pyfuse3
import pytest
import trio

from lakemount.fuse.adapter import FuseOperations
from lakemount.fuse.core import FileSystem
from tests.fuse.conftest import REPO
from tests.fuse.pathfs import PathFS

MAIN = f"/{REPO}/main"


def test_a_control_files_write_answers_once_its_kernel_invalidations_are_issued(
    pfs: PathFS, fs: FileSystem, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``echo d/y > .lakefs/reset; ls d`` must not show ``y``: the kernel kept its entry (an entry timeout), and the
    reset queued that entry's invalidation for the background task; the write answers once the task has issued
    it.  The task's thread is made slower than the reply would be without the wait (0.3 s an entry)."""
    issued: list[tuple[object, ...]] = []

    def slow_entry(parent: int, name: bytes) -> None:
        time.sleep(0.3)
        issued.append(("entry", int(parent), bytes(name)))

    monkeypatch.setattr(pyfuse3, "invalidate_entry", slow_entry)
    monkeypatch.setattr(pyfuse3, "invalidate_inode", lambda ino, attr_only=False: issued.append(("inode", int(ino))))
    pfs.mkdir(f"{MAIN}/d")
    pfs.write_file(f"{MAIN}/d/y", b"y\n")
    d_ino = pfs.ino(f"{MAIN}/d")
    pfs.ino(f"{MAIN}/d/y")  # looked up, as the kernel would have before keeping its entry
    while not fs.invalidations.empty():  # what the writes before queued is not this test's
        fs.invalidations.get_nowait()
    fh = pfs.open(f"{MAIN}/.lakefs/reset", os.O_WRONLY)
    ops = FuseOperations(fs)

    async def reset() -> tuple[list[tuple[object, ...]], bool]:
        async with trio.open_nursery() as nursery:
            await nursery.start(ops.invalidate)
            assert await ops.write(fh, 0, b"d/y\n") == 4
            seen, left = list(issued), fs.invalidations.empty()
            nursery.cancel_scope.cancel()
        return seen, left

    seen, nothing_left = trio.run(reset)
    pfs.close(fh)
    assert not pfs.exists(f"{MAIN}/d/y"), "the reset did not happen"
    assert ("entry", d_ino, b"y") in seen, f"the write answered before the kernel forgot d/y: issued by then {seen}"
    assert nothing_left
