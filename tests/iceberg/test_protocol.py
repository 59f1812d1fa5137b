"""The catalog's HTTP protocol without a client library: transactions, merges, tokens and the error shapes.

Requests are raw (``urllib``) so malformed and hostile input reaches the
server as sent; every refusal must be the spec's ``{"error": {"message",
"type", "code"}}`` (or OAuth2's shape for ``oauth/tokens``), never a 500 (the
``lake`` fixture also fails the module if the server logged an unexpected error).
"""

from __future__ import annotations

import base64
import json
import subprocess
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import quote

import pytest

from tests.api.conftest import Served
from tests.fuse.mounting import env_for, lakemount_cmd
from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET

BASIC = "Basic " + base64.b64encode(f"{ADMIN_KEY}:{ADMIN_SECRET}".encode()).decode()
SCHEMA = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


def call(lake: Served, method: str, path: str, body: Any = None, *, auth: str | None = BASIC,
         raw: bytes | None = None, ctype: str = "application/json") -> tuple[int, Any]:
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"{lake.api}/iceberg/api{path}", data=data, method=method)
    if auth:
        req.add_header("Authorization", auth)
    if data is not None:
        req.add_header("Content-Type", ctype)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            text = r.read()
            return r.status, json.loads(text) if text else None
    except urllib.error.HTTPError as e:
        text = e.read()
        return e.code, json.loads(text) if text else None


def ns(*levels: str) -> str:
    return quote("\x1f".join(levels), safe="")


def error_of(status: int, body: Any, code: int, type_: str) -> str:
    assert status == code, (status, body)
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "code"}, body
    assert body["error"]["code"] == code and body["error"]["type"] == type_, body
    return str(body["error"]["message"])


def make_table(lake: Served, repo: str, ref: str, name: str, namespace: str = "db") -> dict[str, Any]:
    status, _ = call(lake, "POST", "/v1/namespaces", {"namespace": [repo, ref, namespace]})
    assert status in (200, 409)
    status, body = call(lake, "POST", f"/v1/namespaces/{ns(repo, ref, namespace)}/tables", {"name": name, "schema": SCHEMA})
    assert status == 200, body
    return body  # type: ignore[no-any-return]


def table_path(repo: str, ref: str, name: str) -> str:
    return f"/v1/namespaces/{ns(repo, ref, 'db')}/tables/{quote(name, safe='')}"


def props(lake: Served, repo: str, ref: str, name: str) -> dict[str, str]:
    status, body = call(lake, "GET", table_path(repo, ref, name))
    assert status == 200, body
    return body["metadata"]["properties"]  # type: ignore[no-any-return]


def change(repo: str, ref: str, name: str, uuid: str, **properties: str) -> dict[str, Any]:
    return {"identifier": {"namespace": [repo, ref, "db"], "name": name},
            "requirements": [{"type": "assert-table-uuid", "uuid": uuid}],
            "updates": [{"action": "set-properties", "updates": properties}]}


def test_a_transaction_changes_several_tables_in_one_staging_change_or_none(lake: Served) -> None:
    repo = lake.repo()
    a = make_table(lake, repo.id, "main", "a")["metadata"]["table-uuid"]
    b = make_table(lake, repo.id, "main", "b")["metadata"]["table-uuid"]
    main = repo.branch("main")
    main.commit(message="two tables")

    broken = change(repo.id, "main", "b", "not-the-uuid", v="1")
    status, body = call(lake, "POST", "/v1/transactions/commit",
                        {"table-changes": [change(repo.id, "main", "a", a, v="1"), broken]})
    assert "UUID does not match" in error_of(status, body, 409, "CommitFailedException")
    assert "v" not in props(lake, repo.id, "main", "a"), "a failed transaction changed a table"
    assert list(main.uncommitted()) == []

    status, body = call(lake, "POST", "/v1/transactions/commit",
                        {"table-changes": [change(repo.id, "main", "a", a, v="2"), change(repo.id, "main", "b", b, v="2")]})
    assert status == 204, body
    assert props(lake, repo.id, "main", "a")["v"] == props(lake, repo.id, "main", "b")["v"] == "2"
    commit = main.commit(message="both tables at once")
    changed = {d.path for d in repo.ref(commit.get_commit().parents[0]).diff(main)}
    assert {"db/a/_iceberg_table.json", "db/b/_iceberg_table.json"} <= changed

    status, body = call(lake, "POST", "/v1/transactions/commit",
                        {"table-changes": [change(repo.id, "main", "a", a, v="3"), change(repo.id, "feat", "b", b, v="3")]})
    error_of(status, body, 400, "BadRequestException")


