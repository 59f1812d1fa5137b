"""Parallel workers (pytest-xdist, ``-n N``): whole files per worker, the shared Spark context's tests together.

``scripts/test.sh`` runs the suite with ``-n`` (docs/TESTING.md). Each worker is a test process of its own, so
what a run pays for once (the PostgreSQL cluster of tests/postgres.py, the browser of tests/chromium.py, the Spark
context and moto server of tests/jobs) a worker pays for once; the unit of work a worker takes decides how often:

- a test module goes to one worker whole, so a module fixture (a ``lakemount serve``, a gateway) starts once;
- the modules of a ``SHARED`` unit go to one worker together: they share something too costly to pay per worker
  (a JVM: tests/jobs' Spark context, tests/fuse/test_spark_mount.py's).

The order the workers take the units in (``pytest_collection_modifyitems`` on each worker, the same on all: xdist
compares their collections): the units that hold a slow test (marked ``slow``, ``spark`` or ``fuse``) first, the
bigger (more tests) first, so that no long unit starts last and holds the run's end; then the rest, the bigger first; the browser's
tests last, as tests/chromium.py wants (a worker that ran one cannot run ``asyncio.run`` after it). xdist's own
reordering is off (``--no-loadscope-reorder`` is implied): it would mix the browser's units in among the others.

A run without ``-n`` (or without xdist) is unchanged: the hook below only acts in a worker.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tests import tiers

# directory (with its slash) or module, relative to the repository -> the unit its tests join, with the others of
# that unit on one worker. "spark": the JVM (20-40 s to start) that a process's Spark contexts reuse, and tests/jobs'
# moto server, started once.
SHARED: dict[str, str] = {
    "tests/jobs/": "spark",  # tests/jobs/conftest.py's session-wide local[2] context and moto server
    "tests/fuse/test_spark_mount.py": "spark",  # a local[2] session of its own, on the same JVM
}

# What makes a unit long: a test with one of these tiers.
LONG = {"slow", "spark", "fuse"}


def scope_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its module, or the ``SHARED`` unit of its module or directory."""
    path = nodeid.split("::", 1)[0]
    for prefix, unit in SHARED.items():
        if path.startswith(prefix):
            return unit
    return path


def _tiers(item: pytest.Item) -> set[str]:
    return tiers.item_tiers(item) | {m.name for m in item.iter_markers()}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a worker: order the units (long first, then by size; the browser's last, as tests/chromium.py wants)."""
    if not hasattr(config, "workerinput"):
        return
    size = Counter(scope_of(item.nodeid) for item in items)
    long = {scope_of(item.nodeid) for item in items if _tiers(item) & LONG}
    browser = {scope_of(item.nodeid) for item in items if "chromium" in getattr(item, "fixturenames", ())}
    first: dict[str, int] = {}
    for i, item in enumerate(items):
        first.setdefault(scope_of(item.nodeid), i)

    def key(item: pytest.Item) -> tuple[bool, bool, int, int]:
        scope = scope_of(item.nodeid)
        return (scope in browser, scope not in long, -size[scope], first[scope])

    items.sort(key=key)  # stable: a unit's tests keep their order


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With ``-n`` and xdist's default ``--dist load``: units of ``scope_of``, handed out in the workers' order.

    Another ``--dist`` asked for by name (``loadfile``, ``loadgroup``...) is xdist's own.
    """
    if config.getoption("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByUnit(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    config.option.loadscopereorder = False
    return ByUnit(config, log)
