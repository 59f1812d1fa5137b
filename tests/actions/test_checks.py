"""The ``lakemount_check`` hook type: paths, formats, sizes, metadata and Parquet schemas (``actions/checks.py``)."""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakemount.actions.checks import parse_size, schema_changes
from lakemount.actions.hook import HookFailure
from lakemount.catalog.catalog import Catalog
from lakemount.errors import HookFailed
from tests.actions.conftest import R, action


def check_action(props: str, event: str = "pre-commit") -> str:
    return f"name: checks\non: {{{event}: {{branches: [main]}}}}\nhooks: [{{id: data, type: lakemount_check, properties: {props}}}]"


def parquet(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def refused(cat: Catalog, match: str, **meta: str) -> None:
    with pytest.raises(HookFailed, match=match):
        cat.commit(R, "main", "m", metadata=list(meta.items()))
    cat.reset(R, "main", prefix="t/")


def test_check_allowed_and_denied_paths(cat: Catalog) -> None:
    action(cat, "main", "c", check_action('{allowed_paths: ["t/*.csv"], denied_paths: ["t/tmp_*"]}'))
    cat.put(R, "main", "t/a.csv", b"a\n")
    cat.put(R, "main", "elsewhere.csv", b"a\n")
    refused(cat, r"1 path\(s\) outside allowed_paths: elsewhere.csv")
    cat.reset(R, "main", path="elsewhere.csv")
    cat.put(R, "main", "t/tmp_1.csv", b"a\n")
    refused(cat, "match denied_paths: t/tmp_1.csv")
    cat.put(R, "main", "t/ok.csv", b"a\n")
    cat.commit(R, "main", "fine")
    run = cat.actions.store.list_runs(R)[0]
    assert run.status == "completed"
    assert cat.actions.store.get_run(R, run.run_id).hooks[0].output == "1 object(s) checked: ok"  # refused() reset t/a.csv


def test_check_formats_sizes_and_metadata(cat: Catalog) -> None:
    action(cat, "main", "c", check_action("{formats: [csv, json, parquet], max_size: 1KB, min_size: 2, required_metadata: [owner]}"))
    cat.put(R, "main", "t/a.csv", b"a,b\n1,2\n")
    refused(cat, "missing commit metadata: owner")
    cat.put(R, "main", "t/a.txt", b"text")
    refused(cat, r"not of formats csv, json, parquet: t/a.txt", owner="me")
    cat.put(R, "main", "t/bad.csv", b"a,b\n1,2,3\n")
    refused(cat, r"do not parse as their format: t/bad.csv \(rows have different numbers of fields\)", owner="me")
    cat.put(R, "main", "t/bad.json", b"{nope")
    refused(cat, r"t/bad.json \(bad JSON", owner="me")
    cat.put(R, "main", "t/bad.parquet", b"PAR1 not really")
    refused(cat, r"t/bad.parquet \(", owner="me")
    cat.put(R, "main", "t/big.csv", b"x\n" * 600)
    refused(cat, r"larger than 1000 bytes: t/big.csv \(1200 bytes\)", owner="me")
    cat.put(R, "main", "t/tiny.csv", b"x")
    refused(cat, r"smaller than 2 bytes: t/tiny.csv", owner="me")
    cat.put(R, "main", "t/good.csv", b"a,b\n1,2\n")
    cat.put(R, "main", "t/good.json", b'{"a": 1}')
    cat.put(R, "main", "t/good.parquet", parquet(pa.table({"a": [1]})))
    cat.commit(R, "main", "fine", metadata=[("owner", "me")])


def test_check_parquet_schema_against_the_destination(cat: Catalog) -> None:
    cat.put(R, "main", "t/part-0.parquet", parquet(pa.table({"id": pa.array([1], pa.int64()), "name": ["a"]})))
    cat.commit(R, "main", "table")
    cat.create_branch(R, "feat-x", "main")
    action(cat, "main", "c", check_action("{parquet_schema: compatible}", "pre-merge"))
    cat.commit(R, "main", "guard")
    cat.put(R, "feat-x", "t/part-1.parquet", parquet(pa.table({"id": pa.array(["x"]), "extra": [1.0]})))
    cat.commit(R, "feat-x", "bad schema")
    with pytest.raises(HookFailed, match=r"t/part-1.parquet \(drops column\(s\) name; changes id: int64 -> string\)"):
        cat.merge(R, "feat-x", "main")
    # The destination's guard holds though the source branch never had it.
    assert cat.get_optional(R, "feat-x", "_lakefs_actions/c.yaml") is None
    cat.put(R, "feat-x", "t/part-1.parquet", parquet(pa.table({"id": pa.array([2], pa.int64()), "name": ["b"], "more": [1]})))
    cat.commit(R, "feat-x", "compatible: a column added")
    assert cat.merge(R, "feat-x", "main").merged
    assert cat.actions.store.list_runs(R, branch="main")[0].status == "completed"


def test_unknown_check_properties_fail_the_hook(cat: Catalog) -> None:
    action(cat, "main", "c", check_action("{max_sise: 10}"))
    with pytest.raises(HookFailed, match="unknown lakemount_check properties: max_sise"):
        cat.commit(R, "main", "m")


def test_sizes_take_decimal_and_binary_units() -> None:
    assert parse_size("10MB") == 10_000_000 and parse_size("1KiB") == 1024 and parse_size(7) == 7
    with pytest.raises(HookFailure, match="bad size"):
        parse_size("ten")


def iceberg_table(cat: Catalog, branch: str, version: int, fields: list[tuple[int, str, str, bool]]) -> None:
    """Stage table ``db.events`` on ``branch`` as the Iceberg catalog lays it out: a metadata file and the pointer to it."""
    schema = {"type": "struct", "schema-id": version,
              "fields": [{"id": i, "name": n, "type": t, "required": r} for i, n, t, r in fields]}
    meta = f"db/events/metadata/{version:05d}-x.metadata.json"
    cat.put(R, branch, meta, json.dumps({"current-schema-id": version, "schemas": [schema]}).encode())
    cat.put(R, branch, "db/events/_iceberg_table.json", json.dumps({"metadata": meta}).encode())


def test_check_iceberg_schema_against_the_destination(cat: Catalog) -> None:
    iceberg_table(cat, "main", 0, [(1, "id", "int", True), (2, "name", "string", True), (3, "price", "decimal(9, 2)", False)])
    cat.commit(R, "main", "table")
    cat.create_branch(R, "feat-t", "main")
    action(cat, "main", "c", check_action("{iceberg_schema: compatible}", "pre-merge"))
    cat.commit(R, "main", "guard")
    # drops required column name, makes id a string: refused, naming the table and the columns
    iceberg_table(cat, "feat-t", 1, [(1, "id", "string", True), (3, "price", "decimal(9, 2)", False)])
    cat.commit(R, "feat-t", "bad schema")
    with pytest.raises(HookFailed, match=r"table db\.events \(drops required column\(s\) name; changes id: int -> string\)"):
        cat.merge(R, "feat-t", "main")
    # Iceberg's promotions, a rename (same field id), a dropped optional and an added column: compatible
    iceberg_table(cat, "feat-t", 2, [(1, "id", "long", True), (2, "title", "string", True), (4, "more", "double", False)])
    cat.commit(R, "feat-t", "compatible schema")
    assert cat.merge(R, "feat-t", "main").merged
    assert cat.actions.store.list_runs(R, branch="main")[0].status == "completed"


def test_iceberg_schema_changes_follow_icebergs_promotions() -> None:
    old = {"type": "struct", "fields": [
        {"id": 1, "name": "n", "type": "float", "required": False},
        {"id": 2, "name": "d", "type": "decimal(9,2)", "required": False},
        {"id": 3, "name": "s", "type": {"type": "struct", "fields": [{"id": 4, "name": "x", "type": "int", "required": True}]},
         "required": False},
    ]}
    new = {"type": "struct", "fields": [
        {"id": 1, "name": "n", "type": "double", "required": False},
        {"id": 2, "name": "d", "type": "decimal(8,2)", "required": False},
        {"id": 3, "name": "s", "type": {"type": "struct", "fields": []}, "required": False},
    ]}
    assert schema_changes(old, new) == ["drops required column(s) s.x", "changes d: decimal(9,2) -> decimal(8,2)"]
    assert schema_changes(old, old) == []
