"""The audit page after a day's work (issue 38 item 3), in a real browser: newest first with older pages after it,
a time range and an operation filter whose choices are what the trail records (every write at once, a multipart
completion among them), one line per record at 1,280 px, and links from an Iceberg table's and an object's page
to their history.

The records are written into the repositories' audit tables as the servers' flushes write them (Parquet files
partitioned by hour), three hours of them, so the pages are known in advance; nothing else touches the first
repository (creating one records nothing), so its trail is exactly these records.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import requests
from playwright.sync_api import expect

from lakemount.audit import operations
from lakemount.audit.operations import VERSIONING
from lakemount.audit.record import AuditRecord, cursor, row
from lakemount.audit.table import PREFIX, encode, partition
from lakemount.table_pointers import TABLE_POINTER
from tests.api.conftest import Served
from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET
from tests.ui.test_browser import login

CORE_JS = Path(__file__).resolve().parents[2] / "lakemount" / "ui" / "static" / "core.js"
OPS = ["GetObject", "CompleteMultipartUpload", "CopyObject", "linkPhysicalAddress", "updateTable", "DeleteObjects",
       "commit", "merge", "revert", "read", "statObject", "write", "commitTransaction"]
USER = "a-rather-long-user-name-of-an-auditor@example.com"
N = 250
STEP = 40.0  # seconds between records: 250 of them span ~2.8 hours, ending two minutes ago


def _store(served: Served, repo: str, records: list[AuditRecord]) -> None:
    """``records`` in ``repo``'s audit table, one file per hour as a flush leaves them."""
    root = served.home / "data" / "ns" / repo / PREFIX
    by_hour: dict[str, list[AuditRecord]] = {}
    for r in records:
        by_hour.setdefault(partition(r.time), []).append(r)
    for hour, group in by_hour.items():
        (root / hour).mkdir(parents=True, exist_ok=True)
        (root / hour / "testhost-1-1.parquet").write_bytes(encode([row(r) for r in group]))


def _record(repo: str, i: int, at: float, op: str, path: str) -> AuditRecord:
    front = operations.BY_NAME[op].frontend
    return AuditRecord(at, i, USER, "api" if front == VERSIONING else front, "198.51.100.23:51234", repo,
                       "feature-branch-with-a-long-name", f"{i:064x}", path, op, 12345 * i, 200,
                       pid=1, host="testhost")


def _minute(at: float) -> str:
    """``at`` as a datetime-local field's value (UTC, to the minute)."""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M")


class Trail:
    """Two repositories: ``quiet`` holds only the written records; ``busy`` has a table and an object too."""

    def __init__(self, served: Served) -> None:
        self.served = served
        self.quiet = served.repo(prefix="audq").id
        # Whole seconds: a record's id spells its time in microseconds, as the table stores it (a time between two
        # microseconds would come back as the nearer one, and an id computed here from the unrounded time differ).
        start = int(time.time()) - 120 - N * STEP
        self.records = [_record(self.quiet, i, start + i * STEP, OPS[i % len(OPS)],
                                f"datasets/region=eu-west-1/year=2026/month=11/part-{i:05d}-{'x' * 40}.parquet")
                        for i in range(N)]
        _store(served, self.quiet, self.records)
        busy = served.repo(prefix="audb")
        self.busy = busy.id
        main = busy.branch("main")
        main.object("db/events/" + TABLE_POINTER).upload(b'{"metadata-location": "s3://x/y.metadata.json"}')
        main.object("db/events/data/f.parquet").upload(b"PAR1")
        main.object("d/plain.csv").upload(b"a,b\n")
        now = int(time.time()) - 60
        self.table_commits = [_record(self.busy, i, now - 600 + i, "updateTable", "db/events/") for i in range(5)]
        self.object_reads = [_record(self.busy, 10 + i, now - 300 + i, "GetObject", "d/plain.csv") for i in range(3)]
        elsewhere = [_record(self.busy, 20 + i, now - 200 + i, "PutObject", "other/x.csv") for i in range(4)]
        _store(served, self.busy, self.table_commits + self.object_reads + elsewhere)

    def newest_first(self) -> list[str]:
        return [cursor(r) for r in sorted(self.records, key=cursor, reverse=True)]


