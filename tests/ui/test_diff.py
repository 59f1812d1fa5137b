"""What changed inside the data, in a real browser (issue 28): a text object's diff unified and side by side on the
compare page, a CSV table diff by a picked key and by whole row on a commit page, an image's two versions side by
side, the "last change" of each listing row and of the object page, and a reviewer who reads a Parquet table diff
in a pull request and approves it. What the page shows is checked against what was written."""

from __future__ import annotations

import io
from typing import Any

import requests

from tests.api.conftest import Served
from tests.api.test_http import AUTH
from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET
from tests.ui.test_browser import login, shot


def parquet(columns: dict[str, list[Any]]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.table(columns), buf)
    return buf.getvalue()


def admin_page(served: Served, browser: Any) -> Any:
    page = browser.new_page()
    login(page, served.api, ADMIN_KEY, ADMIN_SECRET)
    return page


def open_diff(page: Any, path: str) -> Any:
    """Click the diff button of ``path``'s row; the opened diff row."""
    page.click(f"#diff tr.change[data-path='{path}'] button.diff-toggle")
    row = page.locator(f"#diff tr.object-diff[data-path='{path}']")
    row.locator(".diff-view").wait_for()
    return row


def test_text_diff_unified_and_side_by_side_on_the_compare_page(served: Served, browser: Any) -> None:
    repo = served.repo(prefix="dt")
    rid = str(repo.id)
    main = repo.branch("main")
    main.object("docs/readme.md").upload(b"# Title\nalpha\nbeta\ngamma\n")
    main.commit(message="readme")
    dev = repo.branch("dev").create(source_reference="main")
    dev.object("docs/readme.md").upload(b"# Title\nalpha\nBETA <b>bold</b>\ngamma\ndelta\n")
    dev.commit(message="edit readme")
    page = admin_page(served, browser)
    try:
        page.goto(f"{served.api}/#/r/{rid}/compare/main/dev")
        page.wait_for_selector("#diff tr.change[data-path='docs/readme.md']")
        row = open_diff(page, "docs/readme.md")
        unified = row.locator(".text-diff[data-view=unified]")
        unified.wait_for()
        assert [t.strip() for t in unified.locator("tr.line-removed td.code").all_inner_texts()] == ["-beta"]
        assert [t.strip() for t in unified.locator("tr.line-added td.code").all_inner_texts()] == ["+BETA <b>bold</b>", "+delta"]
        assert unified.locator("b").count() == 0  # the line is text, not markup
        assert unified.locator(".counts span").all_inner_texts() == ["+2", "−1"]
        shot(page, "40-diff-text-unified")
        row.locator("button.diff-view-pick[data-view=side_by_side]").click()
        split = row.locator(".text-diff[data-view=side_by_side]")
        split.wait_for()
        pair = split.locator("tr.pair.replace")
        assert pair.locator("td.code").all_inner_texts() == ["beta", "BETA <b>bold</b>"]
        assert split.locator("tr.pair.insert td.code").all_inner_texts()[-1] == "delta"
        shot(page, "41-diff-text-side-by-side")
        page.click("#diff tr.change[data-path='docs/readme.md'] button.diff-toggle")  # closes again
        page.wait_for_selector("#diff tr.object-diff", state="detached")
    finally:
        page.close()


