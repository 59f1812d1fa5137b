"""The web UI's Iceberg tables (issue 37), in a real browser: tables made by an unmodified pyiceberg through the
catalog (a v2 table partitioned by a column, a v1 one, a v3 one with a default value) appear on the ref's tables
page by namespace; a table's page shows its schema, partition spec, snapshots and first rows; the object
browser's table directory links to it; and after the table changes on a branch (a column and rows), compare
shows the snapshot added, the schema change and the row diff."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from playwright.sync_api import expect

pytest.importorskip("pyiceberg")

from pyiceberg.partitioning import PartitionField, PartitionSpec  # noqa: E402
from pyiceberg.schema import Schema  # noqa: E402
from pyiceberg.transforms import IdentityTransform  # noqa: E402
from pyiceberg.types import LongType, NestedField, StringType  # noqa: E402

from tests.api.conftest import Served  # noqa: E402
from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET  # noqa: E402
from tests.iceberg.conftest import iceberg_catalog  # noqa: E402
from tests.ui.test_browser import login, shot  # noqa: E402

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "region", StringType(), required=False))


def batch(ids: list[int], **extra: Any) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "region": ["eu" if i % 2 else "us" for i in ids], **extra})


def _page(served: Served, browser: Any) -> Any:
    page = browser.new_page()
    page.set_viewport_size({"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.errors = errors
    login(page, served.api, ADMIN_KEY, ADMIN_SECRET)
    return page


def _cells(page: Any, selector: str) -> list[list[str]]:
    return list(page.locator(selector).evaluate_all("rows => rows.map(r => [...r.cells].map(c => c.textContent))"))


def test_tables_page_table_page_and_compare_of_a_changed_table(served: Served, browser: Any) -> None:
    repo = served.repo(prefix="uitab")
    rid = repo.id
    cat = iceberg_catalog(served)
    cat.create_namespace((rid, "main", "sales"))
    events = cat.create_table((rid, "main", "sales", "orders"), schema=SCHEMA,
                              partition_spec=PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "region")))
    events.append(batch([1, 2, 3]))
    events.append(batch([4]))
    legacy = cat.create_table((rid, "main", "sales", "legacy"), schema=SCHEMA, properties={"format-version": "1"})
    legacy.append(batch([7]))
    v3 = cat.create_table((rid, "main", "sales", "scores"), schema=SCHEMA, properties={"format-version": "3"})
    with v3.update_schema() as update:
        update.add_column("points", LongType(), required=True, default_value=7)
    repo.branch("main").commit(message="three tables")
    snaps = [s.snapshot_id for s in cat.load_table((rid, "main", "sales", "orders")).snapshots()]

    page = _page(served, browser)
    # The ref's tables, by namespace, each with its format version and a link to its page.
    page.goto(f"{served.api}/#/r/{rid}/tables/main")
    expect(page.locator("section.namespace[data-namespace=sales] tr.iceberg-table")).to_have_count(3)
    assert _cells(page, "tr.iceberg-table") == [
        ["legacy", "v1", "1", page.locator("tr.iceberg-table time").nth(0).text_content(), "sales/legacy/"],
        ["orders", "v2", "2", page.locator("tr.iceberg-table time").nth(1).text_content(), "sales/orders/"],
        ["scores", "v3", "0", page.locator("tr.iceberg-table time").nth(2).text_content(), "sales/scores/"]]
    # The object browser's table directory links to the table's page.
    page.goto(f"{served.api}/#/r/{rid}/tree/main/sales/orders/")
    page.click("#table-page")
    expect(page.locator("#table-name")).to_contain_text("sales.orders")
    assert _cells(page, "#table-schema tr.field") == [["1", "id", "long", "optional", "", "", ""],
                                                      ["2", "region", "string", "optional", "", "", ""]]
    assert _cells(page, "#table-spec tr.partition-field") == [["region", "identity", "region"]]
    assert page.locator("#table-snapshots tr.snapshot").evaluate_all("rs => rs.map(r => r.dataset.id)") == [
        str(s) for s in reversed(snaps)]
    assert [r[2:6] + r[7:] for r in _cells(page, "#table-snapshots tr.snapshot")] == [
        ["append", "1", "", "1", "4"], ["append", "2", "", "3", "3"]]  # the first append's 3 rows, 2 partitions
    expect(page.locator("#table-preview tr")).to_have_count(5)  # a header and four rows
    expect(page.locator("#table-rows > p").first).to_have_text("first 4 of 4 rows, from 3 data files")
    assert page.locator("#table-rows").evaluate("b => [...b.childNodes].filter(n => n.nodeType === 3).length") == 0  # no stray "null"
    assert sorted(_cells(page, "#table-preview tr")[1:]) == [["1", "eu"], ["2", "us"], ["3", "eu"], ["4", "us"]]
    shot(page, "20-iceberg-table")
    # A version 1 table, from its row on the tables page: its snapshot and its row.
    page.goto(f"{served.api}/#/r/{rid}/tables/main")
    page.click("tr.iceberg-table[data-path='sales/legacy/'] td:first-child a")
    expect(page.locator("#table-name")).to_contain_text("format v1")
    expect(page.locator("#table-snapshots tr.snapshot")).to_have_count(1)
    expect(page.locator("#table-preview tr")).to_have_count(2)
    assert _cells(page, "#table-preview tr")[1] == ["7", "eu"]
    # A v3 table shows its column's defaults; it has no snapshot, so no rows.
    page.goto(f"{served.api}/#/r/{rid}/table/main?path=sales/scores/")
    expect(page.locator("#table-schema tr.field")).to_have_count(3)
    assert _cells(page, "#table-schema tr.field")[2] == ["3", "points", "long", "required", "7", "7", ""]
    expect(page.locator("#table-snapshots")).to_contain_text("No snapshot yet")
    # A path that is no table says so on the page.
    page.goto(f"{served.api}/#/r/{rid}/table/main?path=sales/nothing")
    expect(page.locator("#page-error")).to_contain_text("no Iceberg table at sales/nothing/")

    # On a branch: a column added, a row appended; compare shows the snapshot, the schema change and the rows.
    repo.branch("feat").create(source_reference="main")
    orders = cat.load_table((rid, "feat", "sales", "orders"))
    with orders.update_schema() as update:
        update.add_column("qty", LongType())
    orders.append(batch([5], qty=pa.array([50], pa.int64())))
    added = cat.load_table((rid, "feat", "sales", "orders")).current_snapshot()
    assert added is not None
    repo.branch("feat").commit(message="orders: qty")
    page.goto(f"{served.api}/#/r/{rid}/compare/main/feat")
    change = page.locator("#iceberg-compare section.iceberg-change[data-path='sales/orders/']")
    expect(change).to_have_count(1)
    expect(page.locator("#iceberg-compare section.iceberg-change")).to_have_count(1)  # the other tables did not change
    expect(change.locator("h4")).to_contain_text("changed")
    assert change.locator("table.snapshots-added tr.snapshot").evaluate_all("rs => rs.map(r => r.dataset.id)") == [str(added.snapshot_id)]
    expect(change.locator("ul.iceberg-schema-changes li")).to_have_text(["column added: qty long"])
    change.locator("button.row-diff-toggle").click()
    diff = change.locator(".table-diff")
    expect(diff.locator(".table-counts")).to_contain_text("1 added")
    expect(diff.locator("ul.schema-changes li")).to_have_text(["column added: qty int64"])
    assert _cells(page, "#iceberg-compare .table-diff tr.row-added") == [["+", "5", "eu", "50"]]
    # Matched by key: the same one row added, none changed.
    diff.locator("select.key-pick").select_option("id")
    expect(change.locator(".table-diff[data-key=id] .table-counts")).to_contain_text("0 changed")
    shot(page, "21-iceberg-compare")
    assert page.errors == []
