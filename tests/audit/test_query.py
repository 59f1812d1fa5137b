"""Asking the audit table: newest first, a page after a cursor in either order, a time window, several operations
or a kind (every write), through the table, the API and ``lakemount audit``; the first newest page reads the last
hours only."""

from __future__ import annotations

import json
import time

from lakemount.audit import operations
from lakemount.audit.record import AuditRecord, cursor, row
from lakemount.audit.table import Filter, files, query, write
from lakemount.block.memory import MemoryAdapter

from .conftest import Lake
from .test_frontends import api

NS = "mem://q/ns"
REPO = "aqry"
HOUR = 3600.0
# Three hours of records, two files an hour (two processes), as a day's work leaves them: the oldest first.
START = (time.time() // HOUR - 5) * HOUR
OPS = ["GetObject", "CompleteMultipartUpload", "updateTable", "linkPhysicalAddress", "read", "commit"]


def _records() -> list[AuditRecord]:
    out = []
    for i in range(36):
        at = START + (i // 12) * HOUR + (i % 12) * 60 + 0.5
        out.append(AuditRecord(at, i, "u", "s3", "", REPO, "main", "", f"p/{i:02d}", OPS[i % len(OPS)], 0, 200,
                               pid=100 + i % 2, host="h"))
    return out


class CountingAdapter(MemoryAdapter):
    """Counts the objects read."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    def get(self, url: str) -> bytes:
        self.reads.append(url)
        return super().get(url)


def _table() -> tuple[CountingAdapter, list[AuditRecord]]:
    adapter = CountingAdapter()
    recs = _records()
    for pid in (100, 101):
        write(adapter, NS, f"h-{pid}-1.parquet", [row(r) for r in recs if r.pid == pid])
    assert len(files(adapter, NS)) == 6
    return adapter, recs


def test_newest_first_reads_the_last_hour_only_for_its_first_page() -> None:
    adapter, recs = _table()
    newest = query(adapter, NS, Filter(), newest_first=True)
    first = [next(newest) for _ in range(5)]
    assert [r.path for r in first] == ["p/35", "p/34", "p/33", "p/32", "p/31"]
    assert len(adapter.reads) == 2 and all("hour=" in u for u in adapter.reads), adapter.reads  # one hour's two files
    assert [r.path for r in query(adapter, NS, Filter(), newest_first=True)] == [f"p/{i:02d}" for i in range(35, -1, -1)]
    assert [r.path for r in query(adapter, NS, Filter())] == [f"p/{i:02d}" for i in range(36)]


def test_a_page_after_a_cursor_continues_in_its_order_and_starts_at_the_cursors_hour() -> None:
    adapter, recs = _table()
    mark = recs[20]  # the middle hour
    adapter.reads.clear()
    older = list(query(adapter, NS, Filter(), newest_first=True, after=cursor(mark)))
    assert [r.path for r in older] == [f"p/{i:02d}" for i in range(19, -1, -1)]
    assert len(adapter.reads) == 4, adapter.reads  # the cursor's hour and the one before: the newest hour is not read
    newer = list(query(adapter, NS, Filter(), after=cursor(mark)))
    assert [r.path for r in newer] == [f"p/{i:02d}" for i in range(21, 36)]


def test_a_time_window_and_several_operations() -> None:
    adapter, recs = _table()
    window = Filter(since=START + HOUR, until=START + 2 * HOUR - 1)
    assert [r.path for r in query(adapter, NS, window, newest_first=True)] == [f"p/{i:02d}" for i in range(23, 11, -1)]
    writes = Filter(ops=operations.names(kind="write"))
    got = {r.op for r in query(adapter, NS, writes)}
    assert got == {"CompleteMultipartUpload", "updateTable", "linkPhysicalAddress", "commit"}
    assert [r.op for r in query(adapter, NS, Filter(ops=frozenset({"read", "GetObject"})))] == ["GetObject", "read"] * 6


def test_the_api_pages_newest_first_by_cursor_with_a_window_and_a_kind(lake: Lake) -> None:
    cat = lake.app.catalog
    cat.create_repository(REPO)
    recs = [AuditRecord(r.time, r.seq, r.user, r.frontend, r.client, r.repo, r.ref, r.commit, r.path, r.op, r.bytes,
                        r.status, pid=r.pid, host=r.host) for r in _records()]
    write(lake.app.adapter, cat.repository(REPO).storage_namespace, "h-1-1.parquet", [row(r) for r in recs])

    def ask(query: str) -> dict:  # type: ignore[type-arg]
        status, body = api(lake, "GET", f"/repositories/{REPO}/audit", query)
        assert status == 200, body
        return json.loads(body)  # type: ignore[no-any-return]

    first = ask("order=desc&amount=10")
    assert [r["path"] for r in first["results"]] == [f"p/{i:02d}" for i in range(35, 25, -1)]
    assert first["pagination"]["has_more"]
    second = ask(f"order=desc&amount=10&after={first['pagination']['next_offset']}")
    assert [r["path"] for r in second["results"]] == [f"p/{i:02d}" for i in range(25, 15, -1)]
    window = ask(f"order=desc&since={int(START + HOUR)}&until={int(START + 2 * HOUR - 1)}&kind=write")
    assert [r["op"] for r in window["results"]] == ["commit", "linkPhysicalAddress", "updateTable",
                                                    "CompleteMultipartUpload"] * 2
    both = ask("op=read&op=commit&kind=write")  # with a kind, only the named operations of that kind
    assert {r["op"] for r in both["results"]} == {"commit"}
    assert api(lake, "GET", f"/repositories/{REPO}/audit", "order=sideways")[0] == 400
    assert api(lake, "GET", f"/repositories/{REPO}/audit", "kind=everything")[0] == 400
    listed = json.loads(api(lake, "GET", f"/repositories/{REPO}/audit/operations")[1])["results"]
    assert [o["name"] for o in listed] == [o.name for o in operations.OPERATIONS]
    assert {o["name"] for o in listed if o["kind"] == "write"} >= {"CompleteMultipartUpload", "linkPhysicalAddress",
                                                                    "updateTable", "DeleteObjects", "commit", "merge"}


def test_the_api_filters_by_the_ref_as_asked(lake: Lake) -> None:
    """Issue 38 item 2's ``lakefs://REPO/REF`` through the API (what ``lakemount audit --server`` asks): ``ref=``."""
    cat = lake.app.catalog
    cat.create_repository(REPO)
    recs = [AuditRecord(START + i, i, "u", "s3", "", REPO, ref, "", f"p/{i}", "PutObject", 0, 200, host="h")
            for i, ref in enumerate(["main", "dev", "main", "dev~1", "dev"])]
    write(lake.app.adapter, cat.repository(REPO).storage_namespace, "h-1-1.parquet", [row(r) for r in recs])
    status, body = api(lake, "GET", f"/repositories/{REPO}/audit", "ref=dev")
    assert status == 200, body
    assert [(r["ref"], r["path"]) for r in json.loads(body)["results"]] == [("dev", "p/1"), ("dev", "p/4")]
    assert [r.path for r in query(lake.app.adapter, cat.repository(REPO).storage_namespace, Filter(ref="main"))] == [
        "p/0", "p/2"]
