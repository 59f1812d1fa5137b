"""Retention: partitions older than audit.retention_days go (the table's expire, the writers, the GC job)."""

from __future__ import annotations

import time
from pathlib import Path

from lakemount.app import App
from lakemount.audit.log import AuditLog
from lakemount.audit.record import AuditRecord, Row, row
from lakemount.audit.table import Filter, files, write
from lakemount.config import load
from lakemount.jobs.gc import run_gc
from lakemount.jobs.retention import GcRules, store_rules


def _old(days: float, path: str) -> Row:
    return row(AuditRecord(time.time() - days * 86400, 1, "u", "s3", "", "ret", "main", "", path, "GetObject", 0, 200))


def test_old_partitions_are_expired_by_the_writer_and_by_gc(tmp_path: Path) -> None:
    app = App(load(None, env={"LAKEMOUNT_HOME": str(tmp_path / "home"), "LAKEMOUNT_AUDIT_RETENTION_DAYS": "7"}))
    cat = app.catalog
    cat.create_repository("ret")
    ns = cat.repository("ret").storage_namespace
    write(app.adapter, ns, "a.parquet", [_old(30, "month-old"), _old(8, "week-old")])
    write(app.adapter, ns, "b.parquet", [_old(1, "day-old")])
    assert len(files(app.adapter, ns)) == 3
    # A writer expires the repositories it writes to (at most hourly).
    log = AuditLog(app.adapter, lambda r: ns, home=str(tmp_path / "home"), flush_s=60, flush_records=100, retention_days=7)
    log.record(repo="ret", op="GetObject", path="now")
    log.close()
    assert sorted(r.path for r in cat.audit_records("ret", Filter())) == ["day-old", "now"]
    # GC does it too, for processes that never write to this repository.
    write(app.adapter, ns, "c.parquet", [_old(20, "again-old")])
    cat.put("ret", "main", "x", b"1")
    cat.commit("ret", "main", "c", committer="t")
    store_rules(app.adapter, ns, GcRules(30))
    report = run_gc(app, "ret", engine="in-process", force=True, min_age=0)
    assert report["audit_files_expired"] == 1
    assert sorted(r.path for r in cat.audit_records("ret", Filter())) == ["day-old", "now"]