def test_merging_branches_that_changed_one_table_conflicts_on_it_and_other_tables_merge(lake: Served) -> None:
    import lakefs

    repo = lake.repo()
    a = make_table(lake, repo.id, "main", "a")["metadata"]["table-uuid"]
    make_table(lake, repo.id, "main", "b")
    repo.branch("main").commit(message="tables")
    left = repo.branch("left").create(source_reference="main")
    right = repo.branch("right").create(source_reference="main")
    for branch in ("left", "right"):
        status, body = call(lake, "POST", table_path(repo.id, branch, "a"), change(repo.id, branch, "a", a, side=branch))
        assert status == 200, body
    left.commit(message="left changes a")
    right.commit(message="right changes a")
    left.merge_into(repo.branch("main"))
    with pytest.raises(lakefs.exceptions.ConflictException, match="table db.a changed on both branches") as info:
        right.merge_into(repo.branch("main"))
    assert "db/a/_iceberg_table.json" in str(info.value)
    cli = subprocess.run(lakemount_cmd("merge", f"lakefs://{repo.id}/right", f"lakefs://{repo.id}/main"),
                         env=env_for(str(lake.home)), capture_output=True, text=True, timeout=120)
    assert cli.returncode != 0 and "table db.a changed on both branches" in cli.stderr, cli.stderr

    other = repo.branch("other").create(source_reference="main")
    b = props(lake, repo.id, "other", "b")
    assert "side" not in b
    status, body = call(lake, "GET", table_path(repo.id, "other", "b"))
    uuid_b = body["metadata"]["table-uuid"]
    status, body = call(lake, "POST", table_path(repo.id, "other", "b"), change(repo.id, "other", "b", uuid_b, side="other"))
    assert status == 200, body
    other.commit(message="other changes b")
    other.merge_into(repo.branch("main"))
    assert props(lake, repo.id, "main", "a")["side"] == "left"
    assert props(lake, repo.id, "main", "b")["side"] == "other"


def test_tokens_come_from_access_keys_and_refusals_take_oauths_shape(lake: Served) -> None:
    form = f"grant_type=client_credentials&client_id={ADMIN_KEY}&client_secret={ADMIN_SECRET}&scope=catalog".encode()
    status, body = call(lake, "POST", "/v1/oauth/tokens", raw=form, auth=None, ctype="application/x-www-form-urlencoded")
    assert status == 200 and body["token_type"] == "bearer" and body["expires_in"] > 0, body
    status, _ = call(lake, "GET", "/v1/config", auth=f"Bearer {body['access_token']}")
    assert status == 200
    # RFC 6749's client_secret_basic, as DuckDB sends the credentials
    status, body = call(lake, "POST", "/v1/oauth/tokens", raw=b"grant_type=client_credentials&scope=PRINCIPAL_ROLE%3AALL",
                        auth=BASIC, ctype="application/x-www-form-urlencoded")
    assert status == 200 and body["access_token"], body
    bad = f"grant_type=client_credentials&client_id={ADMIN_KEY}&client_secret=wrong".encode()
    status, body = call(lake, "POST", "/v1/oauth/tokens", raw=bad, auth=None, ctype="application/x-www-form-urlencoded")
    assert status == 401 and body["error"] == "invalid_client", body
    status, body = call(lake, "POST", "/v1/oauth/tokens", raw=b"grant_type=password", auth=None,
                        ctype="application/x-www-form-urlencoded")
    assert status == 400 and body["error"] == "unsupported_grant_type", body
    status, body = call(lake, "GET", "/v1/namespaces", auth=None)
    error_of(status, body, 401, "NotAuthorizedException")
    status, body = call(lake, "GET", "/v1/namespaces", auth="Bearer forged.token.here")
    error_of(status, body, 401, "NotAuthorizedException")


