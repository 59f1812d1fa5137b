"""Through the kernel: the shim's fast path past pyfuse3's request loop, and its drain (issue 36, stop 52).

LOOKUP, CREATE, WRITE, FLUSH and RELEASE are answered in C from the adapter's ``fast_*`` methods when the core
needs no thread (lakemount/fuse/kflags.py); the others, and those that need I/O, take pyfuse3's async path.
Every test compares the bytes of every file written through the mount with what was written, and reads the
shim's counters from ``.lakefs/stats`` to show which path answered.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Callable

import pytest

from lakemount.app import App
from tests.fuse.conftest import REPO
from tests.fuse.mounting import Mount, env_for, flaky_mount, mounted_points, needs_fuse, start, stop

pytestmark = needs_fuse

MountFactory = Callable[..., Mount]


def _kernel(mountpoint: str) -> dict[str, int]:
    """The shim's counters (``lakemount_fuse_kernel_*``) and the requests Python's handlers counted, by op."""
    counts = {}
    with open(f"{mountpoint}/.lakefs/stats") as f:
        for line in f:
            name, value = line.rsplit(" ", 1)
            if name.startswith("lakemount_fuse_kernel_"):
                counts[name.removeprefix("lakemount_fuse_kernel_")] = int(value)
            elif name.startswith('lakemount_fuse_ops_total{op="'):
                counts["op_" + name.removeprefix('lakemount_fuse_ops_total{op="').removesuffix('"}')] = int(value)
    return counts


def _delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}


def _source(root: str, n: int, size: int = 1024) -> dict[str, bytes]:
    """``n`` files of ``size`` random bytes under ``root``: name -> bytes."""
    os.makedirs(root)
    files = {}
    for i in range(n):
        data = os.urandom(size)
        with open(os.path.join(root, f"f{i:04d}"), "wb") as f:
            f.write(data)
        files[f"f{i:04d}"] = data
    return files


def _read_all(d: str) -> dict[str, bytes]:
    out = {}
    for name in os.listdir(d):
        with open(os.path.join(d, name), "rb") as f:
            out[name] = f.read()
    return out


@pytest.mark.parametrize("writeback", [True, False], ids=["writeback", "no-writeback"])
def test_a_cp_of_small_files_is_answered_by_the_fast_path(
    app: App, mounts: MountFactory, tmp_path: os.PathLike[str], writeback: bool
) -> None:
    """``cp -r`` of small files: their creates, writes and releases (and with write-back their flushes, which only
    journal) are answered in C from the core's in-memory operations, not by pyfuse3's trio loop; every byte
    arrives, through the mount and in the branch."""
    from lakemount.fuse import kflags

    assert kflags._wraps_flush, "the shim does not see the session's requests"
    n = 200
    src = _source(os.path.join(os.fspath(tmp_path), "src"), n)
    m = mounts(args=("--head-ttl", "3600", *(("--writeback",) if writeback else ())))
    before = _kernel(m.mountpoint)
    dst = f"{m.mountpoint}/{REPO}/main/dst"
    subprocess.run(["cp", "-r", os.path.join(os.fspath(tmp_path), "src"), dst], check=True, timeout=300)
    got = _kernel(m.mountpoint)
    d = _delta(before, got)
    assert _read_all(dst) == src
    assert d.get("fast_creates", 0) >= 0.9 * n, d
    assert d.get("fast_writes", 0) >= 0.9 * n, d
    assert d.get("fast_releases", 0) >= 0.9 * n, d
    if writeback:
        assert d.get("fast_flushes", 0) >= 0.9 * n, d
    else:  # a flush without write-back PUTs the object and stages it: in a thread
        assert d.get("declined_flushes", 0) >= 0.9 * n, d
        # handed to the adapter's thread, which answers the kernel itself (stop 53), not to pyfuse3's handler
        assert d.get("handed_flushes", 0) >= 0.9 * n, d
        assert d.get("op_flush", 0) == n, d
    assert d.get("handed_unanswered", 0) == 0, d
    assert d.get("fast_failed", 0) == 0, d
    assert d.get("op_create", 0) == n, d  # the core counts an operation once, whichever path ran it
    if not writeback:  # saved at close; with write-back the journal stages later (tests/fuse/test_writeback_mount.py)
        repo = app.graveler.get_repository(REPO)
        for name, data in list(src.items())[:: n // 20]:
            assert app.catalog.read(repo, app.catalog.stat(REPO, "main", f"dst/{name}")) == data, name


def test_a_close_handed_to_a_thread_answers_the_closer_with_its_saves_error_and_the_next_one_saves(
    app: App, mounts: MountFactory, tmp_path: os.PathLike[str]
) -> None:
    """Stop 53: a close without write-back is handed by the shim to a thread of the adapter's, which answers the
    kernel itself.  The store fails the save's put: close(2) gets EIO from that thread (the fault's, in the log),
    the content is kept for a retry; once the store heals, a close saves and answers 0."""
    import errno

    m, main, inject = flaky_mount(mounts, os.fspath(tmp_path), REPO)
    with open(f"{main}/first", "wb") as f:  # the branch's first file drops no marker later
        f.write(b"1")
    before = _kernel(m.mountpoint)
    f = open(f"{main}/new", "wb")
    try:
        f.write(b"data")
        inject("put 1000")
        inject("put_file 1000")
        with pytest.raises(OSError) as info:
            f.close()
    finally:
        inject("heal")
    assert info.value.errno == errno.EIO
    assert "injected fault: put" in m.log()
    d = _delta(before, _kernel(m.mountpoint))
    assert d.get("handed_flushes", 0) == 1, d  # the EIO came from the thread the shim handed the close to
    with open(f"{main}/new2", "wb") as g:
        g.write(b"fine again")
    d = _delta(before, _kernel(m.mountpoint))
    assert d.get("handed_flushes", 0) == 2 and d.get("handed_unanswered", 0) == 0, d
    assert app.catalog.read(app.catalog.repository(REPO), app.catalog.stat(REPO, "main", "new2")) == b"fine again"


def test_a_write_that_needs_a_thread_takes_pyfuses_path_and_a_fast_stream_beside_it_stays_right(
    app: App, mounts: MountFactory
) -> None:
    """A saved file changed in place needs its stored bytes copied to a temp file first: that write needs a
    thread, so the fast method gives it back (nothing changed) and pyfuse3's handler writes it; so do the flushes,
    which save (no write-back).  Meanwhile four writers stream small files, whose
    requests queue up on /dev/fuse: the drain reads them after a fast answer, and stops at the first that goes to
    pyfuse3.  Every file's bytes are right, compared with what each writer wrote."""
    m = mounts(args=("--head-ttl", "3600"))
    d = f"{m.mountpoint}/{REPO}/main/mixed"
    os.mkdir(d)
    before = _kernel(m.mountpoint)
    written: dict[str, bytes] = {}
    lock = threading.Lock()
    errors: list[BaseException] = []

    def put(name: str, data: bytes, piece: int) -> None:
        with open(f"{d}/{name}", "wb") as f:
            for off in range(0, len(data), piece):
                f.write(data[off:off + piece])
        with lock:
            written[name] = data

    def small(w: int) -> None:
        try:
            for i in range(120):
                put(f"s{w}-{i:03d}", os.urandom(1 + (i * 37 + w) % 3000), 4096)
        except BaseException as exc:  # reported below
            errors.append(exc)

    def large() -> None:
        try:
            for i in range(3):
                data = os.urandom((1 << 20) + 12345 * i)
                put(f"large{i}", data, 128 << 10)
                patch = os.urandom(1000)
                with open(f"{d}/large{i}", "r+b") as f:  # a saved file changed in place: its bytes are copied first
                    f.seek(5000 + i)
                    f.write(patch)
                with lock:
                    written[f"large{i}"] = data[:5000 + i] + patch + data[6000 + i:]
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=small, args=(w,)) for w in range(4)] + [threading.Thread(target=large)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors
    assert not any(t.is_alive() for t in threads)
    after = _kernel(m.mountpoint)
    delta = _delta(before, after)
    assert _read_all(d) == written
    assert delta.get("declined_writes", 0) >= 3, delta  # each patch of a saved file
    assert delta.get("declined_flushes", 0) >= 480, delta
    assert delta.get("fast_writes", 0) >= 400, delta
    assert delta.get("drained", 0) > 0 and delta.get("drains", 0) > 0, delta
    assert delta.get("fast_failed", 0) == 0, delta
    repo = app.graveler.get_repository(REPO)
    for name in ("large0", "large2", "s0-000", "s3-119"):
        assert app.catalog.read(repo, app.catalog.stat(REPO, "main", f"mixed/{name}")) == written[name], name


def test_without_the_fast_path_the_mount_answers_through_pyfuse3_as_before(
    app: App, home: str, tmp_path: os.PathLike[str]
) -> None:
    """``KFLAGS_FAST=off`` (the A/B switch): nothing is answered by the fast path, and the files are right."""
    base = os.fspath(tmp_path)
    src = _source(os.path.join(base, "src"), 40)
    m = start(home, os.path.join(base, "mnt"), ("--head-ttl", "3600"), env=env_for(home, KFLAGS_FAST="off"))
    try:
        dst = f"{m.mountpoint}/{REPO}/main/dst"
        shutil.copytree(os.path.join(base, "src"), dst)
        assert _read_all(dst) == src
        k = _kernel(m.mountpoint)
        assert k["op_create"] == 40
        assert sum(v for name, v in k.items() if name.startswith(("fast_", "declined_", "drain"))) == 0, k
    finally:
        stop(m)
        print(f"--- log of {m.mountpoint} ---\n{m.log()}")
    assert not [p for p in mounted_points() if p.startswith(base)]


def test_a_connection_aborted_while_requests_are_drained_ends_the_mount_cleanly(app: App, mounts: MountFactory) -> None:
    """The kernel's connection aborted (fusectl) while four writers stream small files, so the shim's drains are
    reading when /dev/fuse starts failing: the writers get errors, the mount process exits by itself (its
    session ended: libfuse's exit flag, which pyfuse3's loop checks after the drain), and nothing stays mounted."""
    from lakemount.fuse import runner

    m = mounts(args=("--head-ttl", "3600", "--writeback"))
    d = f"{m.mountpoint}/{REPO}/main/abort"
    os.mkdir(d)
    started = threading.Event()
    stop_at = threading.Event()

    def stream(w: int) -> None:
        i = 0
        while not stop_at.is_set():
            try:
                with open(f"{d}/w{w}-{i:05d}", "wb") as f:
                    f.write(b"x" * 1024)
            except OSError:
                return  # the connection is gone
            i += 1
            if i == 50:
                started.set()

    threads = [threading.Thread(target=stream, args=(w,), daemon=True) for w in range(4)]
    for t in threads:
        t.start()
    assert started.wait(120), "the writers never got going"
    before = _kernel(m.mountpoint)
    assert before.get("drained", 0) > 0, before  # drains were running when the connection went
    assert runner.abort_connection(m.mountpoint)
    stop_at.set()
    for t in threads:
        t.join(60)
    assert m.proc.wait(60) is not None, "the mount process did not end with its connection"
    log = m.log()
    assert "Traceback" not in log and "Fatal Python error" not in log, log


def _closes(d: str, n: int) -> list[float]:
    """Seconds each of ``n`` small files' close(2) took, written one after another into ``d``.  Each write comes
    5 ms after its open: the drain after the create has then found no request waiting (a writer faster than the
    loop, on a loaded machine, has its next request queued already, and no wait is needed to catch it)."""
    import time

    took = []
    for i in range(n):
        with open(f"{d}/c{i:03d}", "wb") as f:
            time.sleep(0.005)
            f.write(b"c" * 1024)
            t0 = time.perf_counter()
        took.append(time.perf_counter() - t0)  # the with's close: the FLUSH and its reply
    return took


def test_the_drains_wait_for_a_request_never_holds_back_a_close_a_thread_answers(
    app: App, home: str, tmp_path: os.PathLike[str]
) -> None:
    """Stop 57: a drain that finds no request waiting waits for the next one in ``ppoll`` keeping the GIL; a close
    without write-back is answered by a thread (``hand_flush``) that needs the GIL, so a drain must not wait while
    one is out.  The wait is made 0.2 s here (``KFLAGS_DRAIN_WAIT_US``) so a close it held back would take 0.2 s:
    the closes take less than half of it, while the waits ran (they caught the writer's next requests) and were
    skipped while the closes' threads were out."""
    import statistics

    base = os.fspath(tmp_path)
    m = start(home, os.path.join(base, "mnt"), ("--head-ttl", "3600"), env=env_for(home, KFLAGS_DRAIN_WAIT_US="200000"))
    try:
        d = f"{m.mountpoint}/{REPO}/main/closes"
        os.mkdir(d)
        before = _kernel(m.mountpoint)
        took = _closes(d, 12)
        got = _delta(before, _kernel(m.mountpoint))
        assert statistics.median(took) < 0.1, (took, got)  # a close held back by a wait takes >= 0.2 s
        assert got.get("handed_flushes", 0) >= 10, got  # the closes were answered by the adapter's threads
        # The waits ran: they caught the writer's next requests.  How many depends on how often the drain finds the
        # next request queued already (no wait then): 6-45 here across 40 runs at load 2-6, so only "some" is asked.
        assert got.get("drain_waited", 0) >= 1, got
        assert got.get("drain_waits_skipped", 0) >= 10, got  # and were skipped while a close's thread was out
        assert got.get("handed_unanswered", 0) == 0 and got.get("fast_failed", 0) == 0, got
        repo = app.graveler.get_repository(REPO)
        for i in (0, 11):
            assert app.catalog.read(repo, app.catalog.stat(REPO, "main", f"closes/c{i:03d}")) == b"c" * 1024
    finally:
        stop(m)
        print(f"--- log of {m.mountpoint} ---\n{m.log()}")
    assert not [p for p in mounted_points() if p.startswith(base)]