@pytest.fixture(scope="module")
def trail(served: Served) -> Trail:
    return Trail(served)


def _page(served: Served, browser: Any) -> Any:
    page = browser.new_page()
    page.set_viewport_size({"width": 1280, "height": 800})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.errors = errors
    login(page, served.api, ADMIN_KEY, ADMIN_SECRET)
    return page


def _ids(page: Any, table: str = "#audit") -> list[str]:
    return list(page.locator(f"{table} tr.audit").evaluate_all("rows => rows.map(r => r.dataset.id)"))


def _first_row_is(page: Any, record_id: str) -> None:
    expect(page.locator("#audit tr.audit").first).to_have_attribute("data-id", record_id)


def test_newest_first_then_older_pages_one_line_per_record_at_1280_px(served: Served, browser: Any, trail: Trail) -> None:
    page = _page(served, browser)
    want = trail.newest_first()
    page.goto(f"{served.api}/#/r/{trail.quiet}/audit")
    _first_row_is(page, want[0])  # the last record written is the first one shown
    assert _ids(page) == want[:100]
    # One line per record: every row as high as a single line of text (a wrapped cell doubles it), and
    # nothing wider than the window.
    measured = page.evaluate("""() => {
      const cell = document.querySelector("#audit td");
      const line = parseFloat(getComputedStyle(cell).lineHeight);
      return {line, rows: [...document.querySelectorAll("#audit tr")].map(r => r.getBoundingClientRect().height),
              cells: [...document.querySelectorAll("#audit tr.audit td")].filter(td => td.scrollHeight > td.clientHeight + 1).length,
              width: document.documentElement.scrollWidth, table: document.querySelector("#audit").getBoundingClientRect().right};
    }""")
    assert len(measured["rows"]) == 101
    assert max(measured["rows"]) < 2 * measured["line"], measured["rows"][:5]
    assert measured["cells"] == 0
    assert measured["width"] <= 1280 and measured["table"] <= 1280, measured
    # A cut cell keeps its whole text as its tooltip.
    path_cell = page.locator("#audit tr.audit td.path").first
    assert path_cell.get_attribute("title") == trail.records[-1].path
    # Older pages follow, down to the first record.
    seen = _ids(page)
    while page.locator(".pager a.next").count():
        last = seen[-1]
        page.click(".pager a.next")
        _first_row_is(page, want[len(seen)])
        seen += _ids(page)
        assert seen[-1] < last
    assert seen == want
    page.click(".pager a.prev")  # and back towards the newest
    _first_row_is(page, want[100])
    assert page.errors == []


def test_a_time_range_and_an_operation_filter_from_the_trails_own_list(served: Served, browser: Any, trail: Trail) -> None:
    page = _page(served, browser)
    page.goto(f"{served.api}/#/r/{trail.quiet}/audit")
    expect(page.locator("#audit tr.audit")).to_have_count(100)
    # The choices are the operations the trail records (lakemount/audit/operations.py, served by the API).
    listed = requests.get(f"{served.api}/api/v1/repositories/{trail.quiet}/audit/operations",
                          auth=(ADMIN_KEY, ADMIN_SECRET), timeout=30).json()["results"]
    assert [o["name"] for o in listed] == [o.name for o in operations.OPERATIONS]
    values = page.locator("#audit-op option").evaluate_all("os => os.map(o => o.value)")
    assert set(values) == {"", "kind:write", "kind:read", "kind:other"} | set(operations.BY_NAME)
    # Every write in half an hour of the middle hour.
    t0 = trail.records[0].time + 3600
    begin, end = _minute(t0), _minute(t0 + 1800)
    since = datetime.strptime(begin, "%Y-%m-%dT%H:%M").replace(tzinfo=UTC).timestamp()
    until = datetime.strptime(end, "%Y-%m-%dT%H:%M").replace(tzinfo=UTC).timestamp() + 59
    writes = operations.names(kind="write")
    want = [cursor(r) for r in sorted(trail.records, key=cursor, reverse=True)
            if r.op in writes and since <= r.time <= until]
    assert 10 < len(want) < 100 and {"CompleteMultipartUpload", "updateTable", "commit"} <= {
        r.op for r in trail.records if cursor(r) in want}
    page.select_option("#audit-op", "kind:write")
    page.fill("#audit-from", begin)
    page.fill("#audit-to", end)
    page.click("#audit-filter button[type=submit]")
    page.wait_for_url(re.compile(r".*from=.*to=.*"))
    _first_row_is(page, want[0])
    expect(page.locator("#audit tr.audit")).to_have_count(len(want))
    assert _ids(page) == want
    # The fields keep what was asked; one operation (a multipart completion) in the same range.
    expect(page.locator("#audit-from")).to_have_value(begin)
    expect(page.locator("#audit-op")).to_have_value("kind:write")
    page.select_option("#audit-op", "CompleteMultipartUpload")
    page.click("#audit-filter button[type=submit]")
    page.wait_for_url(re.compile(r".*op=CompleteMultipartUpload.*"))
    completions = [i for i in want if i in {cursor(r) for r in trail.records if r.op == "CompleteMultipartUpload"}]
    assert completions
    expect(page.locator("#audit tr.audit")).to_have_count(len(completions))
    assert set(page.locator("#audit tr.audit td.op").all_inner_texts()) == {"CompleteMultipartUpload"}
    assert page.errors == []


