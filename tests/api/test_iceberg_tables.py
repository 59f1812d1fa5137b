"""The web UI's Iceberg table operations (issue 37), against a live ``lakemount serve`` whose tables an unmodified
pyiceberg made: a ref's tables by namespace, a table's schema (version 3 defaults too), partition spec,
snapshots and first rows, and a compare of two refs (snapshots added, schema changes, the row diff); every kind
of bad input is a one-line 400 or 404, never a 500."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
import requests

pytest.importorskip("pyiceberg")

from pyiceberg.partitioning import PartitionField, PartitionSpec  # noqa: E402
from pyiceberg.schema import Schema  # noqa: E402
from pyiceberg.transforms import IdentityTransform  # noqa: E402
from pyiceberg.types import LongType, NestedField, StringType  # noqa: E402

from tests.api.conftest import Served  # noqa: E402
from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET  # noqa: E402
from tests.iceberg.conftest import iceberg_catalog  # noqa: E402

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType(), required=False))
SPEC = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="name"))


@pytest.fixture(scope="module")
def lake(served: Served) -> Served:
    """The package's server (``tests/api/conftest.py``): the tables live in a repository of their own."""
    return served


def get(lake: Served, url: str, **query: Any) -> tuple[int, Any]:
    r = requests.get(f"{lake.api}/api/v1{url}", params=query, auth=(ADMIN_KEY, ADMIN_SECRET), timeout=60)
    return r.status_code, r.json()


def batch(ids: list[int], **extra: Any) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids], **extra})


class Lakes:
    """One repository: ``db.events`` (v2, partitioned by name, two appends), ``db.old`` (v1, one append),
    ``db.v3`` (v3, a column with a default) and ``db.inner.deep`` (a namespace of two levels) committed on main; ``feat`` then adds a column and rows to events."""

    def __init__(self, lake: Served) -> None:
        self.lake = lake
        self.repo = lake.repo(prefix="ice")
        self.id = self.repo.id
        cat = iceberg_catalog(lake)
        cat.create_namespace((self.id, "main", "db"))
        events = cat.create_table((self.id, "main", "db", "events"), schema=SCHEMA, partition_spec=SPEC)
        events.append(batch([1, 2]))
        events.append(batch([3]))
        old = cat.create_table((self.id, "main", "db", "old"), schema=SCHEMA, properties={"format-version": "1"})
        old.append(batch([10]))
        v3 = cat.create_table((self.id, "main", "db", "v3"), schema=SCHEMA, properties={"format-version": "3"})
        with v3.update_schema() as update:
            update.add_column("score", LongType(), required=True, default_value=7)
        cat.create_namespace((self.id, "main", "db", "inner"))  # a namespace of two levels, inside the first
        cat.create_table((self.id, "main", "db", "inner", "deep"), schema=SCHEMA)
        self.repo.branch("main").commit(message="four tables")
        self.feat = self.repo.branch("feat").create(source_reference="main")
        events = cat.load_table((self.id, "feat", "db", "events"))
        with events.update_schema() as update:
            update.add_column("score", LongType())
        events.append(batch([4], score=pa.array([40], pa.int64())))
        self.feat.commit(message="events: a column and a row")


@pytest.fixture(scope="module")
def lakes(lake: Served) -> Lakes:
    return Lakes(lake)


def test_a_refs_tables_are_listed_by_namespace_with_their_versions(lakes: Lakes) -> None:
    status, body = get(lakes.lake, f"/repositories/{lakes.id}/refs/main/iceberg/tables")
    assert status == 200, body
    assert [(t["namespace"], t["name"], t["format_version"]) for t in body["results"]] == [
        (["db"], "events", 2), (["db"], "old", 1), (["db"], "v3", 3), (["db", "inner"], "deep", 2)]
    assert body["results"][0]["path"] == "db/events/" and body["results"][0]["snapshots"] == 2
    assert body["truncated"] is False


