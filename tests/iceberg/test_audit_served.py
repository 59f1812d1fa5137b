"""The Iceberg catalog's audit records as a client's real work leaves them (issue 38 item 1), on a served lake:
pyiceberg's appends name the data files they added, and views are created, replaced, renamed (a record at each
name) and dropped like tables."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from typing import Any

import pytest

pytest.importorskip("pyiceberg")

from pyiceberg.view.metadata import SQLViewRepresentation, ViewVersion  # noqa: E402

from tests.api.conftest import Served  # noqa: E402
from tests.iceberg.test_protocol import BASIC, call  # noqa: E402
from tests.iceberg.test_pyiceberg import batch, new_table  # noqa: E402
from tests.iceberg.test_views import VIEW_SCHEMA, replace  # noqa: E402


def audit(lake: Served, repo: str, **query: str) -> list[dict[str, Any]]:
    """The repository's audit records that ``query`` keeps (getAuditLog, oldest first), as the admin asks them."""
    url = f"{lake.api}/api/v1/repositories/{repo}/audit?" + urllib.parse.urlencode({**query, "amount": "1000"})
    req = urllib.request.Request(url, headers={"Authorization": BASIC})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())["results"]  # type: ignore[no-any-return]


def records_of(lake: Served, repo: str, want: int, **query: str) -> list[dict[str, Any]]:
    """At least ``want`` records that ``query`` keeps, waiting for the server's flush (the API writes its own
    process's buffer before it answers; a deadline, not a sleep, for a loaded machine)."""
    deadline = time.monotonic() + 60
    while len(found := audit(lake, repo, **query)) < want:
        assert time.monotonic() < deadline, f"only {len(found)} of {want} audit records for {query} ever appeared"
        time.sleep(0.2)
    return found


def test_a_commit_record_names_the_data_files_pyiceberg_added(lake: Served, catalog: Any, repo: Any) -> None:
    table = new_table(catalog, repo.id, "main")
    table.append(batch([1, 2]))
    first_files = {f["file_path"] for f in table.inspect.files().to_pylist()}
    table.append(batch([3]))
    files = {f["file_path"] for f in table.inspect.files().to_pylist()}
    in_ref = f"s3://{repo.id}/main/"
    assert len(first_files) == 1 and len(files - first_files) == 1 and all(f.startswith(in_ref) for f in files)

    commits = records_of(lake, repo.id, 2, path="db/events/", op="updateTable")
    details = [json.loads(r["detail"]) for r in commits]
    assert [d["added_files"] for d in details] == [[p.removeprefix(in_ref)] for p in (*first_files, *(files - first_files))]
    assert [(d["added_data_files"], d["added_records"], d["operation"]) for d in details] == [(1, 2, "append"), (1, 1, "append")]
    assert all(d["added_files"][0].startswith("db/events/data/") and "added_files_error" not in d for d in details)


def test_views_are_created_replaced_renamed_and_dropped_on_the_trail(lake: Served, catalog: Any, repo: Any) -> None:
    catalog.create_namespace((repo.id, "main", "db"))
    catalog.create_view((repo.id, "main", "db", "recent"), VIEW_SCHEMA, ViewVersion(
        schema_id=0, representations=[SQLViewRepresentation(type="sql", sql="SELECT id FROM events", dialect="spark")],
        default_namespace=["db"]))
    status, answer = replace(lake, repo.id, "main", "recent", "SELECT id FROM events WHERE id > 10")
    assert status == 200, answer
    status, answer = call(lake, "POST", "/v1/views/rename", {
        "source": {"namespace": [repo.id, "main", "db"], "name": "recent"},
        "destination": {"namespace": [repo.id, "main", "db"], "name": "latest"}})
    assert status == 204, answer
    catalog.drop_view((repo.id, "main", "db", "latest"))

    old = records_of(lake, repo.id, 3, path="db/recent/")
    assert [(r["op"], r["status"], r["frontend"], r["ref"]) for r in old] == [
        ("createView", 200, "iceberg", "main"), ("replaceView", 200, "iceberg", "main"), ("renameView", 204, "iceberg", "main")]
    created, replaced, renamed = (json.loads(r["detail"]) for r in old)
    assert created["view"] == "db.recent" and created["metadata"].startswith("db/recent/metadata/")
    assert replaced["actions"] == ["add-view-version", "set-current-view-version"]
    assert replaced["metadata"] != created["metadata"] and renamed == {"view": "db.recent", "to": "db.latest"}
    new = records_of(lake, repo.id, 2, path="db/latest/")
    assert [(r["op"], json.loads(r["detail"])) for r in new] == [
        ("renameView", {"view": "db.latest", "from": "db.recent"}), ("dropView", {"view": "db.latest"})]
