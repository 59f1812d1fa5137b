"""The Iceberg REST catalog with an unmodified pyiceberg: tables on branches, merges, tags, races, transactions.

Every test talks to a live ``lakemount serve`` (API and S3 gateway): pyiceberg
gets its token from ``oauth/tokens`` with an access key, the catalog writes
metadata into the branch, pyiceberg writes data files and manifests through
the gateway into the same branch, and lakeFS's own client commits and merges.
"""

from __future__ import annotations

import threading
from typing import Any

import pyarrow as pa
import pytest

pyiceberg = pytest.importorskip("pyiceberg")

from pyiceberg.exceptions import (  # noqa: E402
    CommitFailedException,
    ForbiddenError,
    NoSuchNamespaceError,
    NoSuchTableError,
)
from pyiceberg.schema import Schema  # noqa: E402
from pyiceberg.types import LongType, NestedField, StringType  # noqa: E402

from tests.api.conftest import Served  # noqa: E402
from tests.iceberg.conftest import iceberg_catalog  # noqa: E402

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType(), required=False))


def rows(table: Any) -> list[dict[str, Any]]:
    return sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])


def batch(ids: list[int], **extra: list[Any]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids], **extra})


def new_table(catalog: Any, repo: str, ref: str, name: str = "events") -> Any:
    if (repo, ref, "db") not in catalog.list_namespaces((repo, ref)):
        catalog.create_namespace((repo, ref, "db"))
    return catalog.create_table((repo, ref, "db", name), schema=SCHEMA)


def test_a_table_on_a_branch_appends_evolves_reads_back_and_stays_on_its_branch(lake: Served, catalog: Any, repo: Any) -> None:
    repo.branch("feat").create(source_reference="main")
    table = new_table(catalog, repo.id, "feat")
    table.append(batch([1, 2]))
    with table.update_schema() as update:
        update.add_column("score", LongType())
    table.append(batch([3], score=pa.array([30], pa.int64())))

    again = catalog.load_table((repo.id, "feat", "db", "events"))
    assert [f.name for f in again.schema().fields] == ["id", "name", "score"]
    assert rows(again) == [{"id": 1, "name": "n1", "score": None}, {"id": 2, "name": "n2", "score": None},
                           {"id": 3, "name": "n3", "score": 30}]
    # Metadata and data are objects of the branch, where docs/ICEBERG.md says.
    paths = [o.path for o in repo.branch("feat").objects(prefix="db/events/")]
    assert "db/events/_iceberg_table.json" in paths
    assert any(p.startswith("db/events/metadata/") and p.endswith(".metadata.json") for p in paths)
    assert any(p.startswith("db/events/data/") and p.endswith(".parquet") for p in paths)
    assert again.metadata_location.startswith(f"s3://{repo.id}/feat/db/events/metadata/")
    # main has none of it
    with pytest.raises(NoSuchTableError, match="NoSuchNamespaceException"):
        catalog.load_table((repo.id, "main", "db", "events"))
    with pytest.raises(NoSuchNamespaceError):
        catalog.list_tables((repo.id, "main", "db"))
    assert not catalog.table_exists((repo.id, "main", "db", "events"))
    assert catalog.list_tables((repo.id, "feat", "db")) == [(repo.id, "feat", "db", "events")]
    assert catalog.list_namespaces((repo.id, "feat")) == [(repo.id, "feat", "db")]
    assert catalog.list_namespaces((repo.id, "main")) == []
    assert (repo.id, "feat") in catalog.list_namespaces((repo.id,))
    assert (repo.id,) in catalog.list_namespaces()


