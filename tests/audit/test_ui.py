"""The web UI's audit page and an object's "who read / changed this", in a real browser; hostile names stay text."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from playwright.sync_api import expect

from tests.api.conftest import Served, running
from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET
from tests.ui.test_browser import login

HOSTILE = "<img src=x onerror=alert(1)>\x1b[31m.csv"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with running(tmp_path_factory.mktemp("auditui"), env={"LAKEMOUNT_AUDIT_FLUSH_S": "0.2"}) as s:
        yield s


def test_audit_page_lists_records_and_an_object_page_says_who_touched_it(served: Served, browser: Any) -> None:  # noqa: F811
    repo = served.repo(prefix="au")
    main = repo.branch("main")
    main.object("d/plain.csv").upload(b"a,b\n")
    main.object(f"d/{HOSTILE}").upload(b"x,y\n")
    assert main.object("d/plain.csv").reader().read() == b"a,b\n"
    # Each worker writes its records every 0.2 s: wait until the API lists all three (a minute only bounds a failure).
    deadline = time.monotonic() + 60
    while True:
        r = requests.get(f"{served.api}/api/v1/repositories/{repo.id}/audit", auth=(ADMIN_KEY, ADMIN_SECRET), timeout=30)
        assert r.status_code == 200, r.text
        ops = [rec["op"] for rec in r.json()["results"]]
        if ops.count("uploadObject") >= 2 and "getObject" in ops:
            break
        assert time.monotonic() < deadline, f"the audit trail never listed the two uploads and the read: {ops}"
        time.sleep(0.1)
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    login(page, served.api, ADMIN_KEY, ADMIN_SECRET)
    page.goto(f"{served.api}/#/r/{repo.id}/audit")
    page.wait_for_selector("#audit tr.audit")
    text = page.locator("#audit").inner_text()
    assert "uploadObject" in text and "getObject" in text and "admin" in text
    shown = "<img src=x onerror=alert(1)>\\x1b[31m.csv"
    assert page.locator("#audit td.path", has_text=shown).count() >= 1  # the name is text, escaped
    assert page.locator("#main img").count() == 0
    page.select_option("#audit-op", "getObject")
    page.click("#audit-filter button[type=submit]")
    expect(page.locator("#audit tr.audit")).to_have_count(1)
    page.goto(f"{served.api}/#/r/{repo.id}/object/main?path=d%2Fplain.csv")
    page.wait_for_selector("#who-touched-table tr.audit")
    who = page.locator("#who-touched-table").inner_text()
    assert "getObject" in who and "uploadObject" in who
    assert errors == []
