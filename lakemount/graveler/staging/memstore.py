"""The group-commit memstore of ``LsmStaging``: writes gathered per branch and flushed as one L1 file.

Writes go through a memstore per (repo, branch) in this process: a write with
no flush in flight flushes at once; writes arriving during a flush gather and
go as the next one when it ends (or after ``flush_ms``, in parallel), and a leader
whose branch had more writes inside at once lately waits for them (``crowd``: a few
ms at most, never for a lone writer).  A flush
PUTs one file (or keeps a small one for its row), appends it with one
statement, and only then acknowledges every write in it; the append that makes
a token's L1 list ``l1_max`` long hands the token to the ``Compactor``.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Final

from lakemount.errors import InvalidArgument, PreconditionFailed
from lakemount.graveler.model import StagingToken
from lakemount.graveler.ports import StageCheck
from lakemount.graveler.staging.compaction import Compactor
from lakemount.graveler.staging.crowd import GATHER_S, Crowd
from lakemount.graveler.staging.file import (
    tag_all,
)
from lakemount.graveler.staging.files import Part, Shared, StagingFiles

BATCH_MAX: Final = 4096  # entries gathered behind a flush in flight that go beside it instead of waiting
_first = itemgetter(0)


def _held() -> threading.Lock:
    lock = threading.Lock()
    lock.acquire()
    return lock


@dataclass
class _Batch:
    items: dict[bytes, bytes | None] = field(default_factory=dict)
    ready: list[Callable[[], None]] = field(default_factory=list)  # data still on its way (see ``stage``)
    namespaces: set[str] = field(default_factory=set)  # where its writers' data went (``stage``'s namespace)
    # Held until the batch's flush ends.  Its writers wait by taking it and passing it on, each waking the
    # next: an Event's waiters would each make a lock and then queue on its condition's lock once woken.
    done: threading.Lock = field(default_factory=_held)
    error: BaseException | None = None
    followers: int = 0  # writers that joined the leader's batch (fixed once its flush starts)
    writes: int = 0  # stage calls in it
    woken: Iterator[int] = field(default_factory=itertools.count)  # next() is atomic: the last woken knows it is


@dataclass
class _Queue:
    cond: threading.Condition = field(default_factory=threading.Condition)
    pending: _Batch | None = None
    in_flight: int = 0
    gathering: bool = False  # a leader waits for writes in flight beside it: a joining write wakes it
    crowd: Crowd = field(default_factory=Crowd)


class Memstore(Part):
    """The writes of one ``LsmStaging``: a queue per branch, each batch one staging file and one append."""

    def __init__(self, shared: Shared, files: StagingFiles, compactor: Compactor, namespace_of: Callable[[str], str]) -> None:
        super().__init__(shared)
        self.files = files
        self.compactor = compactor
        self._namespace_of = namespace_of
        self._queues: dict[tuple[str, str], _Queue] = {}
        self._namespaces: dict[str, str] = {}

    @property
    def flush_ms(self) -> float:
        return self.shared.flush_ms

    def stage(self, repo: str, branch: str, items: Sequence[tuple[bytes, bytes | None]],
              check: StageCheck | None = None, ready: Callable[[], None] | None = None, namespace: str = "") -> None:
        """Stage ``items`` (None = tombstone) on the branch's current token; returns once they are durable.

        ``ready`` waits for the data the items point at (a PUT on another thread): a write that
        flushes at once stores its staging file meanwhile and appends it only once ``ready``
        returned, so a lone writer's two PUTs overlap and nothing is visible before both are
        stored.  A write that would join other writers' batch waits for ``ready`` first, so its
        data failing fails only itself.

        Raises ``BranchNotFound``/``RepositoryNotFound``, or ``Unavailable`` when the block store or
        the ref store fails during the flush (then nothing of the batch is acknowledged).  A
        ``check`` (``StagingStore.stage``) makes the write its own file, appended in the
        transaction that locks the branch row and runs the check; what it raises writes nothing
        visible (the file it wrote is an orphan, collected later).  ``namespace`` (the one the items'
        data was written under) must be the repository's: the flush's append checks the namespace
        it uses, and a write whose namespace is not that one, read again, raises ``PreconditionFailed``.
        """
        if not items:
            return  # nothing to make durable (the facade checks the branch exists)
        if not all(map(_first, items)):  # (C loops: no Python call per item of a big change)
            raise InvalidArgument("an empty key cannot be staged")
        if namespace and namespace != self._namespace(repo) and namespace != self._namespace(repo, fresh=True):
            raise PreconditionFailed(f"repository {repo} was created again with another storage namespace")
        if check is not None:
            if ready is not None:
                ready()
            self.compactor.maybe_compact(*self._flush(repo, branch, dict(items), check, required={namespace} - {""}))
            return
        q = self._queues.get((repo, branch))  # a dict read is atomic: the lock only to add one
        if q is None:
            with self.lock:
                q = self._queues.setdefault((repo, branch), _Queue())
        if ready is not None:
            with q.cond:
                alone = q.pending is None and not q.in_flight
            if not alone:
                ready()
                ready = None
        with q.cond:
            now = time.monotonic()
            q.crowd.enter(now)
            batch = q.pending
            lead = batch is None
            if batch is None:
                batch = q.pending = _Batch()
            batch.items.update(items)
            batch.writes += 1
            if namespace:
                batch.namespaces.add(namespace)
            if not lead:
                batch.followers += 1
                if q.gathering:
                    q.cond.notify_all()
            if ready is not None:  # (rarely a follower: another writer came between the check and here)
                batch.ready.append(ready)
            if lead:
                # No fixed wait: flush now unless a flush is in flight; then gather what arrives
                # until it ends (the next batch is whatever came meanwhile: the busier the branch,
                # the bigger the file and the fewer statements per entry).  Only a batch that
                # is already big, or a flush in flight longer than flush_ms, goes beside it.
                deadline = now + self.flush_ms / 1000.0
                while q.in_flight and len(batch.items) < BATCH_MAX:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    q.cond.wait(left)
                if not q.in_flight:
                    self._gather(q, batch)
                q.pending = None
                q.in_flight += 1
            elif len(batch.items) >= BATCH_MAX:
                q.cond.notify_all()  # the lead flushes this big batch beside the one in flight
        if not lead:
            batch.done.acquire()
            batch.done.release()
            if next(batch.woken) + 1 == batch.followers:
                self._flushed(q)
            if batch.error is not None:
                raise batch.error
            return
        token: StagingToken | None = None
        l1 = 0
        try:
            token, l1 = self._flush(repo, branch, batch.items, ready=batch.ready, required=batch.namespaces)
        except BaseException as exc:
            batch.error = exc
            raise
        finally:
            # The flush counts as in flight until the last of its writers is woken, and that writer
            # ends it: the writers woken one after another join the next batch meanwhile, so it
            # holds them all and not the half that came back before the next flush began (two
            # half batches alternating: twice the flushes and their CPU per entry, and a leader's
            # flush work holding the GIL while the woken queue for it).
            with q.cond:
                q.crowd.leave(batch.writes)
            if not batch.followers:
                self._flushed(q)
            batch.done.release()
        self.compactor.maybe_compact(token, l1)

    def _gather(self, q: _Queue, batch: _Batch) -> None:
        """Wait (``q``'s lock held, at most ``GATHER_S``) until ``batch`` holds as many writes as the branch
        had inside at once lately: a lone writer flushes at once (see ``crowd``)."""
        now = time.monotonic()
        if batch.writes >= q.crowd.expected(now):
            return
        q.gathering = True
        deadline = now + GATHER_S
        with self.lock:
            self.stats.gathers += 1
        while batch.writes < q.crowd.expected(now) and len(batch.items) < BATCH_MAX and now < deadline and not q.in_flight:
            q.cond.wait(deadline - now)
            now = time.monotonic()
        q.gathering = False

    @staticmethod
    def _flushed(q: _Queue) -> None:
        with q.cond:
            q.in_flight -= 1
            q.cond.notify_all()

    def _namespace(self, repo: str, fresh: bool = False) -> str:
        ns = None if fresh else self._namespaces.get(repo)
        if ns is None:
            ns = self._namespaces[repo] = self._namespace_of(repo)
        return ns

    def _flush(
        self, repo: str, branch: str, items: dict[bytes, bytes | None], check: StageCheck | None = None,
        ready: Sequence[Callable[[], None]] = (), required: Collection[str] = (),
    ) -> tuple[StagingToken, int]:
        """Write ``items`` as one L1 file, wait for ``ready`` (the data the items point at), and append
        the file; the token it went to and its L1 length now.  ``required``: the namespaces the items'
        data was written under; a repository whose namespace is another one (created again elsewhere)
        gets none of them (``PreconditionFailed``)."""
        keys = sorted(items)
        values = tag_all(map(items.__getitem__, keys))
        judge = None if check is None else (lambda b: check(b, self.shared.staged_get))
        for fresh in (False, True):
            ns = self._namespace(repo, fresh)
            if any(r != ns for r in required):
                if fresh:
                    raise PreconditionFailed(f"repository {repo} was created again with another storage namespace")
                continue
            info, data = self.files.write_file(ns, keys, values, 1)
            for wait in ready:
                wait()  # raises if the data failed: the file is an orphan, nothing is acknowledged
            ready = ()
            try:
                token, l1 = self.lists.append(repo, branch, ns, info, judge, data)
            except PreconditionFailed:
                if fresh:
                    raise
                continue  # the repository was created again elsewhere: write into its namespace
            with self.lock:
                self.stats.flushes += 1
                self.stats.inline_flushes += info.inline
                self.stats.entries_flushed += len(keys)
            return token, l1
        raise AssertionError("unreachable")