def test_commit_merge_read_main_and_a_tag_is_read_only(lake: Served, catalog: Any, repo: Any) -> None:
    feat = repo.branch("feat").create(source_reference="main")
    new_table(catalog, repo.id, "feat").append(batch([1, 2]))
    feat.commit(message="events table")
    feat.merge_into(repo.branch("main"))
    on_main = catalog.load_table((repo.id, "main", "db", "events"))
    assert rows(on_main) == [{"id": 1, "name": "n1"}, {"id": 2, "name": "n2"}]
    assert on_main.location() == f"s3://{repo.id}/main/db/events"  # its next files go to main, not feat

    repo.tag("v1").create("main")
    on_main.append(batch([3]))  # main moves on; the tag stays
    assert [r["id"] for r in rows(catalog.load_table((repo.id, "main", "db", "events")))] == [1, 2, 3]
    tagged = catalog.load_table((repo.id, "v1", "db", "events"))
    assert [r["id"] for r in rows(tagged)] == [1, 2]
    with pytest.raises(OSError, match="ACCESS_DENIED.*read-only"):  # its data files: the gateway refuses them
        tagged.append(batch([9]))
    with pytest.raises(ForbiddenError) as refused:  # its metadata: the catalog refuses the commit, in one sentence
        tagged.transaction().set_properties(owner="nobody").commit_transaction()
    assert str(refused.value) == (f"ForbiddenException: ref {repo.id}/v1 is read-only (not a branch): "
                                  "tags and commits load read-only tables; write through a branch")
    with pytest.raises(ForbiddenError):
        catalog.create_namespace((repo.id, "v1", "other"))
    assert [r["id"] for r in rows(catalog.load_table((repo.id, "v1", "db", "events")))] == [1, 2]


def test_of_two_writers_after_one_snapshot_one_gets_409_and_its_retry_is_clean(
        lake: Served, catalog: Any, repo: Any, caplog: pytest.LogCaptureFixture) -> None:
    catalog.create_namespace((repo.id, "main", "db"))
    catalog.create_table((repo.id, "main", "db", "events"), schema=SCHEMA,
                         properties={"commit.retry.num-retries": "0"}).append(batch([1]))
    first = catalog.load_table((repo.id, "main", "db", "events"))
    second = iceberg_catalog(lake).load_table((repo.id, "main", "db", "events"))
    first.append(batch([2]))
    with pytest.raises(CommitFailedException, match="main has changed"):
        second.append(batch([3]))
    second.refresh()
    second.append(batch([3]))
    assert [r["id"] for r in rows(catalog.load_table((repo.id, "main", "db", "events")))] == [1, 2, 3]

    # With pyiceberg's own retries (the default), the loser's 409 is retried on the new snapshot.
    third = iceberg_catalog(lake).load_table((repo.id, "main", "db", "events"))
    with third.transaction() as tx:
        tx.remove_properties("commit.retry.num-retries")
    stale = iceberg_catalog(lake).load_table((repo.id, "main", "db", "events"))
    third.refresh()
    third.append(batch([4]))
    stale.append(batch([5]))
    assert "Commit failed due to a concurrent update, retrying" in caplog.text
    table = catalog.load_table((repo.id, "main", "db", "events"))
    assert [r["id"] for r in rows(table)] == [1, 2, 3, 4, 5]
    assert len(table.metadata.snapshots) == 5


def test_eight_concurrent_writers_all_land_with_retries(
        lake: Served, catalog: Any, repo: Any, caplog: pytest.LogCaptureFixture) -> None:
    new_table(catalog, repo.id, "main")
    conflicts: list[int] = []
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def writer(i: int) -> None:
        try:
            table = iceberg_catalog(lake).load_table((repo.id, "main", "db", "events"))
            start.wait()
            for _ in range(50):
                try:
                    table.append(batch([i]))
                    return
                except CommitFailedException:
                    conflicts.append(i)
                    table.refresh()
            raise AssertionError(f"writer {i} never committed")
        except BaseException as e:  # noqa: BLE001 - re-raised in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    table = catalog.load_table((repo.id, "main", "db", "events"))
    assert [r["id"] for r in rows(table)] == list(range(8))
    assert len(table.metadata.snapshots) == 8
    lost = caplog.text.count("Commit failed due to a concurrent update") + len(conflicts)
    assert lost, "eight writers started together after one snapshot: some must have lost a race"


def test_rights_are_the_repository_policies(lake: Served, catalog: Any, repo: Any) -> None:
    import lakefs_sdk

    new_table(catalog, repo.id, "main").append(batch([1]))
    auth = lake.client().sdk_client.auth_api
    auth.create_user(lakefs_sdk.UserCreation(id="iceberg-reader"))
    auth.attach_policy_to_user("iceberg-reader", "Analyst")  # ReadRepo only
    cred = auth.create_credentials("iceberg-reader")
    reader = iceberg_catalog(lake, cred.access_key_id, cred.secret_access_key)
    table = reader.load_table((repo.id, "main", "db", "events"))
    assert [r["id"] for r in rows(table)] == [1]
    with pytest.raises(OSError, match="ACCESS_DENIED"):  # its data files: the gateway applies the same policy
        table.append(batch([2]))
    with pytest.raises(ForbiddenError, match="WriteRepo"):  # a metadata commit: the catalog does
        table.transaction().set_properties(owner="reader").commit_transaction()
    with pytest.raises(ForbiddenError):
        reader.create_namespace((repo.id, "main", "other"))
    with pytest.raises(NoSuchTableError):
        reader.load_table((repo.id, "main", "db", "missing"))