def test_a_table_shows_its_schema_spec_and_snapshots(lakes: Lakes) -> None:
    status, t = get(lakes.lake, f"/repositories/{lakes.id}/refs/main/iceberg/table", path="db/events")
    assert status == 200, t
    assert [(f["name"], f["type"], f["required"]) for f in t["schema"]["fields"]] == [("id", "long", False), ("name", "string", False)]
    assert t["partition_spec"]["fields"] == [{"name": "name", "transform": "identity", "source_id": 2, "source": "name", "field_id": 1000}]
    snaps = t["snapshots"]
    assert [s["operation"] for s in snaps] == ["append", "append"]
    assert snaps[0]["counts"]["added_records"] == 1 and snaps[1]["counts"]["added_records"] == 2
    assert snaps[0]["counts"]["total_records"] == 3 and snaps[0]["parent_snapshot_id"] == snaps[1]["snapshot_id"]
    assert t["current_snapshot_id"] == snaps[0]["snapshot_id"]
    # Version 3's defaults are part of a field.
    status, v3 = get(lakes.lake, f"/repositories/{lakes.id}/refs/main/iceberg/table", path="db/v3/")
    assert status == 200, v3
    score = v3["schema"]["fields"][2]
    assert score == {"id": 3, "name": "score", "type": "long", "required": True, "initial_default": 7, "write_default": 7}
    assert v3["format_version"] == 3 and v3["snapshots"] == [] and v3["current_snapshot_id"] is None


def test_rows_are_previewed_from_the_current_snapshot_in_the_current_schema(lakes: Lakes) -> None:
    status, p = get(lakes.lake, f"/repositories/{lakes.id}/refs/main/iceberg/table/rows", path="db/events")
    assert status == 200, p
    assert [c["name"] for c in p["schema"]] == ["id", "name"]
    assert sorted(p["rows"]) == [[1, "n1"], [2, "n2"], [3, "n3"]]
    assert p["num_rows"] == 3 and p["data_files"] == 3 and p["delete_files"] == 0 and p["truncated"] is False
    # On feat the old files lack the new column: null there (it has no default), the new row has it.
    status, p = get(lakes.lake, f"/repositories/{lakes.id}/refs/feat/iceberg/table/rows", path="db/events", rows=10)
    assert status == 200, p
    assert sorted(p["rows"]) == [[1, "n1", None], [2, "n2", None], [3, "n3", None], [4, "n4", 40]]
    status, p = get(lakes.lake, f"/repositories/{lakes.id}/refs/main/iceberg/table/rows", path="db/events", rows=2)
    assert len(p["rows"]) == 2 and p["truncated"] is True
    # A version 1 table reads the same way; a table without snapshots has no rows.
    assert get(lakes.lake, f"/repositories/{lakes.id}/refs/main/iceberg/table/rows", path="db/old")[1]["rows"] == [[10, "n10"]]
    status, p = get(lakes.lake, f"/repositories/{lakes.id}/refs/main/iceberg/table/rows", path="db/v3")
    assert status == 200 and p["rows"] == [] and p["num_rows"] == 0


def test_compare_shows_snapshots_added_schema_changes_and_the_row_diff(lakes: Lakes) -> None:
    status, d = get(lakes.lake, f"/repositories/{lakes.id}/refs/main/diff/feat/iceberg/tables")
    assert status == 200, d
    assert [t["path"] for t in d["results"]] == ["db/events/"]  # the other tables did not change
    t = d["results"][0]
    assert t["status"] == "changed" and t["row_diff"] is True
    assert [s["operation"] for s in t["snapshots_added"]] == ["append"] and t["snapshots_removed"] == 0
    assert t["snapshots_added"][0]["counts"]["added_records"] == 1
    assert t["schema_changes"]["added"] == [{"id": 3, "name": "score", "type": "long", "required": False}]
    assert t["left"]["schema_id"] == 0 and t["right"]["schema_id"] == 1
    status, rows = get(lakes.lake, f"/repositories/{lakes.id}/refs/main/diff/feat/iceberg/table/rows", path="db/events", key="id")
    assert status == 200, rows
    assert rows["format"] == "iceberg" and rows["counts"] == {"added": 1, "removed": 0, "changed": 0, "unchanged": 3}
    assert rows["schema"]["added"] == [{"name": "score", "type": "int64"}]
    assert [(r["type"], r["right"]) for r in rows["results"]] == [("added", [4, "n4", 40])]
    # Two-dot the other way round: the row is removed, the column dropped.
    status, back = get(lakes.lake, f"/repositories/{lakes.id}/refs/feat/diff/main/iceberg/table/rows", path="db/events",
                       type="two_dot")
    assert status == 200 and back["counts"]["removed"] == 1 and back["schema"]["dropped"][0]["name"] == "score"
    # Equal refs: nothing differs.
    assert get(lakes.lake, f"/repositories/{lakes.id}/refs/main/diff/main/iceberg/tables")[1]["results"] == []


