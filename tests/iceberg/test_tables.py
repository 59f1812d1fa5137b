"""The table store over an in-process catalog: commits are pointer swaps that a lost race re-judges, and a
transaction that fails part way changes no table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lakemount.app import App
from lakemount.config import load
from lakemount.errors import ReadOnly, Unavailable
from lakemount.iceberg.errors import IcebergError, translate
from lakemount.iceberg.names import Base
from lakemount.iceberg.tables import Change, Tables

SCHEMA = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


@pytest.fixture
def catalog(tmp_path: Path) -> Any:
    app = App(load(env={"LAKEMOUNT_HOME": str(tmp_path / "home"), "LAKEMOUNT_CACHE_DISK_BYTES": "0"}))
    app.catalog.create_repository("ice")
    return app.catalog


def setup_tables(tables: Tables, *names: str) -> list[Any]:
    tables.create_namespace(Base().namespace(("ice", "main", "db")), {})
    ids = [Base().table(("ice", "main", "db"), n) for n in names]
    for t in ids:
        tables.commit([Change(t, [], [])], create={"name": t.name, "schema": SCHEMA})
    return ids


def set_props(table: Any, uuid: str | None = None, **props: str) -> Change:
    reqs = [] if uuid is None else [{"type": "assert-table-uuid", "uuid": uuid}]
    return Change(table, reqs, [{"action": "set-properties", "updates": props}])


class RacedCatalog:
    """A catalog whose next ``apply_if`` first lets another writer's commit land (the race a commit can lose)."""

    def __init__(self, inner: Any, rival: Any) -> None:
        self.inner, self.rival, self.races = inner, rival, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def apply_if(self, *args: Any, **kwargs: Any) -> None:
        if self.rival is not None:
            rival, self.rival = self.rival, None
            self.races += 1
            rival()
        self.inner.apply_if(*args, **kwargs)


def test_a_commit_that_loses_the_pointer_race_is_judged_again_on_the_winners_table(catalog: Any) -> None:
    plain = Tables(catalog)
    (t,) = setup_tables(plain, "t")
    uuid = plain.load(t).metadata["table-uuid"]
    snapshot_req = {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None}

    # A change whose requirements still hold after the rival's commit: retried, and both changes are kept.
    raced = RacedCatalog(catalog, lambda: plain.commit([set_props(t, uuid, rival="1")]))
    Tables(raced).commit([set_props(t, uuid, mine="1")])
    assert raced.races == 1
    assert plain.load(t).metadata["properties"] == {"write.parquet.compression-codec": "zstd", "rival": "1", "mine": "1"}

    # One whose requirement the rival broke (it moved main): 409, and the rival's table stands.
    def rival_snapshot() -> None:
        snap = {"snapshot-id": 7, "timestamp-ms": 1, "manifest-list": "s3://ice/main/db/t/metadata/snap-7.avro",
                "sequence-number": 1, "summary": {"operation": "append"}}
        plain.commit([Change(t, [], [{"action": "add-snapshot", "snapshot": snap},
                                     {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 7}])])

    raced = RacedCatalog(catalog, rival_snapshot)
    with pytest.raises(IcebergError) as err:
        Tables(raced).commit([Change(t, [snapshot_req], [{"action": "set-properties", "updates": {"late": "1"}}])])
    assert raced.races == 1 and err.value.code == 409 and "main was created concurrently" in err.value.message
    meta = plain.load(t).metadata
    assert meta["current-snapshot-id"] == 7 and "late" not in meta["properties"]


class FailingWrites:
    """A catalog whose block store fails the ``fail_at``-th data write of a commit (an outage mid-transaction)."""

    def __init__(self, inner: Any, fail_at: int) -> None:
        self.inner, self.fail_at, self.writes, self.failed = inner, fail_at, 0, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def write_data(self, repo: str, source: bytes) -> Any:
        self.writes += 1
        if self.writes == self.fail_at:
            self.failed += 1
            raise Unavailable("block store unreachable (injected)")
        return self.inner.write_data(repo, source)


def test_a_transaction_cut_part_way_changes_no_table(catalog: Any) -> None:
    plain = Tables(catalog)
    a, b = setup_tables(plain, "a", "b")
    before = {t: plain.load(t).pointer for t in (a, b)}
    # Each table writes a metadata file and a pointer: the 3rd write is table b's metadata, after a's are done.
    flaky = FailingWrites(catalog, fail_at=3)
    with pytest.raises(Unavailable):
        Tables(flaky).commit([set_props(a, None, v="1"), set_props(b, None, v="1")])
    assert flaky.failed == 1 and flaky.writes == 3, "the outage must hit the transaction after its first table"
    assert {t: plain.load(t).pointer for t in (a, b)} == before
    assert not any("v" in plain.load(t).metadata["properties"] for t in (a, b))
    plain.commit([set_props(a, None, v="2"), set_props(b, None, v="2")])
    assert [plain.load(t).metadata["properties"]["v"] for t in (a, b)] == ["2", "2"]


def test_a_schema_change_on_a_tag_is_refused_in_one_readable_sentence(catalog: Any) -> None:
    plain = Tables(catalog)
    setup_tables(plain, "events")
    catalog.commit("ice", "main", "events table")
    catalog.create_tag("ice", "t-events", "main")
    tagged = Base().table(("ice", "t-events", "db"), "events")
    add_column = {"action": "add-schema", "schema": {**SCHEMA, "schema-id": 1, "fields": [
        *SCHEMA["fields"], {"id": 2, "name": "name", "type": "string", "required": False}]}}
    with pytest.raises(ReadOnly) as err:
        plain.commit([Change(tagged, [], [add_column])])
    answer = translate(err.value)
    assert (answer.code, answer.type) == (403, "ForbiddenException")
    # Each word once (issue 38 item 7 quoted "read-only: ref X is read-only (not a branch) is not a branch (...)").
    assert answer.message == ("ref ice/t-events is read-only (not a branch): "
                              "tags and commits load read-only tables; write through a branch")
