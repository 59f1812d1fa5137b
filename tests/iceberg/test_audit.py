"""The Iceberg catalog writes to the audit trail (issue 38 item 1): namespaces and tables created and dropped,
and every table commit with its snapshot, the files it added and its schema change, queryable by table."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from lakemount.serving.http import BytesBody, Request
from tests.audit.conftest import Lake, basic

NS = quote("ice\x1fmain\x1fdb", safe="")
SCHEMA = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


@pytest.fixture
def lake(tmp_path: Path) -> Iterator[Lake]:
    lk = Lake(tmp_path / "home")
    lk.app.catalog.create_repository("ice")
    yield lk
    if lk.app.audit is not None:
        lk.app.audit.close()


def rest(lake: Lake, method: str, path: str, body: Any = None, query: str = "",
         auth: tuple[str, str] | None = None) -> tuple[int, Any]:
    raw = b"" if body is None else json.dumps(body).encode()
    req = Request(method, "/iceberg/api/v1" + path, query, (auth or lake.auth, ("content-length", str(len(raw)))),
                  BytesBody(raw))
    resp = lake.api.handle(req)
    data = resp.body if isinstance(resp.body, bytes) else b"".join(resp.body)
    if resp.close is not None:
        resp.close()
    return resp.status, json.loads(data) if data.strip() else None


def snapshot(sid: int, parent: int | None, files: int, records: int) -> dict[str, Any]:
    snap: dict[str, Any] = {
        "snapshot-id": sid, "timestamp-ms": int(time.time() * 1000), "sequence-number": sid,
        "manifest-list": f"s3://ice/main/db/events/metadata/snap-{sid}.avro", "schema-id": 0,
        "summary": {"operation": "append", "added-data-files": str(files), "added-records": str(records)},
    }
    if parent is not None:
        snap["parent-snapshot-id"] = parent
    return snap


def append(sid: int, parent: int | None, files: int, records: int) -> dict[str, Any]:
    return {"requirements": [], "updates": [
        {"action": "add-snapshot", "snapshot": snapshot(sid, parent, files, records)},
        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": sid}]}


def test_namespace_and_table_changes_and_every_commit_are_audit_records(lake: Lake) -> None:
    assert rest(lake, "POST", "/namespaces", {"namespace": ["ice", "main", "db"]})[0] == 200
    assert rest(lake, "POST", f"/namespaces/{NS}/tables", {"name": "events", "schema": SCHEMA})[0] == 200
    assert rest(lake, "POST", f"/namespaces/{NS}/tables/events", append(1, None, 3, 30))[0] == 200
    add_column = {"requirements": [], "updates": [
        {"action": "add-schema", "schema": {**SCHEMA, "schema-id": 1, "fields": [
            *SCHEMA["fields"], {"id": 2, "name": "name", "type": "string", "required": False}]}},
        {"action": "set-current-schema", "schema-id": -1}]}
    assert rest(lake, "POST", f"/namespaces/{NS}/tables/events", add_column)[0] == 200
    assert rest(lake, "POST", "/transactions/commit", {"table-changes": [
        {"identifier": {"namespace": ["ice", "main", "db"], "name": "events"}, **append(2, 1, 2, 5)}]})[0] == 204
    reader_key = lake.user("reader")  # no policy: no WriteRepo
    refused = rest(lake, "POST", f"/namespaces/{NS}/tables/events", append(3, 2, 1, 1), auth=basic(*reader_key))
    assert refused[0] == 403
    assert rest(lake, "DELETE", f"/namespaces/{NS}/tables/events")[0] == 204
    assert rest(lake, "DELETE", f"/namespaces/{NS}")[0] == 204

    table = lake.records("ice", path="db/events/")  # the table's history: everything done to it, in order
    assert [(r.op, r.status) for r in table] == [
        ("createTable", 200), ("updateTable", 200), ("updateTable", 200), ("commitTransaction", 204),
        ("updateTable", 403), ("dropTable", 204)]
    for r in table:
        assert (r.frontend, r.repo, r.ref, r.path) == ("iceberg", "ice", "main", "db/events/"), r
        assert r.user == ("reader" if r.status == 403 else "admin"), r
    details = [json.loads(r.detail) for r in table]
    assert all(d["table"] == "db.events" for d in details)
    created, first, evolved, second, _refused, _dropped = details
    assert created["schema_id"] == 0 and created["snapshot_id"] in (None, -1)
    assert (first["snapshot_id"], first["operation"], first["added_data_files"], first["added_records"]) == (1, "append", 3, 30)
    assert (first["schema_changed"], evolved["schema_changed"], evolved["schema_id"]) == (False, True, 1)
    assert evolved["actions"] == ["add-schema", "set-current-schema"] and evolved["snapshot_id"] == 1
    assert (second["snapshot_id"], second["added_data_files"], second["schema_id"]) == (2, 2, 1)
    assert first["metadata"].startswith("db/events/metadata/") and first["metadata"] != second["metadata"]
    # These snapshots name manifest lists nobody wrote: the commits held (200 above), their records say why no paths.
    assert "added_files" not in first and "manifest list is missing" in first["added_files_error"]

    namespace = [(r.op, r.path, json.loads(r.detail)) for r in lake.records("ice", path="db/") if r.op.endswith("Namespace")]
    assert namespace == [("createNamespace", "db/", {"namespace": "db"}), ("dropNamespace", "db/", {"namespace": "db"})]

    status, body = rest_api_audit(lake, "path=db/events/&op=updateTable")  # what an auditor asks the API
    assert status == 200 and [(r["frontend"], r["status"]) for r in body["results"]] == [
        ("iceberg", 200), ("iceberg", 200), ("iceberg", 403)]


def rest_api_audit(lake: Lake, query: str) -> tuple[int, Any]:
    req = Request("GET", "/api/v1/repositories/ice/audit", query, (lake.auth, ("content-length", "0")), BytesBody(b""))
    resp = lake.api.handle(req)
    data = resp.body if isinstance(resp.body, bytes) else b"".join(resp.body)
    return resp.status, json.loads(data)