def test_uncommitted_changes_of_a_branch_are_compared_too(lake: Served, lakes: Lakes) -> None:
    cat = iceberg_catalog(lake)
    branch = lakes.repo.branch("unc").create(source_reference="main")
    table = cat.load_table((lakes.id, "unc", "db", "old"))
    table.append(batch([11]))
    status, d = get(lake, f"/repositories/{lakes.id}/refs/unc/diff/unc/iceberg/tables", type="uncommitted")
    assert status == 200, d
    assert [(t["path"], len(t["snapshots_added"])) for t in d["results"]] == [("db/old/", 1)]
    status, rows = get(lake, f"/repositories/{lakes.id}/refs/unc/diff/unc/iceberg/table/rows", path="db/old", type="uncommitted")
    assert status == 200 and rows["counts"]["added"] == 1, rows
    branch.delete()


@pytest.mark.parametrize(("url", "query", "status", "words"), [
    ("/refs/main/iceberg/table", {"path": "db/nothing"}, 404, "no Iceberg table at db/nothing/"),
    ("/refs/main/iceberg/table", {"path": "elsewhere/plain"}, 404, "no Iceberg table"),
    ("/refs/main/iceberg/table", {"path": "db"}, 400, "names no table"),
    ("/refs/main/iceberg/table", {"path": "db/../x"}, 400, "path segment"),
    ("/refs/main/iceberg/table", {}, 400, "path"),
    ("/refs/no-such-ref/iceberg/table", {"path": "db/events"}, 404, "no-such-ref"),
    ("/refs/no-such-ref/iceberg/tables", {}, 404, "no-such-ref"),
    ("/refs/main/iceberg/table/rows", {"path": "db/nothing"}, 404, "no Iceberg table"),
    ("/refs/main/iceberg/table/rows", {"path": "db/events", "rows": "0"}, 400, "rows"),
    ("/refs/main/diff/feat/iceberg/tables", {"type": "sideways"}, 400, "type must be"),
    ("/refs/main/diff/nope/iceberg/tables", {}, 404, "nope"),
    ("/refs/main/diff/feat/iceberg/table/rows", {"path": "db/nothing"}, 404, "on either side"),
    ("/refs/main/diff/feat/iceberg/table/rows", {"path": "db/events", "key": "nope"}, 400, "unknown key column"),
    ("/refs/main/diff/feat/iceberg/table/rows", {"path": "db/events", "after": "x"}, 400, "next_offset"),
])
def test_bad_input_is_a_one_line_400_or_404(lakes: Lakes, url: str, query: dict[str, str], status: int, words: str) -> None:
    if "elsewhere" in query.get("path", ""):
        lakes.repo.branch("main").object("elsewhere/plain/data.csv").upload(b"a\n1\n")
    got, body = get(lakes.lake, f"/repositories/{lakes.id}{url}", **query)
    assert got == status, body
    assert words in body["message"] and "\n" not in body["message"], body


def test_a_table_with_a_broken_manifest_list_is_a_400_naming_it(lake: Served, lakes: Lakes) -> None:
    branch = lakes.repo.branch("broken").create(source_reference="main")
    t = get(lake, f"/repositories/{lakes.id}/refs/broken/iceberg/table", path="db/old")[1]
    snap = next(s for s in iceberg_catalog(lake).load_table((lakes.id, "broken", "db", "old")).snapshots())
    manifest_list = snap.manifest_list.split("/", 4)[4]  # s3://repo/<the ref that wrote it>/<path>
    branch.object(manifest_list).upload(b"Obj\x01not avro at all")
    assert t["current_snapshot_id"] == str(snap.snapshot_id)  # as text: past JavaScript's exact integers
    status, body = get(lake, f"/repositories/{lakes.id}/refs/broken/iceberg/table/rows", path="db/old")
    assert status == 400 and "manifest" in body["message"], body
    branch.delete()


