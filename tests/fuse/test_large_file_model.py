"""Through the kernel: a model of one large file against a local file, past the size where the shim writes its appends.

Stop 57 moved a large file's appends out of Python: once a file written from its start passes ``MD5_MAX`` (8 MiB),
the handle that wrote it is registered with the open-reply shim, which ``pwrite``s each next WRITE of it at the
file's end straight into the temp file, while the follower thread hashes the file as it grows; anything else (another
handle's write, an overwrite, a hole, a truncation, a ``setattr``, a save, a close) takes the registration back first
(docs/SEMANTICS.md).  ``LargeFile`` is a hypothesis state machine that drives one file past that size and then mixes
those operations: appends of 4 KiB-2 MiB (odd sizes too) and runs of small ones, ``pwrite`` inside the file and past
its end (holes), ``ftruncate``, ``truncate(2)`` and ``O_TRUNC`` opens, up and down, reads of ranges, ``stat`` and
``fstat``, ``utime`` and ``chmod``, a rename, ``fsync``, a close and a reopen of the writer (``O_WRONLY``, ``O_RDWR``,
``O_APPEND``, ``O_TRUNC``), a second writing handle, and a reader handle open throughout.  Each operation is applied
to the file in the mount and to a local file (the reference) through the same kinds of descriptors.  After every step
the mount's file has the reference's size (``stat``, ``fstat`` of every descriptor) and bytes (read through the
reader); ``stat`` shows an mtime no older than the last change (the one a ``utime`` set, until the next) and never
going back; after every close and ``fsync`` the staged object is the reference: read through a fresh open, listed
and ``stat``-ed by the catalog with the size, the SHA-256 address, the ETag, the mtime and mode ``stat`` shows, and
read back from the store.

Each example's file is created past ``MD5_MAX`` with at least one append after the registration, and the run asserts
that the shim wrote appends itself (its ``direct_writes`` counter in ``.lakefs/stats``; ``direct_handed``, the writes
of a registered handle that went back to Python, is printed), so it cannot pass by never reaching the path it checks.
"""

from __future__ import annotations

import hashlib
import os
import random
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from lakemount.app import App
from lakemount.catalog.streaming import parts_etag
from lakemount.fuse.writes import MD5_MAX
from tests import budget
from tests.fuse.conftest import REPO
from tests.fuse.mounting import Mount, needs_fuse
from tests.fuse.mounting import kernel_counts as _kernel

pytestmark = needs_fuse

MountFactory = Callable[..., Mount]

KiB, MiB = 1 << 10, 1 << 20
LIMIT = MD5_MAX + 12 * MiB  # the file never grows past this (each step reads it whole)
# Examples x steps: each example writes its file past 8 MiB first (~0.3 s), each step reads it whole (~50 ms).
RUNS = (10, 30)

MODES = {
    "wronly": os.O_WRONLY,  # the kernel's direct_io handle, as cp and dd write
    "rdwr": os.O_RDWR,  # a cached handle: its writes go through the page cache as well
    "append": os.O_WRONLY | os.O_APPEND,  # the kernel picks the offset: its idea of the size
}
modes = st.sampled_from(sorted(MODES))
sizes = st.one_of(
    st.sampled_from([4 * KiB, 64 * KiB, 128 * KiB + 1, MiB, MiB + 4095, 2 * MiB]),
    st.integers(4 * KiB, 2 * MiB),
)
seeds = st.integers(0, 2**32 - 1)
fractions = st.floats(0, 1, allow_nan=False)


@dataclass
class Pair:
    """One descriptor on the mount's file and its twin on the reference."""

    mount: int
    ref: int
    mode: str

    @property
    def appends(self) -> bool:
        return self.mode == "append"

    @property
    def readable(self) -> bool:
        return self.mode == "rdwr" or self.mode == "reader"

    def close(self) -> None:
        os.close(self.mount)
        os.close(self.ref)


def _bytes(seed: int, n: int) -> bytes:
    return random.Random(seed).randbytes(n)