def test_csv_table_diff_by_key_and_by_whole_row_on_a_commit_page(served: Served, browser: Any) -> None:
    repo = served.repo(prefix="dc")
    rid = str(repo.id)
    main = repo.branch("main")
    main.object("t/sales.csv").upload(b"id,item,qty\n1,apple,3\n2,pear,5\n3,plum,7\n")
    main.commit(message="sales")
    main.object("t/sales.csv").upload(b"id,item,qty\n1,apple,3\n2,pear,6\n4,fig,1\n")
    commit = main.commit(message="update sales").get_commit().id
    page = admin_page(served, browser)
    try:
        page.goto(f"{served.api}/#/r/{rid}/commit/{commit}")
        page.wait_for_selector("#diff tr.change[data-path='t/sales.csv']")
        row = open_diff(page, "t/sales.csv")
        whole = row.locator(".table-diff[data-mode=row_hash]")
        whole.wait_for()
        # By whole row, pear 5 -> 6 is a row removed and a row added.
        assert whole.locator(".table-counts span").all_inner_texts() == ["2 added", "2 removed", "1 unchanged"]
        row.locator("select.key-pick").select_option("id")
        keyed = row.locator(".table-diff[data-mode=key][data-key=id]")
        keyed.wait_for()
        assert keyed.locator(".table-counts span").all_inner_texts() == ["1 added", "1 removed", "1 changed", "1 unchanged"]
        changed_after = keyed.locator("tr.row-changed.after td")
        assert changed_after.all_inner_texts() == ["2", "pear", "6"]
        assert keyed.locator("tr.row-changed.after td.cell-added").all_inner_texts() == ["6"]
        assert keyed.locator("tr.row-changed.before td.cell-removed").all_inner_texts() == ["5"]
        assert keyed.locator("tr.row-removed td").all_inner_texts()[1:] == ["3", "plum", "7"]
        assert keyed.locator("tr.row-added td").all_inner_texts()[1:] == ["4", "fig", "1"]
        shot(page, "42-diff-csv-by-key")
    finally:
        page.close()


def test_an_image_shows_both_versions_side_by_side(served: Served, browser: Any) -> None:
    import base64

    # Two 1x1 PNGs of different colours.
    red = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")
    blue = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")
    repo = served.repo(prefix="di")
    rid = str(repo.id)
    main = repo.branch("main")
    main.object("img/dot.png").upload(red)
    main.commit(message="red")
    dev = repo.branch("dev").create(source_reference="main")
    dev.object("img/dot.png").upload(blue)
    dev.commit(message="blue")
    page = admin_page(served, browser)
    try:
        page.goto(f"{served.api}/#/r/{rid}/compare/main/dev")
        page.wait_for_selector("#diff tr.change[data-path='img/dot.png']")
        row = open_diff(page, "img/dot.png")
        images = row.locator(".image-diff img")
        expect_two = images.count()
        assert expect_two == 2
        for i in range(2):
            page.wait_for_function("img => img.complete && img.naturalWidth === 1", arg=images.nth(i).element_handle())
        got = [requests.get(served.api + images.nth(i).get_attribute("src"), auth=AUTH, timeout=30).content for i in range(2)]
        assert got == [red, blue]
        assert row.locator("figure[data-side=before] img").get_attribute("alt") == "dot.png, before"
        shot(page, "43-diff-image")
    finally:
        page.close()


def test_blame_on_the_listing_and_the_object_page(served: Served, browser: Any) -> None:
    repo = served.repo(prefix="db")
    rid = str(repo.id)
    main = repo.branch("main")
    main.object("d/a.txt").upload(b"a")
    main.object("d/b.txt").upload(b"b")
    main.object("d/sub/c.txt").upload(b"c")
    first = main.commit(message="first files").get_commit().id
    main.object("d/b.txt").upload(b"b2")
    second = main.commit(message="change b").get_commit().id
    main.object("d/new.txt").upload(b"staged")
    page = admin_page(served, browser)
    try:
        page.goto(f"{served.api}/#/r/{rid}/tree/main/d/")
        page.wait_for_selector("#listing td.last-change[data-path='d/a.txt'] .blame")
        blame = {p: page.locator(f"#listing td.last-change[data-path='{p}'] .blame").get_attribute("data-commit")
                 for p in ("d/a.txt", "d/b.txt", "d/sub/")}
        assert blame == {"d/a.txt": first, "d/b.txt": second, "d/sub/": first}
        b_cell = page.locator("#listing td.last-change[data-path='d/b.txt']")
        assert "change b" in b_cell.inner_text() and "admin" in b_cell.inner_text()
        assert b_cell.locator("time").get_attribute("title")  # the exact time on hover
        staged = page.locator("#listing td.last-change[data-path='d/new.txt']").inner_text()
        assert "not committed" in staged and "uncommitted" in staged
        shot(page, "44-listing-blame")
        b_cell.locator("a").click()  # to the commit
        page.wait_for_selector(f"#main h3 >> text={second}")
        page.goto(f"{served.api}/#/r/{rid}/object/main?path=d%2Fa.txt")
        page.wait_for_selector("#object-blame .blame")
        assert page.locator("#object-blame .blame").get_attribute("data-commit") == first
        assert "first files" in page.locator("#object-blame").inner_text()
    finally:
        page.close()