def test_an_unreadable_table_is_said_in_its_row_and_the_others_are_listed(lake: Served, lakes: Lakes) -> None:
    # A pointer anyone with WriteRepo may write through S3: no metadata file named, then malformed metadata.
    branch = lakes.repo.branch("junk").create(source_reference="main")
    branch.object("db/junk/_iceberg_table.json").upload(b'{"metadata-location": "s3://x/y.metadata.json"}')
    branch.object("db/odd/metadata/m.json").upload(b'{"format-version": 2, "schemas": 5, "current-schema-id": 0, "snapshots": 7}')
    branch.object("db/odd/_iceberg_table.json").upload(b'{"metadata": "db/odd/metadata/m.json"}')
    branch.commit(message="junk")
    status, body = get(lake, f"/repositories/{lakes.id}/refs/junk/iceberg/tables")
    assert status == 200, body
    by_name = {t["name"]: t for t in body["results"]}
    assert set(by_name) == {"events", "old", "v3", "deep", "junk", "odd"}
    assert "names no metadata file" in by_name["junk"]["error"] and "error" not in by_name["events"]
    for name, words in (("junk", "names no metadata file"), ("odd", "malformed")):
        status, t = get(lake, f"/repositories/{lakes.id}/refs/junk/iceberg/table", path=f"db/{name}")
        assert status == 400 and words in t["message"] and "\n" not in t["message"], t
    status, d = get(lake, f"/repositories/{lakes.id}/refs/main/diff/junk/iceberg/tables")
    assert status == 200, d
    assert {t["name"]: t["status"] for t in d["results"]} == {"junk": "unreadable", "odd": "unreadable"}
    branch.delete()


def test_a_column_added_with_a_default_shows_its_default_in_older_files_rows(lake: Served, lakes: Lakes) -> None:
    # Rows written at v2, the table upgraded to v3 and given a column with a default: the older data files lack
    # the column, and reading them gives its initial-default (the spec's rule), on the page and in the row diff.
    cat = iceberg_catalog(lake)
    branch = lakes.repo.branch("grown").create(source_reference="main")
    name = (lakes.id, "grown", "db", "grown")
    table = cat.create_table(name, schema=SCHEMA)
    table.append(batch([1, 2]))
    branch.commit(message="grown: two rows")
    with table.transaction() as tx:
        tx.set_properties(**{"format-version": "3"})
    table = cat.load_table(name)
    with table.update_schema() as update:
        update.add_column("score", LongType(), required=True, default_value=7)
    assert sorted(r["score"] for r in table.scan().to_arrow().to_pylist()) == [7, 7]  # pyiceberg reads it so too
    status, p = get(lake, f"/repositories/{lakes.id}/refs/grown/iceberg/table/rows", path="db/grown")
    assert status == 200, p
    assert sorted(p["rows"]) == [[1, "n1", 7], [2, "n2", 7]]
    status, d = get(lake, f"/repositories/{lakes.id}/refs/grown/diff/grown/iceberg/tables", type="uncommitted")
    t = d["results"][0]
    assert t["left"]["format_version"] == 2 and t["right"]["format_version"] == 3 and t["snapshots_added"] == []
    assert t["schema_changes"]["added"] == [{"id": 3, "name": "score", "type": "long", "required": True,
                                             "initial_default": 7, "write_default": 7}]
    status, rows = get(lake, f"/repositories/{lakes.id}/refs/grown/diff/grown/iceberg/table/rows", path="db/grown",
                       type="uncommitted", key="id")
    assert status == 200, rows
    assert rows["counts"] == {"added": 0, "removed": 0, "changed": 0, "unchanged": 2}
    assert rows["schema"]["added"] == [{"name": "score", "type": "int64"}]
    branch.delete()
