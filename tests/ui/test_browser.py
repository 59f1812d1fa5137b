"""The web UI in a real browser (chromium via playwright): log in, browse, preview Parquet and CSV (an XSS name
stays text), commit log and a commit's diff, history by path, compare with uncommitted changes, paging, logout.
Each step leaves a screenshot in docs/screenshots/."""

from __future__ import annotations

import io
from typing import Any

from tests.api.conftest import Served
from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET
from tests.ui.conftest import SCREENSHOTS

XSS = "<img src=x onerror=alert(1)>.csv"
MAX_SHOT = 300 * 1024


def shot(page: Any, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    assert path.stat().st_size < MAX_SHOT, f"{path} is {path.stat().st_size} bytes"


def seed(served: Served) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    repo = served.repo(prefix="ui")
    main = repo.branch("main")
    buf = io.BytesIO()
    pq.write_table(pa.table({"event_id": [f"e{i:04d}" for i in range(300)], "amount": [i * 1.5 for i in range(300)],
                             "note": ["<script>alert(2)</script>"] * 300}), buf)
    main.object("data/events.parquet").upload(buf.getvalue())
    main.object(f"data/{XSS}").upload(b"id,comment\n1,<b onmouseover=alert(3)>hi</b>\n")
    main.object("data/readme.json").upload(b'{"owner": "team", "tags": ["a", "b"]}')
    main.object("data/blob.bin").upload(bytes(range(256)) * 64)
    for i in range(230):
        main.object(f"many/f{i:04d}.txt").upload(b"x")
    main.commit(message="first <i>commit</i> with <script>alert(4)</script>")
    main.object("data/events.parquet").upload(buf.getvalue()[:-1] + b"1")  # changed
    main.object("data/new.txt").upload(b"new line\n")
    main.object("data/readme.json").delete()
    main.commit(message="second commit")
    main.object("data/uncommitted.txt").upload(b"staged\n")
    return str(repo.id)


def test_ui_flow(served: Served, browser: Any) -> None:
    repo = seed(served)
    base = served.api
    dialogs: list[str] = []
    page = browser.new_page()
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        # A missing cookie: redirected to the login page.
        page.goto(base + "/")
        page.wait_for_url(base + "/login")
        page.fill("#access_key_id", ADMIN_KEY)
        page.fill("#secret_access_key", "wrong")
        page.click("#login")
        page.wait_for_selector("text=wrong access key or secret")
        page.fill("#secret_access_key", ADMIN_SECRET)
        shot(page, "01-login")
        page.click("#login")
        page.wait_for_selector("#repos")
        assert page.locator("#user").inner_text() == "admin"
        shot(page, "02-repositories")

        page.click(f"#repos >> text={repo}")
        page.wait_for_selector("#listing >> text=data/")
        page.click("#listing >> text=data/")
        page.wait_for_selector(f"#listing >> text={XSS}")
        shot(page, "03-browse")

        page.click("#listing >> text=events.parquet")
        page.wait_for_selector("#preview[data-kind=parquet]")
        assert page.locator(".schema td").all_inner_texts()[:2] == ["event_id", "string"]
        assert "(first 100 of 300)" in page.locator("#preview").inner_text()
        assert page.locator(".preview-table tr").count() == 101
        assert "<script>alert(2)</script>" in page.locator(".preview-table").inner_text()
        shot(page, "04-parquet-preview")

        page.go_back()
        page.wait_for_selector(f"#listing >> text={XSS}")
        page.click(f"#listing >> text={XSS}")
        page.wait_for_selector("#preview[data-kind=csv]")
        assert page.locator("#object-path").inner_text() == f"data/{XSS}"
        assert page.locator(".preview-table td").all_inner_texts()[1] == "<b onmouseover=alert(3)>hi</b>"
        assert page.locator("#main img").count() == 0  # the name never became an element
        shot(page, "05-csv-xss-name")

        page.goto(f"{base}/#/r/{repo}/object/main?path=data%2Fblob.bin")
        page.wait_for_selector("#preview[data-kind=binary]")

        # Paging: 230 entries in many/, pages of 100.
        page.goto(f"{base}/#/r/{repo}/tree/main/many")
        page.wait_for_selector("#listing >> text=f0099.txt")
        assert page.locator("#listing tr.obj").count() == 100
        page.click("a.next")
        page.wait_for_selector("#listing >> text=f0100.txt")
        page.click("a.next")
        page.wait_for_selector("#listing >> text=f0229.txt")
        assert page.locator("#listing tr.obj").count() == 30 and page.locator("a.next").count() == 0
        page.click("a.prev")
        page.wait_for_selector("#listing >> text=f0100.txt")

        # Commit log, a commit's diff, the first commit's message as text.
        page.goto(f"{base}/#/r/{repo}/commits/main")
        page.wait_for_selector("#commits >> text=second commit")
        assert "first <i>commit</i> with <script>alert(4)</script>" in page.locator("#commits").inner_text()
        shot(page, "06-commits")
        page.locator("#commits tr.commit", has_text="second commit").locator("a").first.click()
        page.wait_for_selector("#diff tr.change")
        kinds = sorted(page.locator("#diff tr.change td:first-child").all_inner_texts())
        assert kinds == ["added", "changed", "removed"]
        shot(page, "07-commit-diff")

        # History by path: only the commits that changed it.
        page.goto(f"{base}/#/r/{repo}/history/main?path=data%2Freadme.json")
        page.wait_for_selector("#history tr.commit")
        assert page.locator("#history tr.commit").count() == 2
        page.goto(f"{base}/#/r/{repo}/history/main?path=data%2Fnew.txt")
        page.wait_for_selector("#history tr.commit")
        assert page.locator("#history tr.commit").count() == 1
        shot(page, "08-history")

        # Compare: two commits, then uncommitted changes of main.
        page.goto(f"{base}/#/r/{repo}/compare/main~1/main")
        page.wait_for_selector("#counts .added")
        assert page.locator("#counts span").all_inner_texts() == ["1 added", "1 removed", "1 changed"]
        page.click("#uncommitted")
        page.wait_for_selector("#counts .added")
        assert page.locator("#counts .added").inner_text() == "1 added"
        assert "data/uncommitted.txt" in page.locator("#diff").inner_text()
        shot(page, "09-compare-uncommitted")

        # Logout: the session is gone, / redirects to login again.
        page.click("#logout")
        page.wait_for_url(base + "/login")
        page.goto(base + "/")
        page.wait_for_url(base + "/login")
        assert dialogs == [] and errors == []
    finally:
        page.close()


def test_forged_cookie_redirects_to_login(served: Served, browser: Any) -> None:
    host = served.api.split("//", 1)[1].split(":")[0]
    browser.add_cookies([{"name": "internal_auth_session", "value": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZG1pbiJ9.Zm9yZ2Vk",
                          "domain": host, "path": "/"}])
    page = browser.new_page()
    try:
        page.goto(served.api + "/")
        page.wait_for_url(served.api + "/login")
        # The hash routes' API calls get 401 too and land on the login page.
        page.goto(served.api + "/login")
        page.wait_for_selector("#login-form")
    finally:
        page.close()
        browser.clear_cookies()
