"""Running a job's Spark program in this process, for inputs too small to be worth a JVM.

A Spark context costs seconds before the first task runs (the JVM, the
context, then Python workers that import lakemount), which is all of the time
of a one-object import or a GC of a small repository.  ``LocalContext``
offers the few ``SparkContext`` and RDD methods the jobs call (``parallelize``,
``mapPartitions``, ``mapPartitionsWithIndex``, ``partitionBy``, ``union``,
``persist``, ``count``, ``collect``, accumulators, broadcasts,
``cancelAllJobs``) and runs every task in the calling thread, one partition
after another, with Spark's semantics where the jobs rely on them: an RDD is
lazy and computed again by each action unless persisted, ``partitionBy`` puts
a record in partition ``partitioner(key) % n``, ``parallelize`` slices like
Spark, and an accumulator sums what tasks add.  So a job's planning and its
task functions are the same code on both engines, and their results are the
same; only where the tasks run differs.

``job_context`` picks the engine: ``spark``, ``in-process``, or ``auto``:
in-process when the job's input is small (its own test), no master URL was
named and no Spark context is up in this process already (then a job costs
no start-up).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from lakemount.errors import InvalidArgument
from lakemount.jobs import session

T = TypeVar("T")
U = TypeVar("U")

ENGINES: Final = ("auto", "spark", "in-process")


class JobCancelled(Exception):
    """``cancelAllJobs`` stopped the running action (``session.interruptible`` turns it into ``Interrupted``)."""


class Accumulator:
    """A counter tasks add to; ``value`` is the sum."""

    def __init__(self, value: int) -> None:
        self.value = value
        self._lock = threading.Lock()

    def add(self, term: int) -> None:
        with self._lock:
            self.value += term


@dataclass
class Broadcast(Generic[T]):
    """A value shared with every task (nothing to ship: tasks run here)."""

    value: T

    def destroy(self) -> None:
        """Nothing to release."""

    def unpersist(self) -> None:
        """Nothing to release."""


@dataclass(frozen=True)
class StageInfo:
    """What ``Progress`` reads of a running stage."""

    numCompletedTasks: int


class StatusTracker:
    """The running action as one stage, its partitions as tasks (for ``session.Progress``)."""

    def __init__(self, context: LocalContext) -> None:
        self.context = context

    def getActiveStageIds(self) -> list[int]:
        return [0] if self.context.running else []

    def getStageInfo(self, _stage: int) -> StageInfo:
        return StageInfo(self.context.done)


class LocalRDD(Generic[T]):
    """A lazy list of partitions, computed by each action unless persisted."""

    def __init__(self, context: LocalContext, compute: Callable[[], list[list[T]]]) -> None:
        self.context = context
        self._compute = compute
        self._cached: list[list[T]] | None = None
        self._persist = False

    def partitions(self) -> list[list[T]]:
        if self._cached is not None:
            return self._cached
        parts = self._compute()
        if self._persist:
            self._cached = parts
        return parts

    def mapPartitions(self, fn: Callable[[Iterator[T]], Iterable[U]]) -> LocalRDD[U]:
        return self.mapPartitionsWithIndex(lambda _i, it: fn(it))

    def mapPartitionsWithIndex(self, fn: Callable[[int, Iterator[T]], Iterable[U]]) -> LocalRDD[U]:
        def compute() -> list[list[U]]:
            out = []
            for i, part in enumerate(self.partitions()):
                self.context.check_cancelled()
                out.append(list(fn(i, iter(part))))
                self.context.done += 1
            return out

        return LocalRDD(self.context, compute)

    def partitionBy(self, n: int, partitioner: Callable[[Any], int]) -> LocalRDD[T]:
        def compute() -> list[list[T]]:
            out: list[list[T]] = [[] for _ in range(n)]
            for part in self.partitions():
                for record in part:
                    out[partitioner(record[0]) % n].append(record)  # type: ignore[index]
            return out

        return LocalRDD(self.context, compute)

    def union(self, other: LocalRDD[T]) -> LocalRDD[T]:
        return self.context.union([self, other])

    def persist(self) -> LocalRDD[T]:
        self._persist = True
        return self

    def unpersist(self) -> LocalRDD[T]:
        self._persist, self._cached = False, None
        return self

    def count(self) -> int:
        return sum(len(p) for p in self.context.action(self))

    def collect(self) -> list[T]:
        return [x for p in self.context.action(self) for x in p]


class LocalContext:
    """The ``SparkContext`` methods the jobs use, running every task in this thread."""

    def __init__(self) -> None:
        # As local[*]: jobs cut their work by it, and the same cut keeps both engines' plans alike.
        self.defaultParallelism = os.cpu_count() or 1
        self.running = False
        self.done = 0  # partitions computed by the running action
        self._cancel = threading.Event()

    def parallelize(self, items: Iterable[T], n: int) -> LocalRDD[T]:
        data = list(items)
        n = max(1, n)
        # Spark's ParallelCollectionRDD slices: partition i holds [i*len/n, (i+1)*len/n).
        parts = [data[i * len(data) // n : (i + 1) * len(data) // n] for i in range(n)]
        return LocalRDD(self, lambda: [list(p) for p in parts])

    def union(self, rdds: list[LocalRDD[T]]) -> LocalRDD[T]:
        return LocalRDD(self, lambda: [p for rdd in rdds for p in rdd.partitions()])

    def accumulator(self, value: int) -> Accumulator:
        return Accumulator(value)

    def broadcast(self, value: T) -> Broadcast[T]:
        return Broadcast(value)

    def statusTracker(self) -> StatusTracker:
        return StatusTracker(self)

    def cancelAllJobs(self) -> None:
        self._cancel.set()

    def check_cancelled(self) -> None:
        if self._cancel.is_set():
            self._cancel.clear()
            raise JobCancelled("job cancelled")

    def action(self, rdd: LocalRDD[T]) -> list[list[T]]:
        self.running, self.done = True, 0
        try:
            self.check_cancelled()
            return rdd.partitions()
        finally:
            self.running = False


JobContext = Any  # a pyspark SparkContext or a LocalContext: the jobs call what both have


def job_context(engine: str, master: str | None, small: Callable[[], bool]) -> tuple[JobContext, str]:
    """The context a job runs on, and the engine's name (``spark`` or ``in-process``).

    ``small()`` is asked only under ``auto``, when the choice depends on it.
    Raises ``InvalidArgument`` for an unknown engine or a master named with
    ``in-process``, ``Unavailable`` when Spark cannot start.
    """
    if engine not in ENGINES:
        raise InvalidArgument(f"unknown engine {engine!r}: use one of {', '.join(ENGINES)}")
    if engine == "in-process" and master is not None:
        raise InvalidArgument(f"--master {master} names a Spark master: not with the in-process engine")
    if engine == "in-process" or (engine == "auto" and master is None and not session.running() and small()):
        return LocalContext(), "in-process"
    return session.get_context(master), "spark"