def _read_whole(fd: int, size: int) -> bytes:
    out = bytearray()
    while True:
        chunk = os.pread(fd, max(size + 1 - len(out), 1), len(out))
        if not chunk:
            return bytes(out)
        out += chunk


class LargeFile(RuleBasedStateMachine):
    """One file in the mount and its local twin; see the module's docstring."""

    def __init__(self, app: App, mount_dir: str, ref_dir: str, name: str, counts: dict[str, int]) -> None:
        super().__init__()
        self.app = app
        self.name = name
        self.path = os.path.join(mount_dir, name)
        self.ref_path = os.path.join(ref_dir, name)
        self.counts = counts
        self.w: Pair | None = None  # the writer
        self.s: Pair | None = None  # a second writer, now and then
        self.r: Pair | None = None  # a reader, open throughout
        self.size = 0
        self.changed_at = 0  # wall time just before the last change of the bytes or size
        self.mtime_seen = 0
        self.mtime_set: int | None = None  # the mtime a utime set, until the next change
        self.perm = 0o644

    # ------------------------------------------------------------------ helpers
    def _open(self, mode: str, extra: int = 0) -> Pair:
        flags = (os.O_RDONLY if mode == "reader" else MODES[mode]) | extra
        m = os.open(self.path, flags, 0o644)
        try:
            r = os.open(self.ref_path, flags, 0o644)
        except BaseException:
            os.close(m)
            raise
        return Pair(m, r, mode)

    def _write(self, p: Pair, offset: int | None, data: bytes) -> None:
        """``data`` at ``offset`` through both descriptors (None: a write at the end, ``O_APPEND``'s if it appends)."""
        at = self.size if offset is None else offset
        self._changing()
        if p.appends:
            assert offset is None or offset >= self.size, "an O_APPEND descriptor writes at the end only"
            got_m, got_r = os.write(p.mount, data), os.write(p.ref, data)
        else:
            got_m, got_r = os.pwrite(p.mount, data, at), os.pwrite(p.ref, data, at)
        assert got_m == got_r == len(data), (got_m, got_r, len(data))
        self.size = max(self.size, at + len(data))
        self.counts["writes"] += 1

    def _grow(self, p: Pair, target: int, seed: int) -> None:
        """Append to ``target`` bytes in 1 MiB writes, as ``cp`` does."""
        rng = random.Random(seed)
        while self.size < target:
            self._write(p, None, rng.randbytes(min(MiB, target - self.size)))

    def _writer(self, second: bool, *, positional: bool = False) -> Pair | None:
        """The second writer if asked and open, else the writer; ``positional``: one that writes where it is told
        (Linux's ``pwrite`` on an ``O_APPEND`` descriptor writes at the end), None if neither does."""
        for p in ((self.s, self.w) if second else (self.w, self.s)):
            if p is not None and not (positional and p.appends):
                return p
        return None

    def _changing(self) -> None:
        """A change of the bytes or the size is about to be made: the mtime moves to now (or later)."""
        self.changed_at, self.mtime_set = time.time_ns(), None

    def _check_mtime(self, mtime_ns: int, what: str) -> None:
        if self.mtime_set is not None:
            assert mtime_ns == self.mtime_set, f"{what}: mtime {mtime_ns} where a utime set {self.mtime_set}"
        assert mtime_ns >= self.changed_at, f"{what}: mtime {mtime_ns} older than the last change at {self.changed_at}"
        assert mtime_ns >= self.mtime_seen, f"{what}: mtime {mtime_ns} went back from {self.mtime_seen}"
        self.mtime_seen = mtime_ns

    def _other_name(self) -> str:
        return self.name[:-1] + ("b" if self.name.endswith("a") else "a")

    def _check_staged(self, why: str) -> None:
        """After a close or an ``fsync``: the staged object is the reference, however it is read."""
        want = _read_file(self.ref_path)
        assert len(want) == self.size
        fd = os.open(self.path, os.O_RDONLY)
        try:
            _same(_read_whole(fd, self.size), want, f"a fresh open after {why}")
        finally:
            os.close(fd)
        names = os.listdir(os.path.dirname(self.path))
        assert self.name in names and self._other_name() not in names, (why, self.name, names)
        st_m = os.stat(self.path)
        assert st_m.st_size == self.size, (why, st_m.st_size, self.size)
        assert st_m.st_mode & 0o7777 == self.perm, (why, oct(st_m.st_mode), oct(self.perm))
        self._check_mtime(st_m.st_mtime_ns, f"stat after {why}")
        catalog = self.app.catalog
        entry = catalog.stat(REPO, "main", self.name)
        listed = [item.entry for item in catalog.list(REPO, "main", self.name) if item.path == self.name]
        assert listed == [entry], (why, listed, entry)
        assert catalog.get_optional(REPO, "main", self._other_name()) is None, (why, self._other_name())
        sha = hashlib.sha256(want).hexdigest()
        # The MD5, or past MD5_MAX that of an upload in parts (a file appended from its start; one saved after an
        # overwrite, a hole or a truncation keeps the MD5: docs/SEMANTICS.md)
        etags = {hashlib.md5(want, usedforsecurity=False).hexdigest()}
        if len(want) > MD5_MAX:
            etags.add(parts_etag(sha, len(want)))
        assert entry.size == len(want) and entry.etag in etags, (why, entry, len(want), etags)
        assert entry.address.endswith(sha), (why, entry.address, sha)
        assert entry.mtime_ns == st_m.st_mtime_ns and entry.mode & 0o7777 == self.perm, (why, entry, st_m)
        _same(catalog.read(catalog.repository(REPO), entry), want, f"the staged object after {why}")
        self.counts["staged"] += 1

    # ------------------------------------------------------------------ rules
    @initialize(mode=modes, extra=st.integers(MiB + 1, 4 * MiB), seed=seeds)
    def create(self, mode: str, extra: int, seed: int) -> None:
        """A new file, written past ``MD5_MAX`` in 1 MiB appends: the one that passes it goes through the mount, which
        registers the handle with the shim; the shim writes the next ones."""
        self.w = self._open(mode, os.O_CREAT | os.O_TRUNC)
        self.r = self._open("reader")
        self._grow(self.w, MD5_MAX + extra, seed)

    @precondition(lambda self: self.size < LIMIT)
    @rule(n=sizes, seed=seeds, second=st.booleans())
    def append(self, n: int, seed: int, second: bool) -> None:
        p = self._writer(second)
        assert p is not None
        self._write(p, None, _bytes(seed, min(n, LIMIT - self.size)))

    @precondition(lambda self: self.size < LIMIT)
    @rule(pieces=st.lists(st.integers(1, 256 * KiB), min_size=2, max_size=16), seed=seeds, second=st.booleans())
    def append_pieces(self, pieces: list[int], seed: int, second: bool) -> None:
        """Small appends in a row (Hadoop's local file system writes 4 KiB at a time)."""
        p = self._writer(second)
        assert p is not None
        rng = random.Random(seed)
        for n in pieces:
            if self.size >= LIMIT:
                return
            self._write(p, None, rng.randbytes(min(n, LIMIT - self.size)))

    @precondition(lambda self: self.size <= MD5_MAX)
    @rule(extra=st.integers(MiB + 1, 4 * MiB), seed=seeds, second=st.booleans())
    def grow(self, extra: int, seed: int, second: bool) -> None:
        """Back past ``MD5_MAX`` after a truncation (or an ``O_TRUNC`` reopen)."""
        p = self._writer(second)
        assert p is not None
        self._grow(p, MD5_MAX + extra, seed)

    @precondition(lambda self: self.size > 0)
    @rule(at=fractions, n=st.integers(1, 256 * KiB), seed=seeds, second=st.booleans())
    def overwrite(self, at: float, n: int, seed: int, second: bool) -> None:
        """A write inside the file (it may run past the end)."""
        p = self._writer(second, positional=True)
        if p is None:
            return
        offset = min(int(at * self.size), self.size - 1)
        self._write(p, offset, _bytes(seed, min(n, LIMIT - offset)))

    @precondition(lambda self: self.size + 2 * MiB <= LIMIT)
    @rule(gap=st.integers(1, MiB), n=st.integers(1, 64 * KiB), seed=seeds, second=st.booleans())
    def write_past_the_end(self, gap: int, n: int, seed: int, second: bool) -> None:
        """A write past the end: a hole before it."""
        p = self._writer(second, positional=True)
        if p is None:
            return
        self._write(p, self.size + gap, _bytes(seed, n))

    @rule(how=st.sampled_from(["ftruncate", "ftruncate-second", "truncate"]),
          to=st.sampled_from(["down", "up", "zero", "same", "md5"]), d=st.integers(1, 2 * MiB))
    def truncate(self, how: str, to: str, d: int) -> None:
        size = {"down": max(0, self.size - d), "up": min(LIMIT, self.size + d), "zero": 0, "same": self.size,
                "md5": MD5_MAX}[to]
        self._changing()  # ftruncate marks the times whatever the size (the kernel asks for it), and the mount does
        if how == "truncate":
            os.truncate(self.path, size)
            os.truncate(self.ref_path, size)
        else:
            p = self._writer(how == "ftruncate-second")
            assert p is not None
            os.ftruncate(p.mount, size)
            os.ftruncate(p.ref, size)
        self.size = size
        self.counts["truncates"] += 1

    @rule()
    def truncate_by_an_open(self) -> None:
        """``: > file`` while the writers are open (a log cut under its writer): a third descriptor opens the file with
        ``O_TRUNC`` and closes it, which saves the empty file."""
        self._changing()
        self._open("wronly", os.O_TRUNC).close()
        self.size = 0
        self.counts["truncates"] += 1
        self._check_staged("a close of an O_TRUNC open")

    @rule()
    def rename(self) -> None:
        """A rename of the open file (``.a`` <-> ``.b``): the next save goes under the new name, the old one is gone."""
        old = self.name
        self.name = old[:-1] + ("b" if old.endswith("a") else "a")
        new_path, new_ref = os.path.join(os.path.dirname(self.path), self.name), os.path.join(os.path.dirname(self.ref_path), self.name)
        os.rename(self.path, new_path)
        os.rename(self.ref_path, new_ref)
        self.path, self.ref_path = new_path, new_ref
        assert old not in os.listdir(os.path.dirname(self.path))

    @rule(at=fractions, n=st.integers(1, 3 * MiB), through_writer=st.booleans())
    def read(self, at: float, n: int, through_writer: bool) -> None:
        """A range, through the reader or a writer that reads (``O_RDWR``), at times past the end."""
        p = self.w if through_writer and self.w is not None and self.w.readable else self.r
        assert p is not None
        offset = int(at * (self.size + 64 * KiB))
        _same(os.pread(p.mount, n, offset), os.pread(p.ref, n, offset), f"a read of {n} at {offset}")

    @rule()
    def stat(self) -> None:
        st_m = os.stat(self.path)
        assert st_m.st_size == self.size, (st_m.st_size, self.size)
        self._check_mtime(st_m.st_mtime_ns, "stat")
        for p in (self.w, self.s, self.r):
            if p is not None:
                got = os.fstat(p.mount)
                assert got.st_size == self.size, (p.mode, got.st_size, self.size)
                self._check_mtime(got.st_mtime_ns, f"fstat of the {p.mode} descriptor")

    @rule(back_s=st.integers(1, 10**6), perm=st.sampled_from([0o644, 0o600, 0o640]))
    def utime_and_chmod(self, back_s: int, perm: int) -> None:
        """Set the mtime (in the past) and the mode through the path (a ``setattr``, which takes the shim's writes in
        first): both stand until the next change, and are staged by the next save."""
        t = time.time_ns() - back_s * 1_000_000_000
        for path in (self.path, self.ref_path):
            os.utime(path, ns=(t, t))
            os.chmod(path, perm)
        self.mtime_set, self.changed_at, self.mtime_seen, self.perm = t, 0, 0, perm

    @rule(which=st.sampled_from(["w", "s", "r"]))
    def fsync(self, which: str) -> None:
        """``fsync`` saves and stages the file, through any of its descriptors."""
        p = getattr(self, which) or self.w
        assert p is not None
        os.fsync(p.mount)
        os.fsync(p.ref)
        self._check_staged(f"an fsync of the {p.mode} descriptor")

    @rule(mode=modes, trunc=st.sampled_from([False, False, False, True]))
    def reopen_writer(self, mode: str, trunc: bool) -> None:
        """Close the writer (the close saves: staged as the reference) and open it again, at times with ``O_TRUNC``."""
        assert self.w is not None
        self.w.close()
        self.w = None
        self._check_staged("a close")
        if trunc:
            self._changing()
        self.w = self._open(mode, os.O_TRUNC if trunc else 0)
        if trunc:
            self.size = 0

    @precondition(lambda self: self.s is None)
    @rule(mode=modes)
    def open_second(self, mode: str) -> None:
        self.s = self._open(mode)

    @precondition(lambda self: self.s is not None)
    @rule()
    def close_second(self) -> None:
        assert self.s is not None
        self.s.close()
        self.s = None
        self._check_staged("the second writer's close")

    @rule(mode=modes)
    def reopen_all(self, mode: str) -> None:
        """Close every descriptor (the mount drops the file's temp file) and open a writer and a reader again: the
        next write copies the stored object into a new temp file first."""
        for p in (self.w, self.s, self.r):
            if p is not None:
                p.close()
        self.w = self.s = self.r = None
        self._check_staged("the last close")
        self.w = self._open(mode)
        self.r = self._open("reader")
        self.counts["reopen_all"] += 1

    # ------------------------------------------------------------------ after every step
    @invariant()
    def same_size_and_bytes(self) -> None:
        if self.r is None:
            return
        for p in (self.w, self.s, self.r):
            if p is not None:
                sizes = os.fstat(p.mount).st_size, os.fstat(p.ref).st_size
                assert sizes == (self.size, self.size), (p.mode, sizes, self.size)
        _same(_read_whole(self.r.mount, self.size), _read_whole(self.r.ref, self.size), "the reader's read of the file")
        self.counts["steps"] += 1

    def teardown(self) -> None:
        for p in (self.w, self.s, self.r):
            if p is not None:
                p.close()
        self.w = self.s = self.r = None
        os.unlink(self.path)
        os.unlink(self.ref_path)


