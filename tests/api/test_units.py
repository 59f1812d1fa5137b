"""The API's parts without a server: layering, the error table, tokens, body validation, the form parser, the document."""

from __future__ import annotations

import ast
import base64
import hashlib
import hmac
import json
import time
from pathlib import Path

import pytest

import lakemount.errors as lm_errors
from lakemount.api.auth import Session, issue_token, signing_key, verify_token
from lakemount.api.errors import ApiError, status_of
from lakemount.api.handler import ApiService
from lakemount.api.openapi import document
from lakemount.api.routes import ROUTES
from lakemount.api.schemas import COMPONENTS, validate
from lakemount.api.upload import _form_content
from lakemount.app import App
from lakemount.config import load
from lakemount.serving.http import BytesBody, Request
from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET, _create_admin
from tests.serving.stalled import StalledBody

API_DIR = Path(__file__).resolve().parents[2] / "lakemount" / "api"


def test_api_never_reaches_graveler() -> None:
    for path in API_DIR.glob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("lakemount.graveler") for a in node.names), path
            elif isinstance(node, ast.ImportFrom):
                assert not (node.module or "").startswith("lakemount.graveler"), path
            elif isinstance(node, ast.Attribute):
                assert node.attr != "graveler", f"{path}:{node.lineno} touches .graveler"