def test_rename_drop_and_namespace_properties(lake: Served, catalog: Any, repo: Any) -> None:
    from pyiceberg.exceptions import NamespaceNotEmptyError, TableAlreadyExistsError

    new_table(catalog, repo.id, "main").append(batch([1]))
    with pytest.raises(TableAlreadyExistsError):
        catalog.create_table((repo.id, "main", "db", "events"), schema=SCHEMA)
    catalog.rename_table((repo.id, "main", "db", "events"), (repo.id, "main", "db", "renamed"))
    assert catalog.list_tables((repo.id, "main", "db")) == [(repo.id, "main", "db", "renamed")]
    assert [r["id"] for r in rows(catalog.load_table((repo.id, "main", "db", "renamed")))] == [1]
    summary = catalog.update_namespace_properties((repo.id, "main", "db"), removals={"absent"}, updates={"owner": "ana"})
    assert summary.updated == ["owner"] and summary.missing == ["absent"]
    assert catalog.load_namespace_properties((repo.id, "main", "db")) == {"owner": "ana"}
    with pytest.raises(NamespaceNotEmptyError):
        catalog.drop_namespace((repo.id, "main", "db"))
    catalog.drop_table((repo.id, "main", "db", "renamed"))
    assert not catalog.table_exists((repo.id, "main", "db", "renamed"))
    catalog.drop_namespace((repo.id, "main", "db"))
    assert not catalog.namespace_exists((repo.id, "main", "db"))


def test_the_per_ref_address_names_namespaces_below_its_ref(lake: Served, repo: Any) -> None:
    relative = iceberg_catalog(lake, uri=f"{lake.api}/iceberg/relative_to/{repo.id}.main/api")
    relative.create_namespace("db")
    relative.create_table("db.events", schema=SCHEMA).append(batch([5]))
    assert relative.list_namespaces() == [("db",)]
    assert [r["id"] for r in rows(iceberg_catalog(lake).load_table((repo.id, "main", "db", "events")))] == [5]


