"""The request handlers over the core (``lakemount/fuse/adapter.py``), driven in trio without the kernel."""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable

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


def test_the_fast_methods_answer_as_the_async_handlers_and_give_back_what_would_await(
    fs_factory: Callable[..., FileSystem]
) -> None:
    """The shim's fast path (kflags.set_fast): a request whose access decision is not cached on a shared mount is
    given back (None: the async handler asks the auth store), a cached refusal is -EACCES, a cached grant is
    answered; an absent name is ENOENT or a negative entry as the async lookup says; a control file's write is
    given back (its answer waits for kernel invalidations); a file's create, write, flush and release are
    answered and the file holds the bytes."""
    from lakemount.fuse.access import MountAccess

    fs = fs_factory(head_ttl=3600)  # no branch head re-check due (I/O) while the test runs
    pfs = PathFS(fs)
    asked: list[tuple[str, str, bool]] = []
    verdicts = {"alice": True, "bob": False}

    def authorize(user: str, action: object, repo: str) -> bool:
        asked.append((user, repo, "write" in str(action).lower()))
        return verdicts[user]

    access = MountAccess({5001: "alice", 5002: "bob"}, authorize, owners=frozenset({os.getuid()}))
    ops = FuseOperations(fs, access=access)
    pfs.mkdir(f"{MAIN}/d")
    pfs.write_file(f"{MAIN}/d/first", b"1\n")  # the directory's first file drops its marker (I/O): not the fast path's
    d = pfs.ino(f"{MAIN}/d")
    me = os.getuid()

    assert ops.fast_create(d, b"a", 0o100644, os.O_WRONLY | os.O_CREAT, 5001, 5001, 1) is None  # undecided
    assert asked == [], "the fast path asked the auth store on the loop"
    assert access.decide(5001, REPO, True) and not access.decide(5002, REPO, True)
    assert ops.fast_create(d, b"b", 0o100644, os.O_WRONLY | os.O_CREAT, 5002, 5002, 1) == -errno.EACCES
    assert not pfs.exists(f"{MAIN}/d/b")

    got = ops.fast_create(d, b"a", 0o100644, os.O_WRONLY | os.O_CREAT, 5001, 5001, 1)
    assert isinstance(got, tuple) and len(got) == 17, got
    ino, fh = got[0], got[14]
    assert got[3] & 0o170000 == 0o100000 and got[1] > 0
    assert ops.fast_write(fh, 0, b"hello\n") == 6
    other = ops.fast_create(d, b"c", 0o100644, os.O_WRONLY | os.O_CREAT, me, me, 1)
    assert isinstance(other, tuple), other
    # Another file open for writing: the save needs a thread (no write-back, not a lone writer), given back,
    # nothing changed; pyfuse3's handler saves it.
    assert ops.fast_flush(fh, 0) is None
    trio.run(ops.flush, fh)
    assert ops.fast_release(fh) == 0
    assert pfs.read_file(f"{MAIN}/d/a") == b"hello\n"
    # The lone writer's close of a new small file (the local store, SQLite): stored and staged here (stop 58).
    assert ops.fast_write(other[14], 0, b"lone\n") == 5
    assert ops.fast_flush(other[14], 0) == 0
    assert ops.fast_release(other[14]) == 0
    assert pfs.read_file(f"{MAIN}/d/c") == b"lone\n"
    catalog = fs.state.catalog
    assert catalog.read(catalog.repository(REPO), catalog.stat(REPO, "main", "d/c")) == b"lone\n"
    assert ops.fast_lookup(d, b"a", me, me, 1)[0] == ino  # type: ignore[index]

    missing = ops.fast_lookup(d, b"nope", me, me, 1)
    assert missing == -errno.ENOENT or (isinstance(missing, tuple) and missing[0] == 0 and missing[1] > 0), missing

    ctl = pfs.open(f"{MAIN}/.lakefs/reset", os.O_WRONLY)
    try:
        assert ops.fast_write(ctl, 0, b"d/a\n") is None
        assert pfs.exists(f"{MAIN}/d/a"), "the fast path ran a control file's write"
    finally:
        pfs.close(ctl)


def test_a_request_the_fast_path_gave_back_goes_to_a_thread_without_a_second_try_on_the_loop(
    pfs: PathFS, fs: FileSystem, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stop 53: a close without write-back is given back by ``fast_flush`` (its save needs a thread), and pyfuse3's
    handler, which runs it next, tried the core's flush on the loop once more before the thread.  Now it goes to
    the thread at once; a flush that was not just given back is still tried on the loop first."""
    import threading

    calls: list[bool] = []  # per call of the core's flush: on the calling (loop) thread?
    real = fs.flush
    loop = threading.get_ident()

    def counting(fh: int, closer: int = 0) -> None:
        calls.append(threading.get_ident() == loop)
        real(fh, closer)

    monkeypatch.setattr(fs, "flush", counting)
    ops = FuseOperations(fs)
    pfs.mkdir(f"{MAIN}/d")
    pfs.write_file(f"{MAIN}/d/first", b"1\n")
    d, me = pfs.ino(f"{MAIN}/d"), os.getuid()
    got = ops.fast_create(d, b"a", 0o100644, os.O_WRONLY | os.O_CREAT, me, me, 1)
    assert isinstance(got, tuple), got
    fh = got[14]
    assert ops.fast_write(fh, 0, b"hello\n") == 6
    # Another file open for writing: not a lone writer's close, which the loop saves itself (stop 58).
    assert isinstance(ops.fast_create(d, b"other", 0o100644, os.O_WRONLY | os.O_CREAT, me, me, 1), tuple)
    calls.clear()  # the first file's close
    assert ops.fast_flush(fh, 0) is None, "the save needs a thread (no write-back)"
    assert calls == [True]
    trio.run(ops.flush, fh)  # pyfuse3's handler of the request given back
    assert calls == [True, False], "the handler tried the flush on the loop again before its thread"
    trio.run(ops.flush, fh)  # a flush not given back by the fast path (nothing to save now): tried on the loop
    assert calls == [True, False, True]
    assert ops.fast_release(fh) == 0
    assert pfs.read_file(f"{MAIN}/d/a") == b"hello\n"


def test_a_request_in_a_thread_is_counted_for_the_shims_drain_while_it_runs(pfs: PathFS, fs: FileSystem) -> None:
    """Stop 57: the shim's drain waits for the next request keeping the GIL only while no thread answers one
    (``kflags.threads_out``): an async handler's core call in a thread counts from before the thread to its
    answer on the loop, and no longer (also when it fails)."""
    from lakemount.fuse import kflags

    if kflags._shim is None:
        pytest.skip("no kflags shim")
    ops = FuseOperations(fs)
    idle = kflags.threads_out(0)

    def inside() -> int:
        return kflags.threads_out(0)

    def failing() -> None:
        raise OSError(errno.EIO, "down")

    assert trio.run(ops._call, inside) == idle + 1
    assert kflags.threads_out(0) == idle
    with pytest.raises(pyfuse3.FUSEError):
        trio.run(ops._call, failing)
    assert kflags.threads_out(0) == idle
