"""Worker start-up: the heap settling every API and gateway worker does once its state is built."""

from __future__ import annotations

import subprocess
import sys


def test_settle_worker_heap_freezes_start_up_objects_and_raises_the_young_threshold() -> None:
    # In a child: freezing and thresholds are process-wide, the suite keeps CPython's defaults.
    code = (
        "import gc\n"
        "from lakemount.serving.workers import GC_YOUNG_THRESHOLD, settle_worker_heap\n"
        "before = gc.get_threshold()\n"
        "settle_worker_heap()\n"
        "after = gc.get_threshold()\n"
        "assert after == (GC_YOUNG_THRESHOLD, before[1], before[2]), (before, after)\n"
        "assert gc.get_freeze_count() > 1000, gc.get_freeze_count()\n"
        "class Cycle: pass\n"
        "c = Cycle(); c.me = c; import weakref; r = weakref.ref(c); del c\n"
        "gc.collect()\n"
        "assert r() is None  # cycles are still collected\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