def test_a_reviewer_reads_a_parquet_table_diff_in_a_pull_request_and_approves_it(served: Served, chromium: Any) -> None:
    reviewer_key, reviewer_secret = served.gateway.user("tablereviewer", "Developer")
    repo = served.repo(prefix="dp")
    rid = str(repo.id)
    main = repo.branch("main")
    main.object("tables/orders.parquet").upload(parquet({"order_id": [1, 2, 3, 4], "amount": [10, 20, 30, 40],
                                                         "note": ["a", "b", "c", "d"]}))
    main.commit(message="orders")
    feat = repo.branch("fix-amounts").create(source_reference="main")
    feat.object("tables/orders.parquet").upload(parquet({"order_id": [1, 2, 4, 5], "amount": [10.0, 25.5, 40.0, 50.0],
                                                         "status": ["ok", "fixed", "ok", "new"]}))
    feat.commit(message="fix amounts")
    rules = f"{served.api}/api/v1/repositories/{rid}/settings/branch_protection"
    assert requests.put(rules, json=[{"pattern": "main", "required_approvals": 1}], auth=AUTH, timeout=30).status_code == 204
    pull = requests.post(f"{served.api}/api/v1/repositories/{rid}/pulls", auth=AUTH, timeout=30, json={
        "title": "Fix order amounts", "source_branch": "fix-amounts", "destination_branch": "main"}).json()
    ctx = chromium.new_context(viewport={"width": 1100, "height": 800})
    ctx.set_default_timeout(15_000)
    try:
        page = ctx.new_page()
        login(page, served.api, reviewer_key, reviewer_secret)
        page.goto(f"{served.api}/#/r/{rid}/pull/{pull['id']}")
        page.wait_for_selector("#diff tr.change[data-path='tables/orders.parquet']")
        row = open_diff(page, "tables/orders.parquet")
        row.locator(".table-diff").wait_for()
        row.locator("select.key-pick").select_option("order_id")
        keyed = row.locator(".table-diff[data-mode=key][data-key=order_id]")
        keyed.wait_for()
        schema = keyed.locator("ul.schema-changes").inner_text()
        assert "column added: status" in schema and "column dropped: note" in schema
        assert "column retyped: amount int64 → double" in schema
        assert keyed.locator(".table-counts span").all_inner_texts() == ["1 added", "1 removed", "1 changed", "2 unchanged"]
        assert keyed.locator("tr.row-changed.after td.cell-added").all_inner_texts() == ["25.5"]
        assert keyed.locator("tr.row-removed td").first.inner_text() == "−"
        assert "5" in keyed.locator("tr.row-added td").all_inner_texts()[1]
        shot(page, "45-pr-parquet-table-diff")
        page.click("#approve")
        page.wait_for_selector("#pr-approvals >> text=approvals: 1 of 1 required")
        approvals = requests.get(f"{served.api}/api/v1/repositories/{rid}/pulls/{pull['id']}", auth=AUTH, timeout=30).json()["approvals"]
        assert [a["user"] for a in approvals] == ["tablereviewer"]
    finally:
        ctx.close()
