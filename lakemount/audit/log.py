"""The per-process audit log: a bounded buffer the request path appends to, and a thread that flushes it.

:meth:`AuditLog.record` never blocks and never raises: it stamps the record
and appends its fields to a list (a full buffer drops it, counted).  A daemon
thread writes the buffer as Parquet (``table.py``) every ``flush_s`` seconds,
as soon as ``flush_records`` records wait, and at a clean exit; a store that
fails drops that batch, counted, and the data path never notices.  Each flush
also drains the spools of short-lived processes of this home.

A short-lived process (a CLI verb: :meth:`AuditLog.spool`) keeps no buffer and
no thread: each record is one line appended to its spool file
(``spool.py``), which a long-running process, ``lakemount audit flush`` or a
query turns into Parquet (:meth:`AuditLog.drain`).

Crash accounting: a process that starts logging writes an open marker
``<home>/run/audit/open/<host>-<pid>`` and removes it when it stops cleanly.
A process that starts and finds the marker of a dead process of this host
(kill -9, OOM) counts one lost interval -- at most ``flush_s`` seconds of that
process's records were never written -- logs it, and removes the marker.
Counters are published to ``<home>/run/audit/stats/<host>-<pid>.json`` at each
flush, which ``/metrics`` sums (``render_metrics``) and a mount's
``.lakefs/stats`` shows.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal

from lakemount.audit import context, spool
from lakemount.audit.record import FIELDS, AuditRecord, Row, row
from lakemount.graveler.ports import BlockAdapter
from lakemount.logs import get_logger
from lakemount.pids import alive

# The Parquet side is imported by what writes or expires files: a CLI verb only spools (issue 41).
if TYPE_CHECKING:
    from lakemount.audit import table

log = get_logger("lakemount.audit")

# Records one process holds unflushed at most (beyond that they are dropped, counted).
MAX_PENDING: Final = 100_000
COUNTERS: Final = ("recorded", "written", "dropped", "lost_intervals")
EXPIRE_EVERY: Final = 3600.0  # seconds between retention passes per repository
REPO: Final[Literal[5]] = 5  # a Row's repository: FIELDS[5] (a literal, so the type checker knows it is a str)
WIDTH: Final = len(FIELDS)  # the buffer's items per record


# This process's id, kept by a fork hook: ``os.getpid()`` is a system call (~0.5 us here), and the request
# path asks on every record whether it runs in a fork's child that must start its own buffer and thread.
_pid = os.getpid()


def _forked() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_forked)


FLUSHER: Final = "lm-audit-flush"  # the flushing thread's name, in Python and in /proc/<pid>/task/<tid>/comm


def _name_thread(name: str) -> None:
    """Give the calling thread its name in the kernel too (Python 3.11 names only its own object), so ``top -H``
    and a benchmark reading ``/proc/<pid>/task/*/comm`` tell the flusher's CPU from the request loop's."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(15, name.encode()[:15])  # PR_SET_NAME: 15 bytes and a NUL
    except (OSError, AttributeError):  # not Linux: the name is cosmetic
        pass


def _load_writer() -> None:
    """Import the Parquet writer and Arrow's compute functions (half a second, holding the GIL) now: as the process
    starts, not at its first flush in the middle of the requests that filled the buffer."""
    try:
        import pyarrow.compute  # noqa: F401
        import pyarrow.parquet  # noqa: F401
    except ImportError as exc:  # the flushes will say so, and count their records dropped
        log.warning("audit: cannot load the Parquet writer: %s", exc)


def run_dir(home: str) -> str:
    """Where markers and counters of every process sharing ``home`` live."""
    return os.path.join(home, "run", "audit")


class AuditLog:
    """The audit records of this process, on their way to the repositories' audit tables.

    ``namespace_of(repo)`` gives a repository's storage namespace (it may raise:
    the batch is then dropped).  Thread-safe; survives ``fork`` (the child starts
    its own buffer, marker and thread on its first record).
    """

    def __init__(self, adapter: BlockAdapter, namespace_of: Callable[[str], str], *, home: str, flush_s: float,
                 flush_records: int, retention_days: float, max_pending: int = MAX_PENDING) -> None:
        self.adapter = adapter
        self.namespace_of = namespace_of
        self.home = home
        self.flush_s = max(flush_s, 0.01)
        self.flush_records = max(flush_records, 1)
        self.retention_days = retention_days
        self.max_pending = max_pending
        self.host = os.uname().nodename  # gethostname(2) reads it; the socket module costs a CLI verb ~4 ms
        self.counters = dict.fromkeys(COUNTERS, 0)
        self._lock = threading.Lock()
        # The queued records' fields, WIDTH items per record, one after another: a tuple kept per record was an
        # object the cyclic GC tracks, so a busy trail set off collections a process without it never runs.
        self._pending: list[object] = []
        self._wake = threading.Event()
        self._stop = False
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._seq = itertools.count(1)
        self._flushes = itertools.count(1)
        self._expired: dict[str, float] = {}
        self._write_lock = threading.Lock()
        self._drain_lock = threading.Lock()
        self._spool: spool.SpoolWriter | None = None
        self._on_stale: Callable[[], None] | None = None

    def spool(self, on_stale: Callable[[], None] | None = None) -> None:
        """This process is short-lived (a CLI verb): append records to its spool file rather than buffer them.

        On the first record, if another spool has waited longer than ``flush_s``
        and no drain runs or was asked for meanwhile, ``on_stale`` is called
        (the CLI starts a detached ``lakemount audit flush``).  :meth:`start`
        undoes this (a CLI verb that turns out to serve: the mount).
        """
        self._spool = spool.SpoolWriter(self.spool_dir, self.host)
        self._on_stale = on_stale

    @property
    def spool_dir(self) -> str:
        """Where the spools of every process sharing ``home`` live."""
        return spool.folder(run_dir(self.home))

    # ------------------------------------------------------------------ the request path
    def record(self, *, repo: str, op: str, ref: str = "", commit: str = "", path: str = "", nbytes: int = 0,
               status: int = 200, user: str | None = None, frontend: str | None = None, client: str | None = None,
               uid: int = -1, process: str = "", pid: int = -1, detail: str = "") -> None:
        """Queue one record; who acts defaults to the context's actor (``context.py``). Never blocks, never raises.

        The request path only stamps a plain tuple (:data:`~lakemount.audit.record.Row`) and appends its fields
        to the buffer: no lock, no system call, no object with Python-level construction, no object kept that the
        cyclic GC tracks, no shared counter to update (the flusher counts what it takes); what the caller passes
        is what it already knew (the commit its request resolved, the user it authenticated).  Escaping,
        partitioning and encoding happen in the flusher (``table.write_columns``).
        """
        try:
            if self._pid != _pid:
                self._start()
            if user is None or frontend is None or client is None:
                actor = context.current()
                if user is None:
                    user = actor.user if actor else ""
                if frontend is None:
                    frontend = actor.frontend if actor else ""
                if client is None:
                    client = actor.client if actor else ""
            rec: Row = (time.time(), next(self._seq), user, frontend, client, repo, ref, commit, path, op, nbytes, status,
                        uid, process, pid, self.host, detail)
            if self._spool is not None:
                self._spooled(AuditRecord(*rec))
                return
            pending = self._pending
            if len(pending) >= self.max_pending * WIDTH:
                self.counters["dropped"] += 1
                return
            # One step under the GIL (a whole record or none); the tuple goes with the statement, so the buffer
            # holds only the fields.  Counted as recorded when the flusher takes it (stats() adds what waits).
            pending.extend(rec)
            if len(pending) == self.flush_records * WIDTH:
                self._wake.set()
        except Exception:  # noqa: BLE001 - the trail must never fail the operation it reports
            log.exception("audit: could not queue a record")
            self.counters["dropped"] += 1

    def _spooled(self, rec: AuditRecord) -> None:
        writer = self._spool
        assert writer is not None
        if writer.path == "" and self._on_stale is not None:  # this process's first record: is a spool stuck?
            created = spool.oldest(self.spool_dir)
            if created is not None and time.time() - created > self.flush_s:
                try:
                    spool.ask_for_drain(self.spool_dir, self.flush_s, self._on_stale)
                except OSError as exc:
                    log.warning("audit: cannot start draining the spools: %s", exc)
        try:
            writer.append(rec)
        except OSError as exc:
            self.counters["dropped"] += 1
            log.warning("audit: a record could not be spooled, dropped: %s", exc)
            self._publish()
        # Counted as recorded (and written or dropped) by the process that drains the spool, which publishes.

    def versioning(self, repo: str, branch: str, kind: str, payload: dict[str, object]) -> None:
        """A versioning verb the catalog's feed reports (commit, merge, branch and tag changes, ...)."""
        commit = payload.get("commit_id")
        detail = {k: v for k, v in payload.items() if k in ("source", "tag", "reverted", "picked", "patterns", "id",
                                                            "action", "changes", "event_type", "status", "prefix",
                                                            "path", "message")}
        who = None
        if context.current() is None:  # no edge said who acts: the verb's own committer or user, if any
            who = str(payload.get("committer") or payload.get("user") or "")
        self.record(repo=repo, op=kind, ref=branch, commit=str(commit or ""), user=who,
                    path=str(payload.get("path") or payload.get("prefix") or ""),
                    detail=json.dumps(detail, default=str, ensure_ascii=False) if detail else "")

    # ------------------------------------------------------------------ lifecycle
    def _start(self) -> None:
        with self._lock:
            if self._pid == os.getpid():
                return
            forked = self._pid != 0
            self._pid = os.getpid()
            if forked:  # a child of a process that logged: its buffer and counters are the parent's
                self._pending = []
                self.counters = dict.fromkeys(COUNTERS, 0)
                self._seq = itertools.count(1)
                self._flushes = itertools.count(1)
                self._wake = threading.Event()
                self._write_lock = threading.Lock()
            self._stop = False
            if self._spool is not None:  # a short-lived process: no buffer, no thread, nothing to lose at a kill
                return
            self._adopt_dead()
            self._write_marker()
            self._thread = threading.Thread(target=self._run, name=FLUSHER, daemon=True)
            self._thread.start()
            atexit.register(self.close)

    def start(self) -> None:
        """Run as a long-running process (a server, a mount): buffer records and flush them from a thread,
        drain the spools at each flush.  Markers of dead processes are counted at once.

        The Parquet writer is loaded here, in the caller, before it returns: a server's worker then freezes its
        heap (``serving/workers.py:settle_worker_heap``) with pyarrow's objects in it.  Loaded by the flusher
        thread, they were still being made as the worker froze: thousands of objects the cyclic GC went on
        tracking (and counting towards its next collection) that the same worker with the trail off never had.
        """
        if self._spool is not None:
            self._spool.close()
            self._spool = None
            self._pid = 0
        _load_writer()
        if self._pid != os.getpid():
            self._start()

    def _marker(self, pid: int | None = None) -> str:
        return os.path.join(run_dir(self.home), "open", f"{self.host}-{pid or os.getpid()}")

    def _write_marker(self) -> None:
        try:
            os.makedirs(os.path.dirname(self._marker()), exist_ok=True)
            with open(self._marker(), "w") as f:
                f.write(json.dumps({"pid": os.getpid(), "started": time.time(), "flush_s": self.flush_s}))
        except OSError as exc:
            log.warning("audit: cannot write the open marker (a crash would go uncounted): %s", exc)

    def _adopt_dead(self) -> None:
        """Count (and clear) the open markers of dead processes of this host."""
        folder = os.path.join(run_dir(self.home), "open")
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            return
        for name in names:
            host, _, pid_text = name.rpartition("-")
            if host != self.host or not pid_text.isdigit():
                continue
            pid = int(pid_text)
            if pid == os.getpid() or alive(pid):
                continue
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(folder, name))
                self.counters["lost_intervals"] += 1
                log.warning("audit: process %d ended without flushing its audit trail; up to its last %.0f s of "
                            "records are lost", pid, self.flush_s)

    def close(self) -> None:
        """Flush what is pending, stop the thread, remove the open marker (a clean stop loses nothing)."""
        if self._pid != os.getpid():
            return
        if self._spool is not None:  # the records are in the spool file already
            self._spool.close()
            self._pid = 0
            return
        self._stop = True
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=30)
        self.flush()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._marker())
        self._pid = 0  # a later record starts a new flusher
        self._thread = None
        with contextlib.suppress(ValueError):  # else the exit hook keeps this log (and its app) alive to the end
            atexit.unregister(self.close)

    def _run(self) -> None:
        _name_thread(FLUSHER)
        _load_writer()  # loaded by start() already, unless this thread was started by a record (a fork's child)
        while not self._stop:
            self._wake.wait(self.flush_s)
            self._wake.clear()
            if self._stop:
                return
            self.flush()

    # ------------------------------------------------------------------ flushing
    def flush(self, *, wait: bool = False) -> int:
        """Write every pending record now, then drain the spools (:meth:`drain`, ``wait`` as there); returns how
        many were written (failures are counted dropped)."""
        from lakemount.audit import table

        with self._write_lock:
            pending = self._pending  # only this thread takes; request threads may extend it meanwhile
            # Whole records (an extend is one step), taken by slices: C loops, not Python ones, as the GIL is the
            # request path's; the batch's columns are every WIDTH-th item.
            taken = len(pending)
            flat = pending[:taken]
            del pending[:taken]
            batch: list[Sequence[Any]] = [flat[i::WIDTH] for i in range(WIDTH)]
            count = taken // WIDTH
            self.counters["recorded"] += count
            repos = set(batch[REPO])
            by_repo: dict[str, table.Columns] = {}
            if len(repos) == 1:  # the usual batch: no loop in Python to split it
                by_repo[repos.pop()] = batch
            else:
                rows: dict[str, list[Row]] = {}
                for r in zip(*batch):
                    rows.setdefault(r[REPO], []).append(r)  # type: ignore[arg-type]
                by_repo = {repo: table.columns(group) for repo, group in rows.items()}
            written = 0
            if count:
                name = f"{self.host}-{os.getpid()}-{next(self._flushes):08d}.parquet"
                for repo, records in by_repo.items():
                    written += self._write(repo, name, records)
        written += self.drain(wait=wait)
        self._publish()
        return written

    def drain(self, *, wait: bool = False) -> int:
        """Write the spools of short-lived processes of this home as Parquet; returns how many records were written.

        Another thread of this process draining already: returns 0 at once, or
        with ``wait`` (a query about to read) once that drain has written what it
        claimed.  A failing store drops the records of the failing repository
        (counted), as :meth:`flush` does.
        """
        from lakemount.audit import table

        if not self._drain_lock.acquire(blocking=wait):
            return 0
        try:
            written = 0
            try:
                claimed = spool.claim(self.spool_dir, self.host)
            except OSError as exc:
                log.warning("audit: cannot claim the spools: %s", exc)
                return 0
            for path in claimed:
                try:
                    records, bad = spool.read(path)
                except OSError as exc:
                    log.warning("audit: cannot read a spool: %s", exc)
                    continue
                self.counters["recorded"] += len(records) + bad
                self.counters["dropped"] += bad
                by_repo: dict[str, list[Row]] = {}
                for r in records:
                    by_repo.setdefault(r.repo, []).append(row(r))
                name = spool.stem(path) + ".parquet"
                for repo, group in by_repo.items():
                    written += self._write(repo, name, table.columns(group))
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            return written
        finally:
            self._drain_lock.release()

    def _write(self, repo: str, name: str, records: table.Columns) -> int:
        """Store one repository's records (their columns) as file ``name``; how many were written (else counted
        dropped)."""
        from lakemount.audit import table

        n = len(records[0])
        try:
            namespace = self.namespace_of(repo)
            table.write_columns(self.adapter, namespace, name, records)
        except Exception as exc:  # noqa: BLE001 - a failing store drops the batch, never the data path
            self.counters["dropped"] += n
            log.warning("audit: %d records of repository %s dropped: %s", n, repo, exc)
            return 0
        self.counters["written"] += n
        self._expire(repo, namespace)
        return n

    def settle(self) -> int:
        """Before a query: count dead processes' markers, write this process's buffer and every spool of this home.

        Returns how many records were written.  A query then sees everything
        this host recorded until now (other hosts' buffers excepted).
        """
        self._adopt_dead()
        # wait: the flusher thread may be draining a spool this query must see (it would return 0 at once)
        return self.flush(wait=True)

    def _expire(self, repo: str, namespace: str) -> None:
        from lakemount.audit import table

        now = time.monotonic()
        if self.retention_days <= 0 or now - self._expired.get(repo, -EXPIRE_EVERY) < EXPIRE_EVERY:
            return
        self._expired[repo] = now
        try:
            table.expire(self.adapter, namespace, self.retention_days)
        except Exception as exc:  # noqa: BLE001 - retention is retried at the next pass
            log.warning("audit: removing expired partitions of %s failed: %s", repo, exc)

    def _publish(self) -> None:
        folder = os.path.join(run_dir(self.home), "stats")
        path = os.path.join(folder, f"{self.host}-{os.getpid()}.json")
        try:
            os.makedirs(folder, exist_ok=True)
            tmp = path + ".tmp"
            with open(tmp, "w") as f:
                json.dump(self._counts(), f)
            os.replace(tmp, path)
        except OSError as exc:
            log.debug("audit: cannot publish counters: %s", exc)

    def stats(self) -> dict[str, int]:
        """This process's counters (``audit_recorded``, ``audit_written``, ``audit_dropped``, ``audit_lost_intervals``);
        recorded includes the records still waiting for the flusher."""
        return {f"audit_{k}": v for k, v in self._counts().items()}

    def _counts(self) -> dict[str, int]:
        """The counters, recorded including what waits in the buffer (the flusher counts what it takes)."""
        out = dict(self.counters)
        if self._pid == _pid:  # a fork's child that has not started holds its parent's buffer, not its own
            out["recorded"] += len(self._pending) // WIDTH
        return out


def collect(home: str) -> dict[str, int]:
    """The counters of every process sharing ``home`` (live and ended), summed."""
    total = dict.fromkeys(COUNTERS, 0)
    folder = os.path.join(run_dir(home), "stats")
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return total
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(folder, name)) as f:
                data = json.load(f)
        except (OSError, ValueError):
            continue
        for k in COUNTERS:
            if isinstance(data.get(k), int):
                total[k] += data[k]
    return total


def render_metrics(home: str) -> str:
    """The audit counters of every process sharing ``home`` as Prometheus text."""
    texts = {
        "recorded": "Audit records queued.", "written": "Audit records written to the audit tables.",
        "dropped": "Audit records dropped (buffer full or store failing).",
        "lost_intervals": "Processes found ended without flushing their audit trail (each lost at most one flush interval).",
    }
    out = []
    for k, v in collect(home).items():
        name = f"lakemount_audit_{k}_total"
        out += [f"# HELP {name} {texts[k]}", f"# TYPE {name} counter", f"{name} {v}"]
    return "\n".join(out) + "\n"