def _read_file(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _same(got: bytes, want: bytes, what: str) -> None:
    """``got == want``, told by size and first differing offset (never a dump of megabytes)."""
    if got == want:
        return
    at = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), min(len(got), len(want)))
    raise AssertionError(f"{what}: {len(got)} bytes where the reference has {len(want)}, first difference at {at}")


def test_a_large_file_through_the_mount_behaves_like_a_local_file(
    app: App, mounts: MountFactory, tmp_path: os.PathLike[str]
) -> None:
    examples = int(os.environ.get("LARGE_MODEL_EXAMPLES", budget.examples(RUNS[0])))
    steps = int(os.environ.get("LARGE_MODEL_STEPS", RUNS[1]))
    m = mounts("large")
    mount_dir = f"{m.mountpoint}/{REPO}/main"
    ref_dir = tempfile.mkdtemp(prefix="ref-", dir=os.fspath(tmp_path))
    counts = dict.fromkeys(("machines", "steps", "writes", "truncates", "staged", "reopen_all"), 0)

    def machine() -> LargeFile:
        counts["machines"] += 1
        return LargeFile(app, mount_dir, ref_dir, f"big{counts['machines']}.a", counts)

    before = _kernel(m.mountpoint)
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=steps,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
        ),
    )
    after = _kernel(m.mountpoint)
    shim = {k: after.get(k, 0) - before.get(k, 0) for k in ("direct_writes", "direct_bytes", "direct_handed", "direct_waits")}
    print(f"large-file model: {counts}, the shim's: {shim}")
    assert counts["machines"] >= examples and counts["staged"] >= 1, counts
    # The path under test was taken: appends written by the shim (at least one an example: see ``create``).
    assert shim["direct_writes"] >= examples, shim
    assert "unexpected error" not in m.log() and "Traceback" not in m.log()
