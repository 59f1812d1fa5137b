"""GC's mark reads staged entries through the configured staging backend: with ``staging.backend = lsm``
the data objects that only staging files reference are live (not garbage), and so are they with ``sql``."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakemount.app import App
from lakemount.config import load
from lakemount.jobs.gc_tasks import live_keys
from tests.jobs.scenario import sha


class _Counter:
    def __init__(self) -> None:
        self.value = 0

    def add(self, n: int) -> None:
        self.value += n


@pytest.mark.parametrize("backend", ["sql", "lsm"])
def test_objects_only_staging_references_are_live(tmp_path: Path, backend: str) -> None:
    config = load(env={"LAKEMOUNT_HOME": str(tmp_path / "home"), "LAKEMOUNT_CACHE_DISK_BYTES": "0",
                       "LAKEMOUNT_STAGING_BACKEND": backend})
    app = App(config)
    app.catalog.create_repository("lake")
    for i in range(5):
        app.catalog.put("lake", "main", f"f{i}.txt", b"staged %d" % i)
    ns = app.catalog.repository("lake").storage_namespace
    branch = app.graveler.get_branch("lake", "main")
    counters = (_Counter(), _Counter(), _Counter())
    found = {s for _b, shas in live_keys(config, ns, 1, counters, [("staging", t) for t in branch.tokens]) for s in shas}
    assert found == {sha(b"staged %d" % i) for i in range(5)}
    assert counters[1].value == 5  # five staged entries read
