"""The spool: records of short-lived processes (CLI verbs) as JSON lines on the local disk, made Parquet elsewhere.

A CLI verb lives a fraction of a second; importing pyarrow and writing a Parquet
file at its exit cost it 0.2-0.6 s.  So a process that is not long-running
appends each record as one JSON line to its own spool file under
``<home>/run/audit/spool/`` (one ``write(2)``, no fsync: the page cache
outlives a killed process, so ``kill -9`` loses none of them), and another
process turns spools into Parquet: a long-running one (serve, mount) at each
of its flushes, ``lakemount audit flush``, a ``lakemount audit`` query before
it reads, and a detached ``audit flush`` that a CLI verb starts when it finds
a spool older than ``audit.flush_s`` with nobody draining.

The protocol, so that no record is lost or written twice whatever runs at the
same time or dies:

- A writer holds its file ``<host>-<pid>-<created ns>.jsonl`` open.  Each
  append takes an exclusive ``flock``, checks that the path still names the
  file it holds (else a drainer claimed it: it starts a new file), writes one
  line and unlocks.
- A drainer opens a file, takes the ``flock`` without waiting (a writer holds
  it: skip, the next drain takes it), checks the path still names it, renames
  it to ``claimed/<name>@<drainer host>-<drainer pid>`` and unlocks: no writer
  appends to it after that.  It writes the records as Parquet named after the
  spool file (``<host>-<pid>-<created ns>.parquet`` in each hour's partition)
  and removes the claimed file.  A claimed file of a dead drainer of this host
  is claimed again; the Parquet files get the same names, so writing them
  again replaces them and duplicates nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import astuple
from typing import Any, Final

from lakemount.audit.record import FIELDS, AuditRecord
from lakemount.pids import alive

SUFFIX: Final = ".jsonl"
CLAIMED: Final = "claimed"
LOCK: Final = ".drain"  # held by a running drain; its mtime is when a drain was last asked for

_TYPES: Final = {name: (float, int) if name == "time" else (int,) if name in ("seq", "bytes", "status", "uid", "pid")
                 else (str,) for name in FIELDS}


def folder(run_dir: str) -> str:
    """The spool folder under the audit trail's run directory."""
    return os.path.join(run_dir, "spool")


def encode(r: AuditRecord) -> bytes:
    """One record as one JSON line (lone surrogates of non-UTF-8 keys survive as ``\\udcNN`` escapes)."""
    return (json.dumps(dict(zip(FIELDS, astuple(r), strict=True)), separators=(",", ":")) + "\n").encode()


def decode(line: bytes) -> AuditRecord:
    """The record of one line written by :func:`encode`; ``ValueError`` for anything else."""
    data = json.loads(line)
    if not isinstance(data, dict):
        raise ValueError("not a record")
    values: list[Any] = []
    for name in FIELDS:
        v = data.get(name)
        if isinstance(v, bool) or not isinstance(v, _TYPES[name]):
            raise ValueError(f"field {name!r}: {v!r}")
        values.append(v)
    return AuditRecord(*values)


class SpoolWriter:
    """Appends this process's records to its spool file (a new one after a drainer claims it, or after a fork).

    :meth:`append` raises ``OSError`` (a full or read-only disk): the caller counts the record dropped.
    """

    def __init__(self, directory: str, host: str) -> None:
        self.directory = directory
        self.host = host
        self.path = ""
        self._fd = -1
        self._pid = 0
        self._lock = threading.Lock()

    def _open(self) -> None:
        os.makedirs(self.directory, exist_ok=True)
        self._pid = os.getpid()
        self.path = os.path.join(self.directory, f"{self.host}-{self._pid}-{time.time_ns()}{SUFFIX}")
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)

    def _still_ours(self) -> bool:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return False
        mine = os.fstat(self._fd)
        return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)

    def append(self, record: AuditRecord) -> None:
        """Append one record: one ``write(2)`` under the file's lock, no fsync."""
        line = encode(record)
        with self._lock:
            for _ in range(3):
                if self._fd < 0 or self._pid != os.getpid():  # a fork's child writes its own file
                    self._open()
                fcntl.flock(self._fd, fcntl.LOCK_EX)
                try:
                    if self._still_ours():
                        os.write(self._fd, line)
                        return
                finally:
                    fcntl.flock(self._fd, fcntl.LOCK_UN)
                self.close()  # claimed by a drainer: start the next file
            raise OSError("the spool file was claimed three times in a row")

    def close(self) -> None:
        """Close the file (it stays for a drainer)."""
        if self._fd >= 0 and self._pid == os.getpid():
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._fd = -1


