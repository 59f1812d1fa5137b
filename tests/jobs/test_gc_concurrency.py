"""GC while writers keep writing and committing: afterwards every committed and staged object reads back.

Writers go through the catalog in threads of this process (the driver), with
the block adapters' ``touch`` (which the catalog calls on dedup), and deliberately
re-stage bytes that GC considers garbage (dedup), delete paths, and commit,
while two GC runs mark and sweep.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import pytest

from lakemount.app import App
from lakemount.errors import NothingToCommit
from lakemount.jobs.gc import run_gc
from lakemount.jobs.retention import GcRules, store_rules

from tests.jobs.scenario import Model, build_gc_scenario, data_key, live_contents

pytestmark = [pytest.mark.spark, pytest.mark.slow]


class Writer(threading.Thread):
    def __init__(self, m: Model, branch: str, garbage: list[bytes], seed: int, stop: threading.Event) -> None:
        super().__init__(name=f"writer-{branch}", daemon=True)
        self.m, self.branch, self.garbage, self.stop = m, branch, garbage, stop
        self.rng = random.Random(seed)
        self.ops = self.commits = self.revived = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.step()
        except BaseException as exc:  # reported by the test
            self.error = exc

    def step(self) -> None:
        m, rng, branch = self.m, self.rng, self.branch
        self.ops += 1
        roll = rng.random()
        path = f"w/{branch}/{rng.randrange(40)}.txt"
        if roll < 0.35:
            m.put(branch, path, f"{branch} {self.ops} {rng.random()}".encode())
        elif roll < 0.65:
            m.put(branch, path, rng.choice(self.garbage))  # bytes GC is about to collect
            self.revived += 1
        elif roll < 0.75 and path in m.work[branch]:
            m.delete(branch, path)
        elif roll < 0.85:
            try:
                m.commit(branch, 0)
                self.commits += 1
            except NothingToCommit:
                pass
        else:
            time.sleep(0.005)


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
    try:
        time.sleep(0.5)
        first = run_gc(app, "lake", min_age=0)
        run_gc(app, "lake", min_age=0)
    finally:
        stop.set()
        for w in writers:
            w.join(60)
    for w in writers:
        assert w.error is None, f"{w.name}: {w.error!r}"
    assert sum(w.commits for w in writers) > 0 and sum(w.revived for w in writers) > 0
    assert first["trashed"]["data_objects"] > 0, first
    assert not first["warnings"]
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
    return app.refs.get_commit("lake", cid).creation_date > time.time() - 86400
