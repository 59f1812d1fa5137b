"""Reads and writes through the gateway and the API appear in the audit table with user, ref, commit and bytes."""

from __future__ import annotations

import json

import pyarrow.dataset as ds

from lakemount.audit.table import root
from lakemount.serving.http import BytesBody, Request
from tests.gateway.test_server_core import call

from .conftest import Lake, basic


def api(lake: Lake, method: str, path: str, query: str = "", body: bytes = b"", auth: tuple[str, str] | None = None,
        headers: tuple[tuple[str, str], ...] = ()) -> tuple[int, bytes]:
    req = Request(method, "/api/v1" + path, query, (auth or lake.auth, ("content-length", str(len(body))), *headers),
                  BytesBody(body))
    resp = lake.api.handle(req)
    data = resp.body if isinstance(resp.body, bytes) else b"".join(resp.body)
    if resp.close is not None:
        resp.close()
    return resp.status, data


def test_gateway_read_and_write_are_recorded_with_user_ref_commit_and_bytes(lake: Lake) -> None:
    assert call(lake.gw, "PUT", "/gwr").status == 200
    head = lake.app.catalog.get_branch("gwr", "main").commit_id
    assert call(lake.gw, "PUT", "/gwr/main/dir/a.bin", b"x" * 1234).status == 200
    assert call(lake.gw, "GET", "/gwr/main/dir/a.bin").status == 200
    assert call(lake.gw, "GET", "/gwr/main/dir/nope").status == 404
    recs = lake.records("gwr")
    by_op = {(r.op, r.status): r for r in recs}
    put, get, missing = by_op[("PutObject", 200)], by_op[("GetObject", 200)], by_op[("GetObject", 404)]
    for r in (put, get, missing):
        assert (r.user, r.frontend, r.repo, r.ref, r.commit) == ("admin", "s3", "gwr", "main", head)
    assert (put.path, put.bytes) == ("dir/a.bin", 1234)
    assert (get.path, get.bytes) == ("dir/a.bin", 1234)
    assert (missing.path, missing.bytes) == ("dir/nope", 0)
    assert [r.seq for r in recs] == sorted(r.seq for r in recs)


def test_api_read_and_write_are_recorded_with_user_ref_commit_and_bytes(lake: Lake) -> None:
    lake.app.catalog.create_repository("apir")
    head = lake.app.catalog.get_branch("apir", "main").commit_id
    status, _ = api(lake, "POST", "/repositories/apir/branches/main/objects", "path=t/a.csv", b"a,b\n1,2\n")
    assert status == 201
    assert api(lake, "GET", "/repositories/apir/refs/main/objects", "path=t/a.csv")[0] == 200
    assert api(lake, "GET", "/repositories/apir/refs/main/objects/stat", "path=t/a.csv")[0] == 200
    assert api(lake, "GET", "/repositories/apir/refs/main/objects/ls", "prefix=t/")[0] == 200
    recs = {r.op: r for r in lake.records("apir")}
    assert set(recs) >= {"uploadObject", "getObject", "statObject", "listObjects"}
    for r in recs.values():
        assert (r.user, r.frontend, r.ref, r.commit) == ("admin", "api", "main", head), r
    assert (recs["uploadObject"].path, recs["uploadObject"].bytes) == ("t/a.csv", 8)
    assert (recs["getObject"].path, recs["getObject"].bytes) == ("t/a.csv", 8)
    assert recs["listObjects"].path == "t/"


