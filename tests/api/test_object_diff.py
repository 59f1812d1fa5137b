"""The content diff and blame operations (issue 28), in process: text diffs unified and side by side, table
diffs of CSV and Parquet by key and by whole row (schema changes, counts, pages), images' two URLs, the
blame of a page of paths, and a one-line 400 for each kind of bad input."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakemount.api.operations import object_diff
from tests.ui.test_units import BASIC, Svc

AUTH = {"authorization": BASIC}
REPO = "odiff"


def call(svc: Svc, method: str, path: str, query: dict[str, Any] | list[tuple[str, str]] | None = None,
         body: Any = None) -> tuple[int, Any]:
    headers = dict(AUTH)
    raw = b""
    if body is not None:
        raw = json.dumps(body).encode()
        headers["content-type"] = "application/json"
    status, _, data = svc.call(method, f"/api/v1/repositories/{REPO}{path}", urlencode(query or {}, doseq=True), raw, headers)
    return status, json.loads(data) if data else None


def parquet(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> Svc:
    s = Svc(tmp_path_factory.mktemp("od") / "home")
    cat = s.app.catalog
    cat.create_repository(REPO)
    cat.put(REPO, "main", "notes.txt", b"one\ntwo\nthree\nfour\nfive\nsix\nseven\n")
    cat.put(REPO, "main", "t.csv", b"id,name,qty\n1,apple,3\n2,pear,5\n3,plum,7\n")
    cat.put(REPO, "main", "dup.csv", b"a,b\nx,1\nx,1\ny,2\n")
    cat.put(REPO, "main", "t.parquet", parquet(pa.table({"id": [1, 2, 3], "v": [1, 2, 3], "gone": ["a", "b", "c"]})))
    cat.put(REPO, "main", "pic.png", b"\x89PNG\r\n\x1a\nleft")
    cat.put(REPO, "main", "blob.bin", b"\x00\x01\x02")
    cat.commit(REPO, "main", "base", committer="alice")
    cat.create_branch(REPO, "dev", "main")
    cat.put(REPO, "dev", "notes.txt", b"one\ntwo\nTHREE\nfour\nfive\nsix\nseven\neight\n")
    cat.put(REPO, "dev", "t.csv", b"id,name,qty\n1,apple,3\n2,pear,6\n4,fig,1\n")
    cat.put(REPO, "dev", "dup.csv", b"a,b\nx,1\ny,2\ny,2\n")
    cat.put(REPO, "dev", "t.parquet", parquet(pa.table({"id": [1, 2, 4], "v": [1.0, 2.5, 4.0], "new": ["p", "q", "r"]})))
    cat.put(REPO, "dev", "pic.png", b"\x89PNG\r\n\x1a\nright")
    cat.put(REPO, "dev", "blob.bin", b"\x00\x01\x03")
    cat.commit(REPO, "dev", "change", committer="bob")
    return s


def test_text_diff_unified_and_side_by_side(svc: Svc) -> None:
    status, u = call(svc, "GET", "/refs/main/diff/dev/object/text", {"path": "notes.txt", "context": 1})
    assert status == 200, u
    assert u["counts"] == {"added": 2, "removed": 1}
    ops = [(line["op"], line["old"], line["new"], line["text"]) for h in u["hunks"] for line in h["lines"]]
    assert ("-", 3, None, "three") in ops and ("+", None, 3, "THREE") in ops and ("+", None, 8, "eight") in ops
    assert (" ", 2, 2, "two") in ops and ("one" not in [t for *_, t in ops])  # one line of context only
    status, s = call(svc, "GET", "/refs/main/diff/dev/object/text", {"path": "notes.txt", "view": "side_by_side"})
    assert status == 200, s
    rows = [r for h in s["hunks"] for r in h["rows"]]
    assert {"op": "replace", "left": {"n": 3, "text": "three"}, "right": {"n": 3, "text": "THREE"}} in rows
    assert {"op": "insert", "left": None, "right": {"n": 8, "text": "eight"}} in rows
    assert s["left"]["exists"] and s["right"]["ref"] == svc.app.catalog.commit_of(REPO, "dev").id


def test_text_diff_refuses_binary_large_and_bad_view(svc: Svc, monkeypatch: pytest.MonkeyPatch) -> None:
    status, e = call(svc, "GET", "/refs/main/diff/dev/object/text", {"path": "blob.bin"})
    assert status == 400 and "binary" in e["message"]
    status, e = call(svc, "GET", "/refs/main/diff/dev/object/text", {"path": "notes.txt", "view": "sideways"})
    assert status == 400 and "view" in e["message"]
    monkeypatch.setattr(object_diff, "TEXT_DIFF_CAP", 10)
    status, e = call(svc, "GET", "/refs/main/diff/dev/object/text", {"path": "notes.txt"})
    assert status == 400 and e["message"].startswith("too large for a text diff"), e
    status, e = call(svc, "GET", "/refs/main/diff/dev/object/text", {"path": "nowhere.txt"})
    assert status == 404


def test_csv_table_diff_by_key(svc: Svc) -> None:
    status, d = call(svc, "GET", "/refs/main/diff/dev/object/table", {"path": "t.csv", "key": "id"})
    assert status == 200, d
    assert d["mode"] == "key" and d["format"] == "csv"
    assert d["counts"] == {"added": 1, "removed": 1, "changed": 1, "unchanged": 1}
    assert d["columns"] == ["id", "name", "qty"]
    assert [(r["type"], r["key"], r["left"], r["right"], r["changed_columns"]) for r in d["results"]] == [
        ("changed", {"id": "2"}, ["2", "pear", "5"], ["2", "pear", "6"], ["qty"]),
        ("removed", {"id": "3"}, ["3", "plum", "7"], None, []),
        ("added", {"id": "4"}, None, ["4", "fig", "1"], []),
    ]
    assert d["schema"] == {"added": [], "dropped": [], "retyped": []}


def test_csv_table_diff_by_whole_row_counts_repeats(svc: Svc) -> None:
    status, d = call(svc, "GET", "/refs/main/diff/dev/object/table", {"path": "dup.csv"})
    assert status == 200, d
    assert d["mode"] == "row_hash"
    assert d["counts"] == {"added": 1, "removed": 1, "changed": 0, "unchanged": 2}
    assert [(r["type"], r["left"], r["right"], r["count"]) for r in d["results"]] == [
        ("added", None, ["y", "2"], 1), ("removed", ["x", "1"], None, 1)]


def test_parquet_table_diff_schema_and_rows_paged(svc: Svc) -> None:
    q = {"path": "t.parquet", "key": "id", "amount": 2}
    status, d = call(svc, "GET", "/refs/main/diff/dev/object/table", q)
    assert status == 200, d
    assert d["schema"] == {"added": [{"name": "new", "type": "string"}], "dropped": [{"name": "gone", "type": "string"}],
                           "retyped": [{"name": "v", "left_type": "int64", "right_type": "double"}]}
    # v 1 -> 1.0 is equal once cast; 2 -> 2.5 changed; id 3 removed, 4 added.
    assert d["counts"] == {"added": 1, "removed": 1, "changed": 1, "unchanged": 1}
    assert d["columns"] == ["id", "v", "new", "gone"]
    assert [r["type"] for r in d["results"]] == ["changed", "removed"]
    assert d["results"][0]["changed_columns"] == ["v"] and d["results"][0]["right"] == [2, 2.5, "q", None]
    assert d["pagination"]["has_more"] and d["pagination"]["next_offset"] == "2"
    status, d2 = call(svc, "GET", "/refs/main/diff/dev/object/table", {**q, "after": "2"})
    assert [r["type"] for r in d2["results"]] == ["added"] and not d2["pagination"]["has_more"]
    assert d2["results"][0]["right"] == [4, 4.0, "r", None]


@pytest.mark.parametrize(("query", "message"), [
    ({"path": "t.csv", "key": "nope"}, "unknown key column 'nope'"),
    ({"path": "notes.txt"}, "not a tabular object"),
    ({"path": "dup.csv", "key": "a"}, "not unique"),
    ({"path": "t.csv", "after": "x"}, "after must be"),
    ({"path": "t.csv", "type": "four_dot"}, "type must be"),
])
def test_table_diff_bad_input_is_a_one_line_400(svc: Svc, query: dict[str, str], message: str) -> None:
    status, e = call(svc, "GET", "/refs/main/diff/dev/object/table", query)
    assert status == 400, e
    assert message in e["message"] and "\n" not in e["message"] and str(svc.app.config.home) not in e["message"]


def test_a_table_that_is_not_one_is_a_400(svc: Svc) -> None:
    cat = svc.app.catalog
    cat.create_branch(REPO, "broken", "main")
    cat.put(REPO, "broken", "t.parquet", b"not parquet at all")
    cat.commit(REPO, "broken", "break")
    status, e = call(svc, "GET", "/refs/main/diff/broken/object/table", {"path": "t.parquet"})
    assert status == 400 and e["message"].startswith("not a readable Parquet file"), e


def test_object_summary_gives_kinds_and_both_image_urls(svc: Svc) -> None:
    status, d = call(svc, "GET", "/refs/main/diff/dev/object", {"path": "pic.png"})
    assert status == 200, d
    assert d["kind"] == "image"
    got = []
    for side in ("left", "right"):
        url = d[side]["url"]
        path, _, query = url.partition("?")
        status, _, body = svc.call("GET", path, query, headers=AUTH)
        assert status == 200
        got.append(body)
    assert got == [b"\x89PNG\r\n\x1a\nleft", b"\x89PNG\r\n\x1a\nright"]
    kinds = {p: call(svc, "GET", "/refs/main/diff/dev/object", {"path": p})[1]["kind"]
             for p in ("notes.txt", "t.csv", "t.parquet", "blob.bin")}
    assert kinds == {"notes.txt": "text", "t.csv": "table", "t.parquet": "table", "blob.bin": "binary"}


def test_three_dot_is_against_the_merge_base_and_uncommitted_against_the_head(svc: Svc) -> None:
    cat = svc.app.catalog
    cat.create_branch(REPO, "side", "main")
    cat.put(REPO, "main", "later.txt", b"main only\n")
    cat.commit(REPO, "main", "main moves on")
    cat.put(REPO, "side", "later.txt", b"side\n")
    cat.commit(REPO, "side", "side adds")
    status, d = call(svc, "GET", "/refs/main/diff/side/object/text", {"path": "later.txt"})
    assert status == 200 and not d["left"]["exists"] and d["counts"] == {"added": 1, "removed": 0}
    status, d = call(svc, "GET", "/refs/main/diff/side/object/text", {"path": "later.txt", "type": "two_dot"})
    assert d["counts"] == {"added": 1, "removed": 1}
    cat.put(REPO, "side", "later.txt", b"side\nstaged\n")
    status, d = call(svc, "GET", "/refs/side/diff/side/object/text", {"path": "later.txt", "type": "uncommitted"})
    assert status == 200, d
    assert d["right"]["ref"] == "side" and d["counts"] == {"added": 1, "removed": 0}
    cat.reset(REPO, "side")


def test_an_added_table_is_all_rows_added(svc: Svc) -> None:
    cat = svc.app.catalog
    cat.create_branch(REPO, "newtab", "main")
    cat.put(REPO, "newtab", "fresh.csv", b"k,v\n1,a\n2,b\n")
    cat.commit(REPO, "newtab", "add a table")
    status, d = call(svc, "GET", "/refs/main/diff/newtab/object/table", {"path": "fresh.csv", "key": "k"})
    assert status == 200, d
    assert d["counts"]["added"] == 2 and not d["left"]["exists"]


# ---- blame ---------------------------------------------------------------------------------------


@pytest.fixture
def history(tmp_path: Path) -> Svc:
    s = Svc(tmp_path / "home")
    cat = s.app.catalog
    cat.create_repository("blm")
    cat.put("blm", "main", "d/a.txt", b"a")
    cat.put("blm", "main", "d/b.txt", b"b")
    cat.put("blm", "main", "d/sub/x.txt", b"x")
    cat.put("blm", "main", "other.txt", b"o")
    cat.commit("blm", "main", "first", committer="alice")
    cat.put("blm", "main", "d/b.txt", b"b2")
    cat.commit("blm", "main", "second", committer="bob")
    cat.put("blm", "main", "d/sub/y.txt", b"y")
    cat.commit("blm", "main", "third", committer="carol")
    cat.put("blm", "main", "other.txt", b"o2")
    cat.commit("blm", "main", "fourth", committer="dave")
    return s


def blame(svc: Svc, ref: str, paths: list[str], **query: Any) -> tuple[int, Any]:
    headers = {**AUTH, "content-type": "application/json"}
    status, _, data = svc.call("POST", f"/api/v1/repositories/blm/refs/{ref}/blame", urlencode(query),
                               json.dumps({"paths": paths}).encode(), headers)
    return status, json.loads(data)


def test_blame_names_the_last_commit_of_each_path_and_prefix(history: Svc) -> None:
    status, d = blame(history, "main", ["d/a.txt", "d/b.txt", "d/sub/", "missing.txt"])
    assert status == 200, d
    got = {r["path"]: (r["commit"] and r["commit"]["message"], r["commit"] and r["commit"]["committer"]) for r in d["results"]}
    assert got == {"d/a.txt": ("first", "alice"), "d/b.txt": ("second", "bob"), "d/sub/": ("third", "carol"),
                   "missing.txt": (None, None)}
    assert [r["path"] for r in d["results"]] == ["d/a.txt", "d/b.txt", "d/sub/", "missing.txt"]
    assert not any(r["beyond_depth"] or r["uncommitted"] for r in d["results"])
    status, old = blame(history, "main~2", ["d/b.txt", "d/sub/"])
    assert [r["commit"]["message"] for r in old["results"]] == ["second", "first"]


def test_blame_depth_and_uncommitted(history: Svc) -> None:
    status, d = blame(history, "main", ["d/a.txt", "other.txt"], depth=2)
    assert status == 200, d
    assert [(r["commit"] and r["commit"]["message"], r["beyond_depth"]) for r in d["results"]] == [
        (None, True), ("fourth", False)]
    history.app.catalog.put("blm", "main", "d/a.txt", b"staged")
    status, d = blame(history, "main", ["d/a.txt", "d/b.txt"])
    assert [(r["commit"]["message"], r["uncommitted"]) for r in d["results"]] == [("first", True), ("second", False)]
    status, d = blame(history, "main@", ["d/a.txt"])
    assert d["results"][0]["uncommitted"] is False  # the committed state has nothing staged


def test_blame_answers_from_its_cache_without_walking(history: Svc, monkeypatch: pytest.MonkeyPatch) -> None:
    cat = history.app.catalog
    walked: list[str] = []
    real = cat.graveler.first_parent_changes

    def counting(repo: Any, commit: Any, start: bytes, stop: bytes | None) -> Any:
        walked.append(commit.message)
        return real(repo, commit, start, stop)

    monkeypatch.setattr(cat.graveler, "first_parent_changes", counting)
    first = blame(history, "main", ["d/a.txt", "d/b.txt"])
    assert walked == ["fourth", "third", "second", "first"]  # the walk happened, first-parent, newest first
    walked.clear()
    again = blame(history, "main", ["d/a.txt", "d/b.txt"])
    assert walked == [] and again == first


def test_blame_bad_input(history: Svc) -> None:
    status, e = blame(history, "main", [f"f{i}" for i in range(1001)])
    assert status == 400 and "at most 1000" in e["message"]
    status, e = blame(history, "main", ["/abs"])
    assert status == 400 and "must not start with '/'" in e["message"]
    status, e = blame(history, "main", ["d/a.txt"], depth=0)
    assert status == 400 and "depth" in e["message"]
    status, e = blame(history, "nope", ["d/a.txt"])
    assert status == 404


def test_blame_after_a_new_commit_walks_only_that_commit(history: Svc, monkeypatch: pytest.MonkeyPatch) -> None:
    cat = history.app.catalog
    blame(history, "main", ["d/a.txt", "d/b.txt", "d/sub/"])  # blamed at the head: cached there
    cat.put("blm", "main", "d/sub/z.txt", b"z")
    cat.commit("blm", "main", "fifth", committer="erin")
    walked: list[str] = []
    real = cat.graveler.first_parent_changes

    def counting(repo: Any, commit: Any, start: bytes, stop: bytes | None) -> Any:
        walked.append(commit.message)
        return real(repo, commit, start, stop)

    monkeypatch.setattr(cat.graveler, "first_parent_changes", counting)
    status, d = blame(history, "main", ["d/a.txt", "d/b.txt", "d/sub/"])
    assert walked == ["fifth"]  # the rest answered from the cache at the commit before
    assert [r["commit"]["message"] for r in d["results"]] == ["first", "second", "fifth"]