HOSTILE = ["..", ".", "a/b", "x\x00y", "_iceberg_table.json", "tab\nle", "é" * 200, ""]


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_table_names_are_400(lake: Served, name: str) -> None:
    repo = lake.repo()
    make_table(lake, repo.id, "main", "ok")
    status, body = call(lake, "POST", f"/v1/namespaces/{ns(repo.id, 'main', 'db')}/tables", {"name": name, "schema": SCHEMA})
    error_of(status, body, 400, "BadRequestException")
    if name:
        status, body = call(lake, "GET", f"/v1/namespaces/{ns(repo.id, 'main', 'db')}/tables/{quote(name, safe='')}")
        assert status in (400, 404), body  # '.', '..' and 'a/b' may be normalised away by the URL before routing
        assert body["error"]["type"] in ("BadRequestException", "NoSuchEndpointException"), body


def test_malformed_requests_get_the_protocols_errors(lake: Served) -> None:
    repo = lake.repo()
    made = make_table(lake, repo.id, "main", "t")
    uuid = made["metadata"]["table-uuid"]
    path = table_path(repo.id, "main", "t")

    def commit(body: Any, raw: bytes | None = None) -> tuple[int, Any]:
        return call(lake, "POST", path, body, raw=raw)

    cases: list[tuple[Any, bytes | None]] = [
        (None, b"{not json"), (None, b"[1, 2]"), ({"updates": []}, None), ({"requirements": [], "updates": {}}, None),
        ({"requirements": [{"type": "assert-nonsense"}], "updates": []}, None),
        ({"requirements": [], "updates": [{"action": "explode"}]}, None),
        ({"requirements": [], "updates": [{"action": "add-snapshot", "snapshot": {"snapshot-id": "x"}}]}, None),
        ({"requirements": [], "updates": [{"action": "add-schema", "schema": {"type": "struct", "fields": [{"id": True}]}}]}, None),
        ({"requirements": [], "updates": [{"action": "set-current-schema", "schema-id": 77}]}, None),
        ({"requirements": [], "updates": [{"action": "set-current-schema", "schema-id": -1}]}, None),
        ({"requirements": [], "updates": [{"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 5}]}, None),
        ({"requirements": [], "updates": [{"action": "set-properties", "updates": {"a": 1}}]}, None),
        ({"requirements": [], "updates": [{"action": "upgrade-format-version", "format-version": 1}]}, None),
        ({"requirements": [{"type": "assert-ref-snapshot-id", "ref": "main"}], "updates": []}, None),
        ({"requirements": [], "updates": ["set-properties"]}, None),
        ({"requirements": [], "updates": [{"action": "add-schema", "schema": {"type": "struct", "fields": [
            {"id": 2, "name": "deep", "type": json.loads('{"type": "list", "element-id": 3, "element": ' * 900 + '"long"'
                                                         + "}" * 900)}]}}]}, None),
    ]
    for body, raw in cases:
        status, answer = commit(body, raw)
        error_of(status, answer, 400, "BadRequestException")

    status, answer = commit({"requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 42}], "updates": []})
    # The Java reference's words, which clients match on.
    assert error_of(status, answer, 409, "CommitFailedException") == "Requirement failed: branch or tag main is missing, expected 42"
    for requirement, words in [
        ({"type": "assert-current-schema-id", "current-schema-id": 3}, "current schema changed: expected id 3 != 0"),
        ({"type": "assert-default-spec-id", "default-spec-id": 1}, "default partition spec changed: expected id 1 != 0"),
        ({"type": "assert-default-sort-order-id", "default-sort-order-id": 2}, "default sort order changed: expected id 2 != 0"),
        ({"type": "assert-last-assigned-field-id", "last-assigned-field-id": 9}, "last assigned field id changed: expected id 9 != 1"),
        ({"type": "assert-last-assigned-partition-id", "last-assigned-partition-id": 1},
         "last assigned partition id changed: expected id 1 != 999"),
        ({"type": "assert-table-uuid", "uuid": "u-2"}, f"UUID does not match: expected {uuid} != u-2"),
        ({"type": "assert-create"}, "table already exists"),
    ]:
        status, answer = commit({"requirements": [requirement], "updates": []})
        assert error_of(status, answer, 409, "CommitFailedException") == f"Requirement failed: {words}"
    status, answer = commit({"requirements": [{"type": "assert-table-uuid", "uuid": uuid}],
                             "updates": [{"action": "set-properties", "updates": {"ok": "yes"}}]})
    assert status == 200 and answer["metadata"]["properties"] == {"write.parquet.compression-codec": "zstd", "ok": "yes"}, answer

    status, answer = call(lake, "GET", f"/v1/namespaces/{ns(repo.id, 'main', 'nope')}/tables")
    assert "nope" in error_of(status, answer, 404, "NoSuchNamespaceException")
    status, answer = call(lake, "GET", f"/v1/namespaces/{ns('no-such-repo', 'main', 'db')}/tables/t")
    error_of(status, answer, 404, "NoSuchNamespaceException")
    status, answer = call(lake, "GET", f"/v1/namespaces/{ns(repo.id, 'no-such-branch', 'db')}/tables/t")
    error_of(status, answer, 404, "NoSuchNamespaceException")
    status, answer = call(lake, "GET", table_path(repo.id, "main", "absent"))
    error_of(status, answer, 404, "NoSuchTableException")
    status, answer = call(lake, "GET", f"/v1/namespaces/{ns(repo.id, 'main')}/tables")
    error_of(status, answer, 400, "BadRequestException")  # a ref alone holds no tables
    status, answer = call(lake, "POST", "/v1/namespaces", {"namespace": [repo.id, "main", "a", "b"]})
    error_of(status, answer, 404, "NoSuchNamespaceException")  # its parent a does not exist
    status, answer = call(lake, "POST", "/v1/namespaces", {"namespace": [repo.id, "main", "db", "t"]})
    error_of(status, answer, 409, "AlreadyExistsException")  # a table is named so
    status, answer = call(lake, "POST", "/v1/namespaces", {"namespace": [repo.id, "main", "db", "sub"]})
    assert status == 200, answer
    status, answer = call(lake, "POST", f"/v1/namespaces/{ns(repo.id, 'main', 'db')}/tables", {"name": "sub", "schema": SCHEMA})
    error_of(status, answer, 409, "AlreadyExistsException")  # a namespace is named so
    status, answer = call(lake, "POST", "/v1/namespaces", {"namespace": "db"})
    error_of(status, answer, 400, "BadRequestException")
    status, answer = call(lake, "POST", "/v1/tables/rename", {"source": {"namespace": [repo.id, "main", "db"], "name": "t"},
                                                              "destination": {"namespace": [repo.id, "feat", "db"], "name": "t"}})
    error_of(status, answer, 400, "BadRequestException")
    status, answer = call(lake, "DELETE", "/v1/config")
    error_of(status, answer, 405, "MethodNotAllowedException")
    status, answer = call(lake, "GET", "/v1/nothing/here")
    error_of(status, answer, 404, "NoSuchEndpointException")
    status, answer = call(lake, "POST", "/v1/transactions/commit", {"table-changes": [{"requirements": [], "updates": []}]})
    error_of(status, answer, 400, "BadRequestException")


def test_register_points_a_table_at_a_metadata_file_of_its_branch(lake: Served) -> None:
    repo = lake.repo()
    made = make_table(lake, repo.id, "main", "t")
    location = made["metadata-location"]
    assert location.startswith(f"s3://{repo.id}/main/db/t/metadata/")
    status, body = call(lake, "POST", f"/v1/namespaces/{ns(repo.id, 'main', 'db')}/register",
                        {"name": "again", "metadata-location": location})
    assert status == 200 and body["metadata"]["table-uuid"] == made["metadata"]["table-uuid"], body
    status, body = call(lake, "POST", f"/v1/namespaces/{ns(repo.id, 'main', 'db')}/register",
                        {"name": "again", "metadata-location": location})
    error_of(status, body, 409, "AlreadyExistsException")
    for bad in ("s3://other-repo/main/x.json", "http://elsewhere/x.json", "db/../x", "db/none.metadata.json"):
        status, body = call(lake, "POST", f"/v1/namespaces/{ns(repo.id, 'main', 'db')}/register",
                            {"name": "bad", "metadata-location": bad})
        error_of(status, body, 400, "BadRequestException")

    # A file the catalog did not write, lacking what an update needs: the update is refused, not a crash.
    repo.branch("main").object("db/sparse.metadata.json").upload(
        json.dumps({"table-uuid": "u-1", "schemas": [SCHEMA], "format-version": 2}).encode())
    status, body = call(lake, "POST", f"/v1/namespaces/{ns(repo.id, 'main', 'db')}/register",
                        {"name": "sparse", "metadata-location": "db/sparse.metadata.json"})
    assert status == 200, body
    status, body = call(lake, "POST", table_path(repo.id, "main", "sparse"),
                        {"requirements": [], "updates": [{"action": "set-snapshot-ref", "ref-name": "main",
                                                          "type": "branch", "snapshot-id": 1}]})
    assert "set-snapshot-ref" in error_of(status, body, 400, "BadRequestException")


def test_format_versions_shape_their_metadata_and_check_their_rules(lake: Served) -> None:
    repo = lake.repo()
    status, _ = call(lake, "POST", "/v1/namespaces", {"namespace": [repo.id, "main", "db"]})
    assert status == 200

    def create(name: str, version: str) -> tuple[int, Any]:
        return call(lake, "POST", f"/v1/namespaces/{ns(repo.id, 'main', 'db')}/tables",
                    {"name": name, "schema": SCHEMA, "properties": {"format-version": version, "owner": "ana"}})

    status, v1 = call(lake, "POST", f"/v1/namespaces/{ns(repo.id, 'main', 'db')}/tables", {
        "name": "parted", "schema": SCHEMA, "properties": {"format-version": "1"},
        "partition-spec": {"spec-id": 0, "fields": [{"source-id": 1, "transform": "identity", "name": "a"},
                                                    {"source-id": 1, "transform": "bucket[4]", "name": "b"}]}})
    assert status == 200, v1  # a v1 writer's spec without field ids: the reference's 1000, 1001
    assert [f["field-id"] for f in v1["metadata"]["partition-spec"]] == [1000, 1001]
    assert v1["metadata"]["last-partition-id"] == 1001
    status, answer = call(lake, "POST", table_path(repo.id, "main", "parted"), {"requirements": [], "updates": [
        {"action": "add-spec", "spec": {"fields": [{"source-id": 1, "transform": "truncate[2]", "name": "c"}]}},
        {"action": "set-default-spec", "spec-id": -1}]})
    assert status == 200 and answer["metadata"]["partition-spec"] == [
        {"source-id": 1, "transform": "truncate[2]", "name": "c", "field-id": 1002}], answer
    status, v1 = create("one", "1")
    assert status == 200, v1
    meta = v1["metadata"]
    assert meta["format-version"] == 1 and meta["schema"] == meta["schemas"][0] and meta["partition-spec"] == []
    assert "last-sequence-number" not in meta and "next-row-id" not in meta
    assert meta["properties"] == {"write.parquet.compression-codec": "zstd", "owner": "ana"}
    for bad in ("4", "0", "two"):
        status, answer = create(f"bad{bad}", bad)
        assert "is not supported" in error_of(status, answer, 400, "BadRequestException")

    def commit(name: str, *updates: dict[str, Any]) -> tuple[int, Any]:
        return call(lake, "POST", table_path(repo.id, "main", name), {"requirements": [], "updates": list(updates)})

    defaulted = {"type": "struct", "schema-id": 1, "fields": [
        *SCHEMA["fields"], {"id": 2, "name": "score", "type": "long", "required": True, "initial-default": 7, "write-default": 7}]}
    status, answer = commit("one", {"action": "add-schema", "schema": defaulted})
    assert "Invalid initial default for score" in error_of(status, answer, 400, "BadRequestException")
    nanos = {"type": "struct", "schema-id": 1, "fields": [*SCHEMA["fields"], {"id": 2, "name": "t", "type": "timestamp_ns", "required": False}]}
    status, answer = commit("one", {"action": "add-schema", "schema": nanos})
    assert "timestamp_ns is not supported until v3" in error_of(status, answer, 400, "BadRequestException")

    # v1 -> v2 by the update, v2 -> v3 by the property; never back.
    status, answer = commit("one", {"action": "upgrade-format-version", "format-version": 2})
    assert status == 200 and answer["metadata"]["format-version"] == 2 and answer["metadata"]["last-sequence-number"] == 0
    assert "schema" not in answer["metadata"] and "partition-spec" not in answer["metadata"]
    status, answer = commit("one", {"action": "set-properties", "updates": {"format-version": "3"}})
    assert status == 200 and answer["metadata"]["format-version"] == 3 and answer["metadata"]["next-row-id"] == 0
    assert "format-version" not in answer["metadata"]["properties"]
    status, answer = commit("one", {"action": "upgrade-format-version", "format-version": 2})
    assert error_of(status, answer, 400, "BadRequestException") == "Cannot downgrade v3 table to v2"

    # v3: field defaults, and row lineage: every snapshot says where its rows' ids start and how many it adds.
    status, answer = commit("one", {"action": "add-schema", "schema": defaulted}, {"action": "set-current-schema", "schema-id": -1})
    assert status == 200 and answer["metadata"]["schemas"][-1]["fields"][-1]["initial-default"] == 7

    def snapshot(sid: int, first: int | None, added: int | None, parent: int | None = None) -> dict[str, Any]:
        snap: dict[str, Any] = {"snapshot-id": sid, "timestamp-ms": 1, "sequence-number": sid,
                                "manifest-list": f"s3://{repo.id}/main/db/one/metadata/snap-{sid}.avro",
                                "summary": {"operation": "append"}, "parent-snapshot-id": parent}
        if first is not None:
            snap["first-row-id"] = first
        if added is not None:
            snap["added-rows"] = added
        return {"action": "add-snapshot", "snapshot": snap}

    status, answer = commit("one", snapshot(1, None, 5))
    assert error_of(status, answer, 400, "BadRequestException") == "Cannot add a snapshot: first-row-id is null"
    status, answer = commit("one", snapshot(1, 0, 5), {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 1})
    assert status == 200 and answer["metadata"]["next-row-id"] == 5, answer
    status, answer = commit("one", snapshot(2, 3, 1, parent=1))
    assert "first-row-id is behind table next-row-id: 3 < 5" in error_of(status, answer, 400, "BadRequestException")
    status, answer = commit("one", snapshot(2, 5, 2, parent=1))
    assert status == 200 and answer["metadata"]["next-row-id"] == 7
    status, answer = call(lake, "GET", table_path(repo.id, "main", "one"))
    assert status == 200 and answer["metadata"]["next-row-id"] == 7 and answer["metadata"]["last-sequence-number"] == 2


def test_config_advertises_exactly_the_served_routes_and_hands_out_s3_through_the_gateway(lake: Served) -> None:
    from lakemount.iceberg.service import ROUTES

    form = f"grant_type=client_credentials&client_id={ADMIN_KEY}&client_secret={ADMIN_SECRET}".encode()
    status, body = call(lake, "POST", "/v1/oauth/tokens", raw=form, auth=None, ctype="application/x-www-form-urlencoded")
    assert status == 200, body
    status, config = call(lake, "GET", "/v1/config", auth=f"Bearer {body['access_token']}")
    assert status == 200, config
    assert config["overrides"] == {}
    # A client holding only a URI and a key reads and writes data with these (the gateway, path style, its region,
    # and the key the token was minted from).
    assert config["defaults"] == {"s3.endpoint": lake.gateway.url, "s3.path-style-access": "true", "s3.region": "us-east-1",
                                  "client.region": "us-east-1", "s3.access-key-id": ADMIN_KEY, "s3.secret-access-key": ADMIN_SECRET}
    advertised = config["endpoints"]
    assert len(advertised) == len(set(advertised))
    served = {f"{r.method} /v1/{{prefix}}{r.template[3:]}" for r in ROUTES if r.template not in ("/v1/config", "/v1/oauth/tokens")}
    assert set(advertised) == served  # every served route advertised, and nothing more
    # Each advertised endpoint answers (whatever the answer to a made-up name), never "no such endpoint".
    repo = lake.repo()
    made = make_table(lake, repo.id, "main", "t")
    assert made["config"]["s3.access-key-id"] == ADMIN_KEY and made["config"]["s3.endpoint"] == lake.gateway.url
    status, answer = call(lake, "GET", table_path(repo.id, "main", "t"))
    assert status == 200 and answer["config"] == config["defaults"]  # each load-table result's config too
    for endpoint in advertised:  # (DELETE drops t: hence the load above first)
        method, template = endpoint.split(" ", 1)
        path = (template.replace("/{prefix}", "").replace("{namespace}", ns(repo.id, "main", "db"))
                .replace("{table}", "t").replace("{view}", "v"))
        status, answer = call(lake, method, path, {} if method == "POST" else None)
        assert status not in (404, 405) or answer is None or answer["error"]["type"] not in (
            "NoSuchEndpointException", "MethodNotAllowedException"), (endpoint, status, answer)
        assert status < 500, (endpoint, status, answer)


def test_v1_and_v3_tables_changed_on_two_branches_merge_like_v2_ones(lake: Served) -> None:
    repo = lake.repo()
    status, _ = call(lake, "POST", "/v1/namespaces", {"namespace": [repo.id, "main", "db"]})
    assert status == 200
    uuids = {}
    for name, version in (("one", "1"), ("three", "3")):
        status, made = call(lake, "POST", f"/v1/namespaces/{ns(repo.id, 'main', 'db')}/tables",
                            {"name": name, "schema": SCHEMA, "properties": {"format-version": version}})
        assert status == 200 and made["metadata"]["format-version"] == int(version), made
        uuids[name] = made["metadata"]["table-uuid"]
    main = repo.branch("main")
    main.commit(message="v1 and v3 tables")
    other = repo.branch("other").create(source_reference="main")
    for ref, side in (("main", "left"), ("other", "right")):
        status, body = call(lake, "POST", table_path(repo.id, ref, "one"), change(repo.id, ref, "one", uuids["one"], side=side))
        assert status == 200, body
    status, body = call(lake, "POST", table_path(repo.id, "other", "three"), change(repo.id, "other", "three", uuids["three"], side="right"))
    assert status == 200, body
    main.commit(message="main changes one")
    other.commit(message="other changes one and three")
    from lakefs.exceptions import ConflictException

    with pytest.raises(ConflictException, match=r"table db\.one changed on both branches"):
        other.merge_into(main)
    # A branch that changed only the v3 table merges: tables changed on one side only merge cleanly.
    third = repo.branch("third").create(source_reference="main~1")
    status, body = call(lake, "POST", table_path(repo.id, "third", "three"),
                        change(repo.id, "third", "three", uuids["three"], side="third"))
    assert status == 200, body
    third.commit(message="third changes three")
    third.merge_into(main)
    status, body = call(lake, "GET", table_path(repo.id, "main", "three"))
    assert status == 200 and body["metadata"]["format-version"] == 3 and body["metadata"]["properties"]["side"] == "third"
    status, body = call(lake, "GET", table_path(repo.id, "main", "one"))
    assert status == 200 and body["metadata"]["format-version"] == 1 and body["metadata"]["properties"]["side"] == "left"
