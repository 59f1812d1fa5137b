"""Import and export jobs are one audit record each, with their counts."""

from __future__ import annotations

import json
from pathlib import Path

from lakemount.app import App
from lakemount.audit.context import Actor, acting
from lakemount.audit.table import Filter
from lakemount.config import load
from lakemount.jobs.importer import import_objects


def test_an_import_job_is_one_record_with_its_counts(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    for i in range(7):
        (src / "d" / f"f{i}.txt").write_bytes(b"x" * (i + 1))
    app = App(load(None, env={"LAKEMOUNT_HOME": str(tmp_path / "home"), "LAKEMOUNT_BLOCKSTORE_LOCAL_IMPORT_ROOTS": str(src)}))
    app.catalog.create_repository("jobs")
    with acting(Actor("ops", "cli")):
        report = import_objects(app, str(src), "jobs", "main", "in/", commit=True, engine="in-process", show_progress=False)
    assert app.audit is not None
    app.audit.close()
    recs = list(app.catalog.audit_records("jobs", Filter()))
    imports = [r for r in recs if r.op == "import"]
    assert len(imports) == 1
    r = imports[0]
    assert (r.user, r.frontend, r.ref, r.path, r.bytes) == ("ops", "jobs", "main", "in/", 28)
    assert r.commit == report["commit"]["id"]
    assert json.loads(r.detail)["objects"] == 7
    # The commit the job made is its own record (through the catalog), by the same user.
    assert [(c.op, c.user, c.commit) for c in recs if c.op == "commit"] == [("commit", "ops", r.commit)]