def test_an_upload_linked_to_a_handed_out_address_is_a_write_record(lake: Lake) -> None:
    """linkPhysicalAddress stages an object the client stored itself: a write like uploadObject (issue 38 item 3)."""
    import hashlib
    from pathlib import Path

    lake.app.catalog.create_repository("linkr")
    head = lake.app.catalog.get_branch("linkr", "main").commit_id
    status, body = api(lake, "GET", "/repositories/linkr/branches/main/staging/backing", "path=l.bin")
    assert status == 200, body
    loc = json.loads(body)
    stored = Path(loc["physical_address"].rpartition(",")[0].removeprefix("local://"))
    stored.parent.mkdir(parents=True, exist_ok=True)
    stored.write_bytes(b"linked bytes")
    link = {"staging": loc, "size_bytes": 12, "checksum": hashlib.md5(b"linked bytes").hexdigest()}
    status, body = api(lake, "PUT", "/repositories/linkr/branches/main/staging/backing", "path=l.bin",
                       json.dumps(link).encode(), headers=(("content-type", "application/json"),))
    assert status == 200, body
    [rec] = [r for r in lake.records("linkr") if r.op == "linkPhysicalAddress"]
    assert (rec.user, rec.frontend, rec.ref, rec.commit, rec.path, rec.bytes, rec.status) == (
        "admin", "api", "main", head, "l.bin", 12, 200)


def test_versioning_verbs_are_recorded_once_whatever_the_front_end(lake: Lake) -> None:
    cat = lake.app.catalog
    cat.create_repository("ver")
    api(lake, "POST", "/repositories/ver/branches/main/objects", "path=f", b"1")
    status, body = api(lake, "POST", "/repositories/ver/branches/main/commits", "", json.dumps({"message": "m"}).encode(),
                       headers=(("content-type", "application/json"),))
    assert status == 201, body
    commit = json.loads(body)["id"]
    status, _ = api(lake, "POST", "/repositories/ver/branches", "", json.dumps({"name": "dev", "source": "main"}).encode(),
                    headers=(("content-type", "application/json"),))
    assert status == 201
    assert api(lake, "PUT", "/repositories/ver/branches/dev", "", json.dumps({"type": "reset"}).encode(),
               headers=(("content-type", "application/json"),))[0] in (204, 200)
    recs = lake.records("ver")
    commits = [r for r in recs if r.op == "commit"]
    assert len(commits) == 1 and (commits[0].user, commits[0].frontend, commits[0].commit) == ("admin", "api", commit)
    created = [r for r in recs if r.op == "branch-created"]
    assert len(created) == 1 and created[0].ref == "dev" and created[0].commit == commit
    assert [r.ref for r in recs if r.op == "reset"] == ["dev"]


def test_the_partitions_are_plain_parquet_any_reader_queries(lake: Lake) -> None:
    assert call(lake.gw, "PUT", "/pqt").status == 200
    for i in range(3):
        call(lake.gw, "PUT", f"/pqt/main/o{i}", b"abc")
    lake.records("pqt")
    ns = lake.app.catalog.repository("pqt").storage_namespace
    assert ns.startswith("local://")
    base = root(ns)[len("local://"):]
    dataset = ds.dataset(base, format="parquet", partitioning="hive")
    t = dataset.to_table(filter=ds.field("op") == "PutObject")
    assert sorted(t.column("path").to_pylist()) == ["o0", "o1", "o2"]
    assert set(t.column("user").to_pylist()) == {"admin"}
    assert {"date", "hour"} <= set(dataset.schema.names)


def test_api_query_filters_and_pages(lake: Lake) -> None:
    assert call(lake.gw, "PUT", "/qry").status == 200
    for i in range(5):
        call(lake.gw, "PUT", f"/qry/main/a/{i}", b"z")
    call(lake.gw, "PUT", "/qry/main/b/x", b"z")
    call(lake.gw, "GET", "/qry/main/b/x")
    lake.app.audit.flush()  # type: ignore[union-attr]
    status, body = api(lake, "GET", "/repositories/qry/audit", "path=a/&op=PutObject&amount=2")
    assert status == 200
    first = json.loads(body)
    assert [r["path"] for r in first["results"]] == ["a/0", "a/1"] and first["pagination"]["has_more"]
    status, body = api(lake, "GET", "/repositories/qry/audit", f"path=a/&op=PutObject&amount=10&after={first['pagination']['next_offset']}")
    assert [r["path"] for r in json.loads(body)["results"]] == ["a/2", "a/3", "a/4"]
    status, body = api(lake, "GET", "/repositories/qry/audit", "op=GetObject&user=admin")
    got = json.loads(body)["results"]
    assert [(r["path"], r["bytes"], r["frontend"]) for r in got] == [("b/x", 1, "s3")]
    assert json.loads(api(lake, "GET", "/repositories/qry/audit", "user=nobody")[1])["results"] == []
    assert json.loads(api(lake, "GET", "/repositories/qry/audit", "since=1&until=2")[1])["results"] == []


