"""Iceberg views through pyiceberg and the raw protocol: per ref like tables, replaced, merged, conflicting, refused."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pyiceberg")

from lakefs.exceptions import ConflictException  # noqa: E402
from pyiceberg.exceptions import NoSuchViewError, ViewAlreadyExistsError  # noqa: E402
from pyiceberg.schema import Schema  # noqa: E402
from pyiceberg.types import LongType, NestedField  # noqa: E402
from pyiceberg.view.metadata import SQLViewRepresentation, ViewVersion  # noqa: E402

from tests.api.conftest import Served  # noqa: E402
from tests.iceberg.test_protocol import SCHEMA, call, error_of, make_table, ns  # noqa: E402

VIEW_SCHEMA = Schema(NestedField(1, "id", LongType(), required=False))


def version(sql: str, dialect: str = "spark", schema_id: int = 0) -> dict[str, Any]:
    return {"version-id": 1, "timestamp-ms": 1_700_000_000_000, "schema-id": schema_id, "summary": {"engine": "test"},
            "representations": [{"type": "sql", "sql": sql, "dialect": dialect}], "default-namespace": ["db"]}


def view_path(repo: str, ref: str, name: str) -> str:
    return f"/v1/namespaces/{ns(repo, ref, 'db')}/views/{name}"


def replace(lake: Served, repo: str, ref: str, name: str, sql: str) -> tuple[int, Any]:
    status, loaded = call(lake, "GET", view_path(repo, ref, name))
    assert status == 200, loaded
    uuid = loaded["metadata"]["view-uuid"]
    return call(lake, "POST", view_path(repo, ref, name), {
        "requirements": [{"type": "assert-view-uuid", "uuid": uuid}],
        "updates": [{"action": "add-view-version", "view-version": version(sql)},
                    {"action": "set-current-view-version", "view-version-id": -1}]})


def sql_of(lake: Served, repo: str, ref: str, name: str) -> str:
    status, loaded = call(lake, "GET", view_path(repo, ref, name))
    assert status == 200, loaded
    meta = loaded["metadata"]
    current = next(v for v in meta["versions"] if v["version-id"] == meta["current-version-id"])
    return str(current["representations"][0]["sql"])


def test_views_are_created_listed_loaded_replaced_and_merged_per_ref(lake: Served, catalog: Any, repo: Any) -> None:
    catalog.create_namespace((repo.id, "main", "db"))
    repo.branch("main").commit(message="namespace db")
    feat = repo.branch("feat").create(source_reference="main")
    feat_ns = (repo.id, "feat", "db")
    made = catalog.create_view((*feat_ns, "recent"), VIEW_SCHEMA, ViewVersion(
        schema_id=0, representations=[SQLViewRepresentation(type="sql", sql="SELECT id FROM events", dialect="spark")],
        default_namespace=["db"]))
    assert made.metadata.current_version_id == 1
    assert catalog.list_views(feat_ns) == [(*feat_ns, "recent")]
    assert catalog.view_exists((*feat_ns, "recent")) and not catalog.view_exists((repo.id, "main", "db", "recent"))
    assert catalog.load_view((*feat_ns, "recent")).metadata.versions[0].representations[0].root.sql == "SELECT id FROM events"
    with pytest.raises(ViewAlreadyExistsError):
        catalog.create_view((*feat_ns, "recent"), VIEW_SCHEMA, made.metadata.versions[0])
    # Replace: a new version becomes current; the old one stays in the history.
    status, answer = replace(lake, repo.id, "feat", "recent", "SELECT id FROM events WHERE id > 10")
    assert status == 200, answer
    assert answer["metadata"]["current-version-id"] == 2 and [e["version-id"] for e in answer["metadata"]["version-log"]] == [1, 2]
    assert answer["config"]["s3.access-key-id"]  # the load-view result carries the client config too
    # Committed and merged, main has it; main's view is the one of the merge.
    feat.commit(message="a view")
    feat.merge_into(repo.branch("main"))
    assert catalog.list_views((repo.id, "main", "db")) == [(repo.id, "main", "db", "recent")]
    assert sql_of(lake, repo.id, "main", "recent") == "SELECT id FROM events WHERE id > 10"
    loaded = catalog.load_view((repo.id, "main", "db", "recent"))
    assert loaded.metadata.location == f"s3://{repo.id}/main/db/recent"
    # Dropped on main, it stays on feat.
    catalog.drop_view((repo.id, "main", "db", "recent"))
    with pytest.raises(NoSuchViewError):
        catalog.load_view((repo.id, "main", "db", "recent"))
    assert catalog.list_views((repo.id, "feat", "db")) == [(repo.id, "feat", "db", "recent")]


def test_a_view_replaced_on_two_branches_conflicts_naming_the_view(lake: Served, repo: Any) -> None:
    status, _ = call(lake, "POST", "/v1/namespaces", {"namespace": [repo.id, "main", "db"]})
    assert status == 200
    status, answer = call(lake, "POST", f"/v1/namespaces/{ns(repo.id, 'main', 'db')}/views",
                          {"name": "v", "schema": SCHEMA, "view-version": version("SELECT 1")})
    assert status == 200, answer
    main = repo.branch("main")
    main.commit(message="view v")
    other = repo.branch("other").create(source_reference="main")
    assert replace(lake, repo.id, "main", "v", "SELECT 2")[0] == 200
    assert replace(lake, repo.id, "other", "v", "SELECT 3")[0] == 200
    main.commit(message="main's v")
    other.commit(message="other's v")
    with pytest.raises(ConflictException, match=r"view db\.v changed on both branches"):
        other.merge_into(main)
    assert sql_of(lake, repo.id, "main", "v") == "SELECT 2"
    # Time travel: the view as main's previous commit had it, read-only.
    assert sql_of(lake, repo.id, "main~1", "v") == "SELECT 1"
    status, answer = replace(lake, repo.id, "main~1", "v", "SELECT 4")
    error_of(status, answer, 403, "ForbiddenException")


def test_bad_views_get_the_protocols_errors(lake: Served, repo: Any) -> None:
    made = make_table(lake, repo.id, "main", "t")
    assert made["metadata"]["table-uuid"]
    views = f"/v1/namespaces/{ns(repo.id, 'main', 'db')}/views"
    good = version("SELECT 1")
    bad_versions = [
        {**good, "representations": []},
        {**good, "representations": [{"type": "sql", "dialect": "spark"}]},
        {**good, "representations": [{"type": "substrait", "sql": "x", "dialect": "spark"}]},
        {**good, "representations": [{"type": "sql", "sql": "SELECT 1", "dialect": "spark"},
                                     {"type": "sql", "sql": "SELECT 2", "dialect": "Spark"}]},
        {**good, "default-namespace": "db"},
        "SELECT 1",
    ]
    for bad in bad_versions:
        status, answer = call(lake, "POST", views, {"name": "bad", "schema": SCHEMA, "view-version": bad})
        error_of(status, answer, 400, "BadRequestException")
    status, answer = call(lake, "POST", views, {"name": "bad", "schema": SCHEMA, "view-version": bad_versions[3]})
    assert "Cannot add multiple queries for dialect spark" in error_of(status, answer, 400, "BadRequestException")
    # A view and a table never share a name, whichever comes first.
    status, answer = call(lake, "POST", views, {"name": "t", "schema": SCHEMA, "view-version": good})
    assert "Table with same name already exists" in error_of(status, answer, 409, "AlreadyExistsException")
    status, answer = call(lake, "POST", views, {"name": "v", "schema": SCHEMA, "view-version": good})
    assert status == 200, answer
    status, answer = call(lake, "POST", f"/v1/namespaces/{ns(repo.id, 'main', 'db')}/tables", {"name": "v", "schema": SCHEMA})
    assert "View with same name already exists" in error_of(status, answer, 409, "AlreadyExistsException")
    status, answer = call(lake, "GET", view_path(repo.id, "main", "t"))
    error_of(status, answer, 404, "NoSuchViewException")
    status, answer = call(lake, "POST", view_path(repo.id, "main", "v"),
                          {"requirements": [{"type": "assert-view-uuid", "uuid": "nope"}], "updates": []})
    assert error_of(status, answer, 409, "CommitFailedException").startswith("Requirement failed: view UUID does not match")
    for body in ({"updates": [{"action": "explode"}]}, {"updates": [{"action": "set-current-view-version", "view-version-id": 9}]},
                 {"updates": [{"action": "add-view-version", "view-version": {**good, "schema-id": 5}}]},
                 {"updates": "x"}, {"requirements": [{"type": "assert-table-uuid", "uuid": "u"}], "updates": []}):
        status, answer = call(lake, "POST", view_path(repo.id, "main", "v"), body)
        error_of(status, answer, 400, "BadRequestException")
    # Rename within the ref; register a view from its metadata file under another name.
    status, _ = call(lake, "POST", "/v1/views/rename", {"source": {"namespace": [repo.id, "main", "db"], "name": "v"},
                                                        "destination": {"namespace": [repo.id, "main", "db"], "name": "w"}})
    assert status == 204
    status, answer = call(lake, "GET", view_path(repo.id, "main", "v"))
    error_of(status, answer, 404, "NoSuchViewException")
    status, loaded = call(lake, "GET", view_path(repo.id, "main", "w"))
    assert status == 200, loaded
    status, answer = call(lake, "POST", f"/v1/namespaces/{ns(repo.id, 'main', 'db')}/register-view",
                          {"name": "again", "metadata-location": loaded["metadata-location"]})
    assert status == 200 and answer["metadata"]["view-uuid"] == loaded["metadata"]["view-uuid"], answer
    status, answer = call(lake, "POST", f"/v1/namespaces/{ns(repo.id, 'main', 'db')}/register-view",
                          {"name": "t", "metadata-location": loaded["metadata-location"]})
    error_of(status, answer, 409, "AlreadyExistsException")
    status, answer = call(lake, "GET", f"/v1/namespaces/{ns(repo.id, 'main', 'db')}/views")
    assert status == 200 and [i["name"] for i in answer["identifiers"]] == ["again", "w"], answer
    status, _ = call(lake, "DELETE", view_path(repo.id, "main", "w"))
    assert status == 204
    status, answer = call(lake, "DELETE", view_path(repo.id, "main", "w"))
    error_of(status, answer, 404, "NoSuchViewException")


def test_view_rights_are_the_repository_policies(lake: Served, repo: Any) -> None:
    import base64

    import lakefs_sdk

    status, _ = call(lake, "POST", "/v1/namespaces", {"namespace": [repo.id, "main", "db"]})
    assert status == 200
    views = f"/v1/namespaces/{ns(repo.id, 'main', 'db')}/views"
    status, answer = call(lake, "POST", views, {"name": "v", "schema": SCHEMA, "view-version": version("SELECT 1")})
    assert status == 200, answer
    auth = lake.client().sdk_client.auth_api
    auth.create_user(lakefs_sdk.UserCreation(id="view-reader"))
    auth.attach_policy_to_user("view-reader", "Analyst")  # ReadRepo only
    cred = auth.create_credentials("view-reader")
    reader = "Basic " + base64.b64encode(f"{cred.access_key_id}:{cred.secret_access_key}".encode()).decode()
    status, answer = call(lake, "GET", view_path(repo.id, "main", "v"), auth=reader)
    assert status == 200 and answer["config"]["s3.access-key-id"] == cred.access_key_id, answer
    status, answer = call(lake, "GET", views, auth=reader)
    assert status == 200 and [i["name"] for i in answer["identifiers"]] == ["v"]
    status, answer = call(lake, "POST", views, {"name": "w", "schema": SCHEMA, "view-version": version("SELECT 2")}, auth=reader)
    assert "WriteRepo" in error_of(status, answer, 403, "ForbiddenException")
    status, answer = call(lake, "DELETE", view_path(repo.id, "main", "v"), auth=reader)
    error_of(status, answer, 403, "ForbiddenException")
    status, answer = call(lake, "GET", view_path(repo.id, "main", "v"), auth=None)
    error_of(status, answer, 401, "NotAuthorizedException")
