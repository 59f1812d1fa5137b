"""GC while writers keep writing and committing: afterwards every committed and staged object reads back.

Writers go through the catalog in threads of this process (the driver), with
the block adapters' ``touch`` (which the catalog calls on dedup), and deliberately
re-stage bytes that GC considers garbage (dedup), delete paths, and commit,
while two GC runs mark and sweep.  Each writer operation is timed, and GC's
observer (``run_gc(observer=...)``) times the phases, so the test shows that
writes, revivals of garbage and commits happened *inside* the mark, the
re-mark and the sweep's moves, not merely around them.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from typing import Any

import pytest

from lakemount.app import App
from lakemount.errors import NothingToCommit
from lakemount.jobs.gc import GC_EVENTS, run_gc
from lakemount.jobs.retention import GcRules, store_rules
from tests.jobs.scenario import Model, build_gc_scenario, data_key, live_contents

pytestmark = [pytest.mark.spark, pytest.mark.slow]


class Writer(threading.Thread):
    def __init__(self, m: Model, branch: str, garbage: list[bytes], seed: int, stop: threading.Event) -> None:
        super().__init__(name=f"writer-{branch}", daemon=True)
        self.m, self.branch, self.garbage, self.stop = m, branch, garbage, stop
        self.rng = random.Random(seed)
        self.ops = self.commits = self.revived = 0
        self.done: list[tuple[str, float, float]] = []  # (kind, monotonic start, monotonic end) of each operation
        self.landed = threading.Event()  # its first operation ended (or it failed): the writer is under way
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.step()
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            self.landed.set()  # a writer that ends is not waited for

    def step(self) -> None:
        m, rng, branch = self.m, self.rng, self.branch
        self.ops += 1
        roll = rng.random()
        path = f"w/{branch}/{rng.randrange(40)}.txt"
        start = time.monotonic()
        if roll < 0.35:
            m.put(branch, path, f"{branch} {self.ops} {rng.random()}".encode())
            kind = "put"
        elif roll < 0.65:
            m.put(branch, path, rng.choice(self.garbage))  # bytes GC is about to collect
            self.revived += 1
            kind = "revive"
        elif roll < 0.75 and path in m.work[branch]:
            m.delete(branch, path)
            kind = "delete"
        elif roll < 0.85:
            try:
                m.commit(branch, 0)
                self.commits += 1
                kind = "commit"
            except NothingToCommit:
                return
        else:
            time.sleep(0.005)
            return
        self.done.append((kind, start, time.monotonic()))
        self.landed.set()


class Phases:
    """GC's observer: the monotonic time of each event of each mark."""

    def __init__(self) -> None:
        self.at: dict[tuple[str, str], float] = {}
        self.marks: list[str] = []

    def __call__(self, event: str, mark_id: str) -> None:
        assert event in GC_EVENTS and (event, mark_id) not in self.at
        if mark_id not in self.marks:
            self.marks.append(mark_id)
        self.at[(event, mark_id)] = time.monotonic()

    def window(self, mark_id: str, first: str, last: str) -> tuple[float, float]:
        return self.at[(first, mark_id)], self.at[(last, mark_id)]


def inside(writers: list[Writer], window: tuple[float, float]) -> Counter[str]:
    """How many operations of each kind began and ended within ``window``."""
    lo, hi = window
    return Counter(kind for w in writers for kind, t0, t1 in w.done if lo <= t0 and t1 <= hi)


def test_gc_while_writers_write_and_commit(app: App, spark: Any) -> None:
    m, retained = build_gc_scenario(app)
    ns = app.catalog.repository("lake").storage_namespace
    store_rules(app.adapter, ns, GcRules(14, (("dev", 7), ("main", 30))))
    garbage = sorted(m.written - live_contents(m, retained))
    assert len(garbage) > 10
    m.branch("w1", "main")
    m.branch("w2", "dev")
    time.sleep(1.2)
    stop = threading.Event()
    # Writers bring back half of the garbage; the other half must go.
    writers = [Writer(m, b, garbage[::2], i, stop) for i, b in enumerate(("w1", "w2", "exp"))]
    for w in writers:
        w.start()
    phases = Phases()
    try:
        for w in writers:  # GC starts once every writer's first operation landed
            assert w.landed.wait(60), f"{w.name} ended no operation in 60 s"
        first = run_gc(app, "lake", min_age=0, observer=phases)
        run_gc(app, "lake", min_age=0, observer=phases)
    finally:
        stop.set()
        for w in writers:
            w.join(60)
    for w in writers:
        assert w.error is None, f"{w.name}: {w.error!r}"
    assert sum(w.commits for w in writers) > 0 and sum(w.revived for w in writers) > 0
    assert first["trashed"]["data_objects"] > 0, first
    assert not first["warnings"]
    # The writes overlapped GC: in each run, writes of new bytes, revivals of garbage and commits began and
    # ended inside the mark (between T and mark.json), inside the re-mark, and inside the sweep's moves.
    assert len(phases.marks) == 2 and sorted(e for e, _ in phases.at) == sorted(GC_EVENTS * 2)
    for mark_id in phases.marks:
        assert [phases.at[(e, mark_id)] for e in GC_EVENTS] == sorted(phases.at[(e, mark_id)] for e in GC_EVENTS)
        for first_event, last_event, kinds in (
            ("mark:start", "mark:end", ("put", "revive", "commit")),
            ("sweep:start", "sweep:moves", ("put", "revive", "commit")),
            ("sweep:moves", "sweep:end", ("put", "revive", "commit")),
        ):
            seen = inside(writers, phases.window(mark_id, first_event, last_event))
            print(f"{mark_id} {first_event}..{last_event}: {dict(seen)}")
            assert all(seen[k] > 0 for k in kinds), (mark_id, first_event, last_event, dict(seen))
    # Everything the rules keep, and every branch (committed and staged), reads back byte for byte.
    for cid in retained | {c for c in m.trees if c not in retained and _recent(app, c)}:
        assert m.read_tree(cid) == m.trees[cid], f"commit {cid[:12]}"
    for branch, tree in m.work.items():
        assert m.read_tree(branch) == tree, f"branch {branch}"
    # Bytes the writers brought back are there even if GC had marked them.
    for branch, tree in m.work.items():
        for data in tree.values():
            assert app.adapter.exists(f"{ns}/{data_key(data)}"), branch


def _recent(app: App, cid: str) -> bool:
    return app.metastore.get_commit("lake", cid).creation_date > time.time() - 86400
