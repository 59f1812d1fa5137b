"""Ctrl-C in the middle of ``gc run``: one ``Interrupted`` line, nothing half-done that a rerun cannot finish."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import pytest

from lakemount.app import App
from lakemount.block.trash import trash_key
from lakemount.graveler.committed.store import join
from lakemount.jobs.gc import run_gc
from lakemount.jobs.retention import GcRules, store_rules
from lakemount.jobs.session import Interrupted
from tests.jobs.scenario import data_key

pytestmark = [pytest.mark.spark]


def _garbage_repo(app: App, repo: str, n: int) -> tuple[str, list[str]]:
    """A repository whose main holds ``keep`` and whose ``n`` other objects only dropped staging referenced, all aged."""
    app.catalog.create_repository(repo)
    app.catalog.put(repo, "main", "keep", b"kept bytes")
    app.graveler.commit(repo, "main", "keep")
    garbage = [f"garbage {repo} {i}".encode() for i in range(n)]
    for i, data in enumerate(garbage):
        app.catalog.put(repo, "main", f"g/{i}", data)
    for i in range(n):
        app.catalog.delete(repo, "main", f"g/{i}")
    ns = app.catalog.repository(repo).storage_namespace
    root = ns[len("local://") :]
    old = time.time() - 3600
    for data in [*garbage, b"kept bytes"]:
        os.utime(f"{root}/{data_key(data)}", (old, old))
    store_rules(app.adapter, ns, GcRules(7))
    return ns, sorted(data_key(d) for d in garbage)


def _read(app: App, repo: str, path: str) -> bytes:
    cat = app.catalog
    return cat.read(cat.repository(repo), cat.stat(repo, "main", path))


def _interrupt_once_a_job_runs(sc: Any) -> None:
    def run() -> None:
        deadline = time.monotonic() + 60
        while not sc.statusTracker().getActiveJobsIds() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=run, daemon=True).start()


def _run_interrupted(app: App, repo: str, **kw: Any) -> BaseException | None:
    try:
        run_gc(app, repo, min_age=0, buckets=4, show_progress=False, **kw)
    except KeyboardInterrupt as exc:  # not pytest.raises: a bare KeyboardInterrupt would end the whole session
        return exc
    return None


@pytest.mark.parametrize("phase", ["mark:start", "sweep:moves"])
def test_ctrl_c_mid_gc_is_interrupted_and_a_rerun_deletes_what_it_should(
    app: App, spark: Any, phase: str, caplog: pytest.LogCaptureFixture
) -> None:
    repo = f"gcint-{phase.split(':')[0]}"
    ns, garbage = _garbage_repo(app, repo, 60)
    before = signal.getsignal(signal.SIGINT)

    def observer(event: str, _mark_id: str) -> None:
        if event == phase:
            _interrupt_once_a_job_runs(spark.sparkContext)

    caught = _run_interrupted(app, repo, observer=observer)
    assert isinstance(caught, Interrupted), repr(caught)
    # py4j logged a traceback when KeyboardInterrupt hit it in the middle of a call.
    assert not [r for r in caplog.records if "KeyboardInterrupt" in r.getMessage()]
    if phase == "mark:start":
        assert "nothing was moved or deleted" in str(caught)
    else:
        assert "--sweep" in str(caught) and "run" in str(caught)
    assert signal.getsignal(signal.SIGINT) is before
    # Nothing referenced was touched.
    assert _read(app, repo, "keep") == b"kept bytes"

    again = run_gc(app, repo, min_age=0, buckets=4, show_progress=False)
    assert again["already_gone"] == 0 or phase == "sweep:moves"
    for key in garbage:  # each garbage object is in the trash (or already purged), none left in data/
        assert not app.adapter.exists(join(ns, key)), key
    trashed = sum(app.adapter.exists(join(ns, trash_key(k) or "")) for k in garbage)
    assert trashed + again["purged"]["data_objects"] == len(garbage)
    assert _read(app, repo, "keep") == b"kept bytes"


def test_ctrl_c_between_gc_jobs_stops_before_the_next_one(app: App, spark: Any) -> None:
    # A Ctrl-C while the driver works between two Spark jobs: the next job must not start.
    ns, garbage = _garbage_repo(app, "gcint-between", 20)

    def observer(event: str, _mark_id: str) -> None:
        if event == "sweep:moves":
            os.kill(os.getpid(), signal.SIGINT)

    caught = _run_interrupted(app, "gcint-between", observer=observer)
    assert isinstance(caught, Interrupted), repr(caught)
    assert all(app.adapter.exists(join(ns, k)) for k in garbage)  # the sweep never began