def test_a_table_page_and_an_object_page_link_to_their_audit_history(served: Served, browser: Any, trail: Trail) -> None:
    assert f'const TABLE_POINTER = "{TABLE_POINTER}"' in CORE_JS.read_text()  # the UI knows a table as the server does
    page = _page(served, browser)
    page.goto(f"{served.api}/#/r/{trail.busy}/tree/main/db/events/")
    expect(page.locator("#table-info")).to_contain_text("db.events")
    page.click("#table-audit")
    page.wait_for_url(re.compile(r".*/audit\?path=db%2Fevents%2F$"))
    expect(page.locator("#audit-path")).to_have_value("db/events/")
    expect(page.locator("#audit tr.audit td.op", has_text="updateTable")).to_have_count(5)
    paths = page.locator("#audit tr.audit td.path").all_inner_texts()
    assert all(p.startswith("db/events/") for p in paths), paths
    # A directory that is no table has no such link.
    page.goto(f"{served.api}/#/r/{trail.busy}/tree/main/d/")
    expect(page.locator("#listing")).to_be_visible()
    assert page.locator("#table-audit").count() == 0
    page.goto(f"{served.api}/#/r/{trail.busy}/object/main?path=d%2Fplain.csv")
    expect(page.locator("#who-touched-table tr.audit td.op", has_text="GetObject")).to_have_count(3)
    page.click("#object-audit")
    page.wait_for_url(re.compile(r".*/audit\?path=d%2Fplain.csv$"))
    expect(page.locator("#audit tr.audit td.op", has_text="GetObject")).to_have_count(3)
    paths = page.locator("#audit tr.audit td.path").all_inner_texts()
    assert set(paths) == {"d/plain.csv"}, paths
    assert page.errors == []


def test_the_ref_filter_keeps_that_refs_records(served: Served, browser: Any, trail: Trail) -> None:
    """The audit page asks by ref as ``lakemount audit lakefs://REPO/REF`` and ``getAuditLog?ref=`` do."""
    page = _page(served, browser)
    page.goto(f"{served.api}/#/r/{trail.quiet}/audit")
    expect(page.locator("#audit tr.audit")).to_have_count(100)
    page.fill("#audit-ref", "main")  # every record of this trail is on the feature branch
    page.click("#audit-filter button[type=submit]")
    page.wait_for_url(re.compile(r".*/audit\?ref=main$"))
    expect(page.locator("#audit-empty")).to_be_visible()
    expect(page.locator("#audit tr.audit")).to_have_count(0)
    branch = trail.records[0].ref
    page.fill("#audit-ref", branch)
    page.fill("#audit-path", trail.records[-1].path)
    page.click("#audit-filter button[type=submit]")
    page.wait_for_url(re.compile(rf".*/audit\?ref={branch}&path=.*"))
    _first_row_is(page, cursor(trail.records[-1]))
    expect(page.locator("#audit tr.audit")).to_have_count(1)
    expect(page.locator("#audit-ref")).to_have_value(branch)
    assert page.errors == []
