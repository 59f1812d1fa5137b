"""``FlakyAdapter``: a block adapter that fails on purpose, for tests.

It wraps a real adapter and injects faults before (or after) delegating, either
scripted ("the next 2 ``put`` calls fail") or at random with a fixed seed, so
a failing test replays exactly.  The faults model what a remote store does to
its clients:

- ``ERROR``: the request fails before reaching the store (``Unavailable``);
- ``ERROR_AFTER``: the store applied the request but the reply was lost
  (``Unavailable`` after the effect; writers must be idempotent);
- ``SLOW``: the request succeeds after a delay;
- ``TIMEOUT``: the request hangs for a delay, then fails (``Unavailable``).
"""

from __future__ import annotations

import enum
import random
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO, TypeVar

from lakemount.block.router import presign
from lakemount.errors import InvalidArgument, Unavailable
from lakemount.graveler.ports import BlockAdapter, ObjectInfo

T = TypeVar("T")

OPERATIONS = frozenset({"put", "put_file", "get", "get_range", "open", "stat", "exists", "copy", "delete", "list"})


class FaultKind(enum.Enum):
    """How an injected fault behaves (see the module docstring for each kind)."""

    ERROR = "error"
    ERROR_AFTER = "error_after"
    SLOW = "slow"
    TIMEOUT = "timeout"


@dataclass(frozen=True, slots=True)
class Fault:
    """One injected failure: what happens, and how long it stalls first."""

    kind: FaultKind = FaultKind.ERROR
    delay: float = 0.0
    where: str = ""  # scripted faults: only calls whose URL holds this text (say the data prefix) suffer it


class FlakyAdapter:
    """Wraps ``inner`` and makes some of its calls fail.

    ``probability`` is the chance that any call of an operation in ``ops``
    (default: all) gets ``random_fault``; draws come from ``random.Random(seed)``
    so a run is reproducible.  Scripted faults queued with :meth:`fail_next`
    take precedence over random ones.  ``injected`` counts the faults dealt per
    operation and ``calls`` every call, for assertions.
    """

    def __init__(
        self,
        inner: BlockAdapter,
        *,
        seed: int = 0,
        probability: float = 0.0,
        ops: Iterable[str] | None = None,
        random_fault: Fault = Fault(),
    ) -> None:
        if not 0.0 <= probability <= 1.0:
            raise InvalidArgument(f"probability must be within [0, 1], got {probability}")
        self.inner = inner
        self.probability = probability
        self.random_fault = random_fault
        self._ops = _check_ops(ops) if ops is not None else OPERATIONS
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._scripted: dict[str, deque[Fault]] = {}
        self.calls: Counter[str] = Counter()
        self.injected: Counter[str] = Counter()

    def fail_next(
        self, op: str, n: int = 1, *, kind: FaultKind = FaultKind.ERROR, delay: float = 0.0, where: str = ""
    ) -> None:
        """Make the next ``n`` calls of operation ``op`` suffer ``kind`` (after ``delay`` seconds); with ``where``,
        the next ``n`` calls whose URL holds that text (the others pass)."""
        _check_ops([op])
        with self._lock:
            self._scripted.setdefault(op, deque()).extend([Fault(kind, delay, where)] * n)

    def heal(self) -> None:
        """Drop scripted faults and stop random ones."""
        with self._lock:
            self._scripted.clear()
            self.probability = 0.0

    def _draw(self, op: str, what: str = "") -> Fault | None:
        with self._lock:
            self.calls[op] += 1
            queue = self._scripted.get(op)
            fault: Fault | None = None
            if queue and queue[0].where not in what:
                pass  # the next scripted fault is for other URLs
            elif queue:
                fault = queue.popleft()
            elif op in self._ops and self.probability > 0.0 and self._rng.random() < self.probability:
                fault = self.random_fault
            if fault is not None:
                self.injected[op] += 1
            return fault

    def _call(self, op: str, what: str, fn: Callable[[], T]) -> T:
        fault = self._draw(op, what)
        if fault is None:
            return fn()
        if fault.delay > 0:
            time.sleep(fault.delay)
        if fault.kind is FaultKind.SLOW:
            return fn()
        if fault.kind is FaultKind.ERROR_AFTER:
            fn()
            raise Unavailable(f"injected fault: reply to {op} {what} lost")
        if fault.kind is FaultKind.TIMEOUT:
            raise Unavailable(f"injected fault: {op} {what} timed out after {fault.delay}s")
        raise Unavailable(f"injected fault: {op} {what} failed")

    # --- BlockAdapter --------------------------------------------------------

    def put(self, url: str, data: bytes) -> None:
        self._call("put", url, lambda: self.inner.put(url, data))

    def put_file(self, url: str, path: str, *, link: bool = False) -> None:
        self._call("put_file", url, lambda: self.inner.put_file(url, path, link=link))

    def touch(self, url: str) -> None:
        self._call("touch", url, lambda: self.inner.touch(url))

    def get(self, url: str) -> bytes:
        return self._call("get", url, lambda: self.inner.get(url))

    def get_range(self, url: str, start: int, length: int) -> bytes:
        return self._call("get_range", url, lambda: self.inner.get_range(url, start, length))

    def open(self, url: str) -> BinaryIO:
        return self._call("open", url, lambda: self.inner.open(url))

    def stat(self, url: str) -> ObjectInfo:
        return self._call("stat", url, lambda: self.inner.stat(url))

    def exists(self, url: str) -> bool:
        return self._call("exists", url, lambda: self.inner.exists(url))

    def copy(self, src_url: str, dst_url: str) -> None:
        self._call("copy", f"{src_url} -> {dst_url}", lambda: self.inner.copy(src_url, dst_url))

    def delete(self, url: str) -> None:
        self._call("delete", url, lambda: self.inner.delete(url))

    def list(self, prefix_url: str) -> Iterator[ObjectInfo]:
        # The fault strikes when the listing starts, not midway through it.
        return self._call("list", prefix_url, lambda: iter(list(self.inner.list(prefix_url))))

    def presign(self, url: str, method: str) -> tuple[str, float] | None:
        """The inner adapter's presigned URL (signing is local: no fault is injected)."""
        return presign(self.inner, url, method)


def _check_ops(ops: Iterable[str]) -> frozenset[str]:
    chosen = frozenset(ops)
    unknown = chosen - OPERATIONS
    if unknown:
        raise InvalidArgument(f"unknown block operation(s): {', '.join(sorted(unknown))}")
    return chosen