def test_a_create_transaction_builds_the_table_from_its_updates(lake: Served, catalog: Any, repo: Any) -> None:
    """pyiceberg's create_table_transaction: stage-create, then one commit asserting the table does not exist
    with the whole table as updates (uuid, format version, schema, partition spec, sort order, location)."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import IdentityTransform

    catalog.create_namespace((repo.id, "main", "db"))
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="name"))
    with catalog.create_table_transaction((repo.id, "main", "db", "staged"), schema=SCHEMA, partition_spec=spec) as tx:
        tx.set_properties(owner="ana")
    table = catalog.load_table((repo.id, "main", "db", "staged"))
    assert table.properties["owner"] == "ana"
    assert [f.name for f in table.spec().fields] == ["name"]
    table.append(batch([1, 2]))
    assert [r["id"] for r in rows(catalog.load_table((repo.id, "main", "db", "staged")))] == [1, 2]
    from pyiceberg.exceptions import TableAlreadyExistsError

    with pytest.raises(TableAlreadyExistsError):
        catalog.create_table_transaction((repo.id, "main", "db", "staged"), schema=SCHEMA)



@pytest.mark.parametrize("version", [1, 2])
def test_format_versions_create_append_evolve_and_read(lake: Served, catalog: Any, repo: Any, version: int) -> None:
    catalog.create_namespace((repo.id, "main", "db"))
    table = catalog.create_table((repo.id, "main", "db", f"v{version}"), schema=SCHEMA,
                                 properties={"format-version": str(version)})
    assert table.format_version == version
    # The reference's defaults for a new table; format-version picks the version and is not stored.
    assert table.properties == {"write.parquet.compression-codec": "zstd"}
    table.append(batch([1, 2]))
    with table.update_schema() as update:
        update.add_column("score", LongType())
    table.append(batch([3], score=pa.array([30], pa.int64())))
    again = catalog.load_table((repo.id, "main", "db", f"v{version}"))
    assert again.format_version == version and len(again.snapshots()) == 2
    assert rows(again) == [{"id": 1, "name": "n1", "score": None}, {"id": 2, "name": "n2", "score": None},
                           {"id": 3, "name": "n3", "score": 30}]
    if version == 1:
        assert again.metadata.schema_.find_field("score")  # v1 mirrors the current schema in 'schema'


def test_a_v3_table_takes_a_column_with_a_default_value(lake: Served, catalog: Any, repo: Any) -> None:
    # pyiceberg 0.12 creates, evolves and reads v3 tables but writes no v3 manifests (its append refuses them):
    # its data path for v3 is covered by the protocol test of row lineage (tests/iceberg/test_protocol.py).
    catalog.create_namespace((repo.id, "main", "db"))
    name = (repo.id, "main", "db", "v3")
    table = catalog.create_table(name, schema=SCHEMA, properties={"format-version": "3"})
    assert table.format_version == 3 and table.metadata.next_row_id == 0
    with table.update_schema() as update:  # a default value is a v3 feature: initial-default and write-default
        update.add_column("score", LongType(), required=True, default_value=7)
    again = catalog.load_table(name)
    score = again.schema().find_field("score")
    assert score.required and score.initial_default == 7 and score.write_default == 7
    assert again.scan().to_arrow().column_names == ["id", "name", "score"]
    # The same evolution on a v2 table is refused by the catalog with the reference's words.
    v2 = catalog.create_table((repo.id, "main", "db", "v2"), schema=SCHEMA)
    from pyiceberg.exceptions import BadRequestError

    with pytest.raises((BadRequestError, ValueError), match="not supported until v3"):
        with v2.update_schema(allow_incompatible_changes=True) as update:
            update.add_column("score", LongType(), required=True, default_value=7)


def test_a_table_upgrades_from_v1_to_v2_to_v3_keeping_its_rows(lake: Served, catalog: Any, repo: Any) -> None:
    catalog.create_namespace((repo.id, "main", "db"))
    name = (repo.id, "main", "db", "old")
    table = catalog.create_table(name, schema=SCHEMA, properties={"format-version": "1"})
    table.append(batch([1]))
    with table.transaction() as tx:
        tx.upgrade_table_version(format_version=2)
    table = catalog.load_table(name)
    assert table.format_version == 2
    table.append(batch([2]))
    # pyiceberg 0.12's upgrade_table_version stops at 2; the format-version property is the reference's other way.
    with table.transaction() as tx:
        tx.set_properties(**{"format-version": "3"})
    table = catalog.load_table(name)
    assert "format-version" not in table.properties
    assert table.format_version == 3 and table.metadata.next_row_id == 0  # row lineage counts from the upgrade on
    assert [r["id"] for r in rows(table)] == [1, 2]
    assert table.metadata.last_sequence_number == 1  # v1's snapshot had none; v2's append was the first


def test_a_catalog_of_only_uri_and_credential_writes_and_reads_with_the_callers_key(lake: Served, repo: Any) -> None:
    import lakefs_sdk
    from pyiceberg.catalog.rest import RestCatalog

    auth = lake.client().sdk_client.auth_api
    auth.create_user(lakefs_sdk.UserCreation(id="iceberg-bare"))
    auth.attach_policy_to_user("iceberg-bare", "Developer")
    cred = auth.create_credentials("iceberg-bare")
    uri = f"{lake.api}/iceberg/api"
    # As most users configure a REST catalog: no S3 endpoint, no keys, no region. /v1/config hands them out.
    catalog = RestCatalog("bare", uri=uri, credential=f"{cred.access_key_id}:{cred.secret_access_key}",
                          **{"oauth2-server-uri": f"{uri}/v1/oauth/tokens"})
    assert catalog.properties["s3.endpoint"] == lake.gateway.url
    assert catalog.properties["s3.access-key-id"] == cred.access_key_id  # the caller's own key, not another's
    assert catalog.properties["s3.path-style-access"] == "true"
    table = new_table(catalog, repo.id, "main", "bare")
    table.append(batch([1, 2]))
    loaded = catalog.load_table((repo.id, "main", "db", "bare"))
    assert loaded.config["s3.access-key-id"] == cred.access_key_id and loaded.config["s3.endpoint"] == lake.gateway.url
    assert [r["id"] for r in rows(loaded)] == [1, 2]
    # The data files are objects of the branch, written through the gateway with that key.
    assert any(o.path.startswith("db/bare/data/") for o in repo.branch("main").objects(prefix="db/bare/"))
