"""Mount-wide metrics, rendered as Prometheus text for ``.lakefs/stats``.

Per operation: a call counter, an error counter by errno and a latency
histogram; plus byte counters (read, written, fetched from the block store,
staged) and the data-block cache's hits and misses by tier.  The cache
package's own counters (ranges, metaranges, commits) are appended when the
text is rendered.  Everything is in-process and lock-protected; a scrape costs
a copy of a few dicts.
"""

from __future__ import annotations

import bisect
import errno as errno_mod
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Final

# Seconds; the upper bounds of the latency histogram buckets (then +Inf).
BUCKETS: Final = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class _Histogram:
    __slots__ = ("counts", "sum")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(BUCKETS, seconds)] += 1
        self.sum += seconds


class Metrics:
    """Counters and histograms of one mount; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ops: dict[str, _Histogram] = {}
        self._errors: Counter[tuple[str, int]] = Counter()
        self._counters: Counter[str] = Counter()

    def observe(self, op: str, seconds: float, err: int = 0) -> None:
        """Record one call of ``op`` that took ``seconds`` and failed with ``err`` (0: success)."""
        with self._lock:
            h = self._ops.get(op)
            if h is None:
                h = self._ops[op] = _Histogram()
            h.observe(seconds)
            if err:
                self._errors[(op, err)] += 1

    def add(self, name: str, n: int = 1) -> None:
        """Add ``n`` to the counter ``name`` (e.g. ``read_bytes``, ``block_hits_ram``)."""
        with self._lock:
            self._counters[name] += n

    def counter(self, name: str) -> int:
        with self._lock:
            return self._counters[name]

    def op_count(self, op: str) -> int:
        with self._lock:
            h = self._ops.get(op)
            return sum(h.counts) if h else 0

    def render(self, extra: Mapping[str, Mapping[str, int]] | None = None, gauges: Callable[[], Mapping[str, float]] | None = None) -> str:
        """Prometheus text exposition: metrics of the mount, then ``extra`` cache counters by tier."""
        with self._lock:
            ops = {op: (list(h.counts), h.sum) for op, h in self._ops.items()}
            errors = dict(self._errors)
            counters = dict(self._counters)
        out: list[str] = []
        out += [
            "# HELP lakemount_fuse_ops_total Filesystem operations handled.",
            "# TYPE lakemount_fuse_ops_total counter",
        ]
        for op in sorted(ops):
            out.append(f'lakemount_fuse_ops_total{{op="{op}"}} {sum(ops[op][0])}')
        out += [
            "# HELP lakemount_fuse_op_errors_total Operations that returned an error, by errno name.",
            "# TYPE lakemount_fuse_op_errors_total counter",
        ]
        for (op, err), n in sorted(errors.items()):
            out.append(f'lakemount_fuse_op_errors_total{{op="{op}",errno="{errno_mod.errorcode.get(err, err)}"}} {n}')
        out += [
            "# HELP lakemount_fuse_op_seconds Latency of filesystem operations.",
            "# TYPE lakemount_fuse_op_seconds histogram",
        ]
        for op in sorted(ops):
            counts, total = ops[op]
            cumulative = 0
            for bound, n in zip((*BUCKETS, float("inf")), counts, strict=True):
                cumulative += n
                le = "+Inf" if bound == float("inf") else repr(bound)
                out.append(f'lakemount_fuse_op_seconds_bucket{{op="{op}",le="{le}"}} {cumulative}')
            out.append(f'lakemount_fuse_op_seconds_sum{{op="{op}"}} {total:.6f}')
            out.append(f'lakemount_fuse_op_seconds_count{{op="{op}"}} {cumulative}')
        for name in sorted(counters):
            metric = f"lakemount_fuse_{name}_total"
            out += [f"# TYPE {metric} counter", f"{metric} {counters[name]}"]
        if extra:
            out += [
                "# HELP lakemount_cache Counters of the immutable-object caches (ranges, metaranges, commits, data), by tier.",
                "# TYPE lakemount_cache gauge",
            ]
            for tier in sorted(extra):
                for key in sorted(extra[tier]):
                    out.append(f'lakemount_cache{{tier="{tier}",counter="{key}"}} {extra[tier][key]}')
        if gauges is not None:
            for name, value in sorted(gauges().items()):
                metric = f"lakemount_fuse_{name}"
                out += [f"# TYPE {metric} gauge", f"{metric} {value:g}"]
        return "\n".join(out) + "\n"