def stem(claimed_path: str) -> str:
    """The spool file's own name without its suffix (``<host>-<pid>-<created ns>``): the Parquet files' name."""
    name = os.path.basename(claimed_path).rpartition("@")[0] or os.path.basename(claimed_path)
    return name.removesuffix(SUFFIX)


def claim(directory: str, host: str) -> list[str]:
    """Claim every spool file no writer is appending to, and those a dead drainer of this host had claimed.

    Returns the claimed files' paths (now this process's to write and remove).
    """
    me = f"{host}-{os.getpid()}"
    claimed_dir = os.path.join(directory, CLAIMED)
    out: list[str] = []
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return out
    for name in names:
        if not name.endswith(SUFFIX):
            continue
        path = os.path.join(directory, name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a writer is appending: the next drain takes it
            st, mine = os.stat(path), os.fstat(fd)
            if (st.st_dev, st.st_ino) != (mine.st_dev, mine.st_ino):
                continue  # another drainer claimed it (and a writer made a new one) since the listing
            os.makedirs(claimed_dir, exist_ok=True)
            target = os.path.join(claimed_dir, f"{name}@{me}")
            os.rename(path, target)
            out.append(target)
        except FileNotFoundError:
            continue
        finally:
            os.close(fd)
    out += _reclaim(claimed_dir, host, me)
    return out


def _reclaim(claimed_dir: str, host: str, me: str) -> list[str]:
    """The files a dead drainer of this host had claimed, claimed again by ``me``."""
    out: list[str] = []
    try:
        names = os.listdir(claimed_dir)
    except FileNotFoundError:
        return out
    for name in names:
        spooled, _, drainer = name.rpartition("@")
        drainer_host, _, pid = drainer.rpartition("-")
        if not spooled or drainer_host != host or not pid.isdigit() or drainer == me or alive(int(pid)):
            continue
        target = os.path.join(claimed_dir, f"{spooled}@{me}")
        try:
            os.rename(os.path.join(claimed_dir, name), target)
        except FileNotFoundError:
            continue  # another drainer took it first
        out.append(target)
    return out


def read(path: str) -> tuple[list[AuditRecord], int]:
    """The records of a claimed spool file, and how many of its lines were not records (a torn last line)."""
    with open(path, "rb") as f:
        data = f.read()
    records, bad = [], 0
    for line in data.splitlines():
        if not line.strip():
            continue
        try:
            records.append(decode(line))
        except ValueError:
            bad += 1
    return records, bad


def oldest(directory: str) -> float | None:
    """When the oldest spool file waiting to be drained was created (seconds since the epoch), None if none waits.

    Reads names only (no ``stat``): a CLI verb asks this on its first record.
    Files claimed by a live drainer are not waiting; those of a dead one are.
    """
    found: list[float] = []
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return None
    for name in names:
        if name.endswith(SUFFIX):
            created = name.removesuffix(SUFFIX).rpartition("-")[2]
            if created.isdigit():
                found.append(int(created) / 1e9)
    with contextlib.suppress(FileNotFoundError):
        for name in os.listdir(os.path.join(directory, CLAIMED)):
            spooled, _, drainer = name.rpartition("@")
            pid = drainer.rpartition("-")[2]
            created = spooled.removesuffix(SUFFIX).rpartition("-")[2]
            if created.isdigit() and pid.isdigit() and not alive(int(pid)):
                found.append(int(created) / 1e9)
    return min(found) if found else None


def ask_for_drain(directory: str, every_s: float, start: Callable[[], None]) -> bool:
    """Call ``start`` (which starts a drain elsewhere) unless one runs or was asked for in the last ``every_s`` s.

    Returns whether it was called.  The lock file's ``flock`` says a drain runs
    (:func:`draining`); its mtime, when one was last asked for.
    """
    lock = os.path.join(directory, LOCK)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        if time.time() - os.fstat(fd).st_mtime < every_s and os.fstat(fd).st_size:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        os.ftruncate(fd, 0)
        os.write(fd, b"asked\n")  # the size says "asked once": a fresh lock file asks at once
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
    start()
    return True


@contextlib.contextmanager
def draining(directory: str) -> Iterator[None]:
    """Hold the drain lock while the block runs (so CLI verbs do not start another drain meanwhile)."""
    os.makedirs(directory, exist_ok=True)
    fd = os.open(os.path.join(directory, LOCK), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