def test_operations_name_their_repository_through_the_context_not_a_sibling() -> None:
    """``repo_of`` lived in ``branches.py`` and ten operation modules imported it sideways from there."""
    from lakemount.api import context

    sideways = []
    for path in sorted(API_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and any(a.name == "repo_of" for a in node.names):
                if node.module != "lakemount.api.context":
                    sideways.append(f"{path.name}:{node.lineno} from {node.module}")
    assert sideways == []
    assert context.repo_of.__module__ == "lakemount.api.context"


def test_every_error_category_has_a_status() -> None:
    expected = {
        lm_errors.NotFound: 404, lm_errors.AlreadyExists: 409, lm_errors.Conflict: 409,
        lm_errors.PreconditionFailed: 412, lm_errors.InvalidArgument: 400, lm_errors.ReadOnly: 403,
        lm_errors.PermissionDenied: 403,
        lm_errors.Corrupt: 500, lm_errors.Unavailable: 503,
    }
    assert set(expected) == set(lm_errors.CATEGORIES)
    for cls, status in expected.items():
        assert status_of(cls("x")) == status
    assert status_of(lm_errors.NothingToCommit("main")) == 400
    assert status_of(lm_errors.MergeConflict(["a"])) == 409
    assert status_of(lm_errors.ProtectedBranch("r", "main")) == 403
    assert status_of(lm_errors.ReadOnlyRef("r/v1")) == 404  # lakeFS: no branch v1
    assert status_of(lm_errors.BranchNotFound("r", "b")) == 404


def test_tokens() -> None:
    key = signing_key("server key")
    assert key != b"server key" and signing_key("other") != key
    token, exp = issue_token(key, "alice", "AKIAALICE", now=1000.0, seconds=60)
    assert exp == 1060
    assert verify_token(key, token, now=1059.0) == Session("alice", "AKIAALICE")
    for bad, now in ((token, 1060.0), (token, 5000.0), (token + "x", 1001.0), ("a.b", 1001.0), ("..", 1001.0)):
        with pytest.raises(ApiError) as e:
            verify_token(key, bad, now=now)
        assert e.value.status == 401
    with pytest.raises(ApiError):
        verify_token(signing_key("other"), token, now=1001.0)
    # A token without the key it was minted from (an older server's) is no session: log in again.
    head = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').rstrip(b"=").decode()
    claims = json.dumps({"sub": "alice", "aud": "lakemount-api", "iat": 1000, "exp": 1060}).encode()
    payload = base64.urlsafe_b64encode(claims).rstrip(b"=").decode()
    sig = hmac.new(key, f"{head}.{payload}".encode(), hashlib.sha256).digest()
    old = f"{head}.{payload}.{base64.urlsafe_b64encode(sig).rstrip(b'=').decode()}"
    with pytest.raises(ApiError) as info:
        verify_token(key, old, now=1001.0)
    assert info.value.status == 401 and "log in again" in info.value.message
    fresh, _ = issue_token(key, "bob", "AKIABOB")
    assert verify_token(key, fresh).user == "bob"
    assert verify_token(key, issue_token(key, "c", "AKIAC", now=time.time() - 10, seconds=60)[0]).user == "c"


def test_body_validation() -> None:
    assert validate({"name": "b", "source": "main"}, "BranchCreation") == {"name": "b", "source": "main"}
    bad = [
        ({"name": "b"}, "missing required"),
        ({"name": "b", "source": "main", "extra": 1}, "unknown field"),
        ({"name": True, "source": "main"}, "expected string"),
        ({"name": "b", "source": "main", "force": "yes"}, "expected boolean"),
        ([], "expected object"),
        (None, "null"),
    ]
    for body, msg in bad:
        with pytest.raises(ApiError, match=msg) as e:
            validate(body, "BranchCreation")
        assert e.value.status == 400
    with pytest.raises(ApiError, match="expected integer"):
        validate({"message": "m", "date": True}, "CommitCreation")
    with pytest.raises(ApiError, match="expected string"):
        validate({"message": "m", "metadata": {"k": 1}}, "CommitCreation")
    with pytest.raises(ApiError, match="must be one of"):
        validate({"strategy": "mine"}, "Merge")
    with pytest.raises(ApiError, match="at least 0"):
        validate({"ref": "x", "parent_number": -1}, "RevertCreation")




@pytest.mark.parametrize("split", [1, 3, 7, 64, 1 << 20])
def test_form_parser_streams_the_content_part(split: int) -> None:
    data = b"\r\n--B not yet\r\n-BB\r--BB\n--BB" * 50 + b"\x00\xff"
    body = (b"preamble\r\n--BB\r\nContent-Disposition: form-data; name=\"content\"; filename=\"f\"\r\n"
            b"Content-Type: text/csv\r\n\r\n" + data + b"\r\n--BB\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\n"
            b"ignored\r\n--BB--\r\n")
    pieces = iter([body[i : i + split] for i in range(0, len(body), split)])
    ctype: list[str] = []
    assert b"".join(_form_content(pieces, b"BB", ctype)) == data
    assert ctype == ["text/csv"]


def test_form_parser_refuses_truncated_or_odd_forms() -> None:
    head = b"--BB\r\nContent-Disposition: form-data; name=\"content\"\r\n\r\n"
    for body in (head + b"data without end", head + b"data\r\n--BB", head + b"data\r\n--BBxx", b"no boundary at all",
                 b"--BB\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\nx\r\n--BB--"):
        with pytest.raises(ApiError) as e:
            b"".join(_form_content(iter([body]), b"BB", []))
        assert e.value.status == 400


def test_document_covers_the_route_table() -> None:
    doc = document(ROUTES)
    ids = {op["operationId"] for methods in doc["paths"].values() for op in methods.values()}
    assert ids == {op.operation_id for op in ROUTES} - {"getOpenAPI"}
    assert len(ids) == len([op for op in ROUTES if op.operation_id != "getOpenAPI"])
    refs = set()

    def walk(x: object) -> None:
        if isinstance(x, dict):
            if "$ref" in x:
                refs.add(x["$ref"].rsplit("/", 1)[1])
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(doc)
    assert refs <= set(COMPONENTS)
    assert doc["x-lakemount-omitted"]


def _in_process(home: Path) -> tuple[ApiService, tuple[str, str]]:
    """An ``ApiService`` over a fresh home with the admin user, and the admin's Authorization header."""
    env = {"LAKEMOUNT_HOME": str(home)}
    _create_admin(env)
    service = ApiService(App(load(None, env=env)))
    return service, ("authorization", "Basic " + base64.b64encode(f"{ADMIN_KEY}:{ADMIN_SECRET}".encode()).decode())


def test_a_stalled_upload_is_408_and_stages_nothing(tmp_path: Path) -> None:
    service, auth = _in_process(tmp_path)
    service.app.catalog.create_repository("stall")
    path = "/api/v1/repositories/stall/branches/main/objects"
    put = Request("POST", path, "path=slow", (auth, ("content-type", "application/octet-stream"), ("content-length", "4096")),
                  StalledBody())
    resp = service.handle(put)
    assert resp.status == 408 and "0.1 s" in json.loads(resp.body)["message"]  # type: ignore[arg-type]
    stat = service.handle(Request("GET", path + "/stat", "path=slow", (auth,), BytesBody()))
    assert stat.status == 404


def test_the_last_administrator_cannot_delete_themselves(tmp_path: Path) -> None:
    # The web UI let the only admin delete their own user and lock everybody out.
    service, auth = _in_process(tmp_path)
    resp = service.handle(Request("DELETE", "/api/v1/auth/users/admin", "", (auth,), BytesBody()))
    assert resp.status == 409 and "no administrator" in json.loads(resp.body)["message"]  # type: ignore[arg-type]
    assert service.handle(Request("GET", "/api/v1/auth/users/admin", "", (auth,), BytesBody())).status == 200


def test_uploads_refuse_metadata_and_types_that_cannot_be_headers(tmp_path: Path) -> None:
    # Stored as given, CR/LF came back in x-lakefs-meta-* / Content-Type and the server dropped the connection.
    service, auth = _in_process(tmp_path)
    service.app.catalog.create_repository("hdr")
    path = "/api/v1/repositories/hdr/branches/main/objects"
    for extra in (("x-lakefs-meta-a", "1\r\nSet-Cookie: x=1"), ("content-type", "text/plain\r\nX-Evil: 1"), ("x-lakefs-meta-a b", "1")):
        put = Request("POST", path, "path=o", (auth, extra, ("content-length", "1")), BytesBody(b"x"))
        resp = service.handle(put)
        assert resp.status == 400, extra
        assert service.handle(Request("GET", path + "/stat", "path=o", (auth,), BytesBody())).status == 404
    put = Request("POST", path, "path=o", (auth, ("x-lakefs-meta-a", "1\t2"), ("content-length", "1")), BytesBody(b"x"))
    assert service.handle(put).status == 201


def test_deeply_nested_json_is_a_4xx_never_a_500(tmp_path: Path) -> None:
    # json.loads raises RecursionError (not ValueError) on '[[[[...': the body, a token and a preview were 500s.
    service, auth = _in_process(tmp_path)
    service.app.catalog.create_repository("deep")
    deep = b"[" * 200_000
    body = Request("POST", "/api/v1/repositories/deep/branches", "", (auth, ("content-type", "application/json"),
                                                                        ("content-length", str(len(deep)))), BytesBody(deep))
    resp = service.handle(body)
    assert resp.status == 400 and "nested too deeply" in json.loads(resp.body)["message"]  # type: ignore[arg-type]
    nested = base64.urlsafe_b64encode(deep).rstrip(b"=").decode()
    with pytest.raises(ApiError) as info:
        verify_token(signing_key("k"), f"{nested}.{nested}.c2ln")
    assert info.value.status == 401
    service.app.catalog.put("deep", "main", "d.json", deep[:100_000])
    resp = service.handle(Request("GET", "/api/v1/repositories/deep/refs/main/objects/preview", "path=d.json", (auth,), BytesBody()))
    assert resp.status == 200 and json.loads(resp.body)["kind"] == "text"  # type: ignore[arg-type]


def test_parquet_previews_of_crafted_files_stay_bounded(tmp_path: Path) -> None:
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from lakemount.api.operations.preview import parquet_preview

    decoded_cap, max_columns = 64 << 20, 1000  # preview.DECODED_CAP, MAX_COLUMNS

    # One 8 MiB value in a dictionary page, repeated by 40 rows: a few KiB on disk, 320 MiB decoded
    # (a 1 KiB file of 20 x 20 MiB took 1.6 GB of memory to preview).
    big = pa.DictionaryArray.from_arrays(pa.array([0] * 40, pa.int32()), pa.array([b"\0" * (8 << 20)], pa.binary()))
    buf = io.BytesIO()
    pq.write_table(pa.table({"c": big}), buf, compression="zstd")
    assert buf.tell() < 64 * 1024
    buf.seek(0)
    got = parquet_preview(buf, 100)
    assert got["truncated"] and got["num_rows"] == 40
    assert 1 <= len(got["rows"]) <= decoded_cap // (8 << 20) + 1
    assert len(got["rows"][0][0]) == 1001  # the cell shown cut
    # A wide file: the preview shows and reads the first MAX_COLUMNS columns and says how many there are.
    wide = io.BytesIO()
    pq.write_table(pa.table({f"c{i}": [i] for i in range(max_columns + 200)}), wide)
    wide.seek(0)
    got = parquet_preview(wide, 10)
    assert len(got["schema"]) == max_columns and got["columns"] == max_columns + 200 and got["rows"] == [list(range(max_columns))]
    # A normal file previews as before.
    plain = io.BytesIO()
    pq.write_table(pa.table({"a": list(range(300)), "b": [str(i) for i in range(300)]}), plain, row_group_size=128)
    plain.seek(0)
    got = parquet_preview(plain, 100)
    assert got["rows"][99] == [99, "99"] and len(got["rows"]) == 100 and got["truncated"]


_PREVIEW_IN_A_PROCESS = """
import json, sys
import pyarrow.parquet
from lakemount.api.operations.preview import parquet_preview
def peak():  # VmHWM, not ru_maxrss: Linux carries the forking process's peak over into ru_maxrss across exec
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
before = peak()
with open(sys.argv[1], "rb") as f:
    got = parquet_preview(f, 100, *map(int, sys.argv[2:]))
print(json.dumps({"grown": peak() - before, "rows": len(got["rows"]), "message": got.get("message", ""), "truncated": got["truncated"]}))
"""


def _preview_in_a_process(path: Path, *page_cap: int) -> dict[str, object]:
    """``parquet_preview`` of ``path`` in a fresh interpreter: what it answered and how much its peak memory grew."""
    import subprocess
    import sys

    root = str(Path(__file__).resolve().parents[2])
    done = subprocess.run([sys.executable, "-c", _PREVIEW_IN_A_PROCESS, str(path), *map(str, page_cap)],
                          capture_output=True, text=True, timeout=300, env={"PYTHONPATH": root, "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_a_parquet_page_bomb_is_not_decoded(tmp_path: Path) -> None:
    # One page that decodes to 512 MiB, in a file of 16 KiB: pyarrow decompresses a page whole before its
    # first value, and previewing it took 2.7 GB (a 1 GiB page, 5.3 GB).  The page header is read first now.
    from tests.api.parquet_bombs import write_bomb

    one_value, many_rows = tmp_path / "one.parquet", tmp_path / "many.parquet"
    assert write_bomb(one_value, 1, 512 << 20) < 64 * 1024
    assert write_bomb(many_rows, 512 << 10, 1020) < 64 * 1024
    for bomb in (one_value, many_rows):
        got = _preview_in_a_process(bomb)
        assert got["grown"] < 64 << 20, got  # (no page of 64 MiB, the limit, is allocated either)
        assert got["rows"] == 0 and got["truncated"]
        assert "api.preview.max_page_bytes (67108864)" in str(got["message"]) and "column v has a page of" in str(got["message"])
    # The same kind of file with pages under the limit previews its rows; a limit set lower stops it.
    fine = tmp_path / "fine.parquet"
    write_bomb(fine, 1000, 1000)
    got = _preview_in_a_process(fine)
    assert got["rows"] == 100 and got["message"] == ""
    got = _preview_in_a_process(fine, 1000)
    assert got["rows"] == 0 and "more than api.preview.max_page_bytes (1000)" in str(got["message"])


def test_a_parquet_preview_stops_before_the_row_group_with_the_bomb(tmp_path: Path) -> None:
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from lakemount.api.operations.preview import parquet_preview

    # Row groups of 10 rows; the third holds one value of 300 KiB, and the limit is 256 KiB.
    values = [b"x"] * 20 + [b"y" * (300 << 10)] + [b"z"] * 9
    buf = io.BytesIO()
    pq.write_table(pa.table({"n": list(range(30)), "v": values}), buf, row_group_size=10, compression="zstd")
    buf.seek(0)
    got = parquet_preview(buf, 100, 256 << 10)
    assert [r[0] for r in got["rows"]] == list(range(20)) and got["truncated"]
    assert "column v has a page of" in got["message"] and "(262144)" in got["message"]
    buf.seek(0)
    got = parquet_preview(buf, 15, 256 << 10)  # the rows asked for lie before it: nothing said
    assert [r[0] for r in got["rows"]] == list(range(15)) and "message" not in got
    # A nested (repeated) column: every page of the group is checked, the rows shown are right.
    nested = io.BytesIO()
    pq.write_table(pa.table({"l": [[i, i + 1] for i in range(50)], "s": [{"a": i} for i in range(50)]}), nested)
    nested.seek(0)
    got = parquet_preview(nested, 5, 256 << 10)
    assert got["rows"][4] == ["[4, 5]", "{'a': 4}"] and "message" not in got


def test_a_parquet_preview_does_not_read_a_column_chunk_whole(tmp_path: Path) -> None:
    # pyarrow pre-buffers every column chunk of a row group before its first page: a 160 MB chunk of
    # 2 MB pages held 160 MB to show 100 rows.
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "wide_chunk.parquet"
    rows = 160_000
    pq.write_table(pa.table({"v": pa.array([os.urandom(1000) for _ in range(rows)])}), path, compression="none",
                   row_group_size=rows, use_dictionary=False)
    assert pq.ParquetFile(path).metadata.row_group(0).total_byte_size > 150 << 20
    got = _preview_in_a_process(path)
    assert got["rows"] == 100 and got["message"] == ""
    assert got["grown"] < 64 << 20, got


def test_a_csv_preview_with_a_huge_field_is_text_not_a_500(tmp_path: Path) -> None:
    service, auth = _in_process(tmp_path)
    service.app.catalog.create_repository("wide")
    service.app.catalog.put("wide", "main", "w.csv", b'a,b\n1,"' + b"x" * 200_000 + b'"\n')
    resp = service.handle(Request("GET", "/api/v1/repositories/wide/refs/main/objects/preview", "path=w.csv", (auth,), BytesBody()))
    assert resp.status == 200 and json.loads(resp.body)["kind"] == "text"  # type: ignore[arg-type]


def test_integers_beyond_the_database_are_400_not_500(tmp_path: Path) -> None:
    # after=10**30 reached SQLite: OverflowError, a 500.
    service, auth = _in_process(tmp_path)
    service.app.catalog.create_repository("evx")
    url = "/api/v1/repositories/evx/events"
    for query, headers in ((f"after={10**30}", (auth,)), ("", (auth, ("last-event-id", str(10**30))))):
        resp = service.handle(Request("GET", url, query, headers, BytesBody()))
        assert resp.status == 400, resp.body
    assert service.handle(Request("GET", url, f"after={(1 << 63) - 1}", (auth,), BytesBody())).status == 200