def test_audit_read_is_admin_only_by_default(lake: Lake) -> None:
    lake.app.catalog.create_repository("rbac")
    dev = basic(*lake.user("dev", "Developer"))
    status, body = api(lake, "GET", "/repositories/rbac/audit", auth=dev)
    assert status == 403, body
    assert api(lake, "GET", "/repositories/rbac/audit")[0] == 200
    # Refused requests are records too, with who was refused.
    assert api(lake, "GET", "/repositories/rbac/refs/main/objects/stat", "path=x", auth=basic(*lake.user("nobody")))[0] == 403
    refused = [r for r in lake.records("rbac") if r.status == 403]
    assert [(r.user, r.op, r.path) for r in refused] == [("nobody", "statObject", "x")]


def test_switched_off_nothing_is_recorded(tmp_path) -> None:  # type: ignore[no-untyped-def]
    lk = Lake(tmp_path / "off", LAKEMOUNT_AUDIT_ENABLED="false")
    assert lk.app.audit is None
    assert call(lk.gw, "PUT", "/off").status == 200
    assert call(lk.gw, "PUT", "/off/main/a", b"1").status == 200
    ns = lk.app.catalog.repository("off").storage_namespace
    assert list(lk.app.adapter.list(root(ns))) == []


def test_failed_versioning_verbs_through_the_api_are_records_with_their_status(lake: Lake) -> None:
    cat = lake.app.catalog
    cat.create_repository("vfail")
    cat.protection.add("vfail", "main")
    dev = basic(*lake.user("reader"))
    js = (("content-type", "application/json"),)
    commit = json.dumps({"message": "m", "allow_empty": True}).encode()
    assert api(lake, "POST", "/repositories/vfail/branches/main/commits", "", commit, headers=js)[0] == 403  # protected
    assert api(lake, "POST", "/repositories/vfail/branches/main/commits", "", commit, auth=dev, headers=js)[0] == 403
    assert api(lake, "POST", "/repositories/vfail/refs/nope/merge/main", "", b"{}", headers=js)[0] == 404
    assert api(lake, "DELETE", "/repositories/vfail/branches/gone")[0] == 404
    branch = json.dumps({"name": "main", "source": "main"}).encode()
    assert api(lake, "POST", "/repositories/vfail/branches", "", branch, headers=js)[0] == 409
    recs = [(r.op, r.user, r.ref, r.status, r.frontend) for r in lake.records("vfail") if r.op != "protection"]
    assert recs == [("commit", "admin", "main", 403, "api"), ("commit", "reader", "main", 403, "api"),
                    ("merge", "admin", "main", 404, "api"), ("branch-deleted", "admin", "gone", 404, "api"),
                    ("branch-created", "admin", "", 409, "api")]


def test_the_api_query_includes_records_still_in_a_cli_spool(lake: Lake) -> None:
    from lakemount.audit.log import AuditLog

    lake.app.catalog.create_repository("spq")
    cli = AuditLog(lake.app.adapter, lambda r: lake.app.catalog.repository(r).storage_namespace,
                   home=lake.app.config.home, flush_s=60, flush_records=100, retention_days=0)
    cli.spool()
    cli.record(repo="spq", op="cat", path="p", user="someone", frontend="cli")
    cli.close()
    status, body = api(lake, "GET", "/repositories/spq/audit")
    assert status == 200
    assert [(r["op"], r["path"], r["user"]) for r in json.loads(body)["results"]] == [("cat", "p", "someone")]
