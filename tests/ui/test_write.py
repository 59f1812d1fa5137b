"""The web UI's write work in a real browser (issue 28): branches and tags from any ref, upload (file input, drag
and drop, progress, cancel) and delete, commit with metadata, reset (all, a path, a prefix), merge with a strategy
from the compare page, the breadcrumb and the one date format, and every write control disabled with its reason
for a user who may only read. Each action is done through the page and checked through the REST API."""

from __future__ import annotations

import re
from typing import Any

import requests
from playwright.sync_api import expect

from tests.api.conftest import Served
from tests.api.test_http import AUTH
from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET
from tests.ui.test_browser import login, shot


def rest(served: Served, method: str, path: str, **kw: Any) -> Any:
    r = requests.request(method, f"{served.api}/api/v1{path}", auth=AUTH, timeout=30, **kw)
    assert r.status_code < 300, (r.status_code, r.text)
    return r.json() if r.content and r.headers.get("content-type", "").startswith("application/json") else r.text


def names(served: Served, repo: str, kind: str) -> set[str]:
    return {r["id"] for r in rest(served, "GET", f"/repositories/{repo}/{kind}", params={"amount": 1000})["results"]}


def paths(served: Served, repo: str, ref: str) -> set[str]:
    data = rest(served, "GET", f"/repositories/{repo}/refs/{ref}/objects/ls", params={"amount": 1000})
    return {o["path"] for o in data["results"]}


def staged(served: Served, repo: str, branch: str) -> set[str]:
    return {d["path"] for d in rest(served, "GET", f"/repositories/{repo}/branches/{branch}/diff", params={"amount": 1000})["results"]}


def admin_page(served: Served, browser: Any) -> Any:
    page = browser.new_page()
    page.on("dialog", lambda d: d.accept())  # the confirm() of a delete or a reset
    login(page, served.api, ADMIN_KEY, ADMIN_SECRET)
    return page


def test_branches_and_tags_are_created_from_any_ref_and_deleted(served: Served, browser: Any) -> None:
    repo = served.repo(prefix="wb")
    rid = str(repo.id)
    main = repo.branch("main")
    main.object("a.txt").upload(b"1")
    first = main.commit(message="one").get_commit().id
    main.object("b.txt").upload(b"2")
    main.commit(message="two")
    page = admin_page(served, browser)
    try:
        page.goto(f"{served.api}/#/r/{rid}/refs/main")
        page.wait_for_selector("#branches tr.branch[data-name=main]")
        # A branch from a commit id (not a name): it holds only what that commit had.
        page.fill("#new-branch", "old")
        page.fill("#new-branch-source", first)
        page.click("#create-branch button")
        page.wait_for_selector("#branches tr.branch[data-name=old]")
        assert names(served, rid, "branches") == {"main", "old"}
        assert paths(served, rid, "old") == {"a.txt"}
        # A tag from a branch name, then another from that tag.
        page.fill("#new-tag", "v1")
        page.fill("#new-tag-source", "old")
        page.click("#create-tag button")
        page.wait_for_selector("#tags tr.tag[data-name=v1]")
        page.fill("#new-tag", "v1-again")
        page.fill("#new-tag-source", "v1")
        page.click("#create-tag button")
        page.wait_for_selector("#tags tr.tag[data-name=v1-again]")
        tags = {t["id"]: t["commit_id"] for t in rest(served, "GET", f"/repositories/{rid}/tags")["results"]}
        assert tags == {"v1": first, "v1-again": first}
        # A refusal (the name exists) is shown in place.
        page.fill("#new-branch", "old")
        page.fill("#new-branch-source", "main")
        page.click("#create-branch button")
        expect(page.locator("#refs-message .error")).to_be_visible()
        shot(page, "30-branches-and-tags")
        page.click("#branches tr[data-name=old] .delete-branch")
        page.wait_for_selector("#branches tr[data-name=old]", state="detached")
        page.click("#tags tr[data-name=v1] .delete-tag")
        page.wait_for_selector("#tags tr[data-name=v1]", state="detached")
        assert names(served, rid, "branches") == {"main"}
        assert names(served, rid, "tags") == {"v1-again"}
    finally:
        page.close()


def test_upload_by_input_and_drop_with_progress_cancel_and_delete(served: Served, browser: Any, tmp_path: Any) -> None:
    repo = served.repo(prefix="wu")
    rid = str(repo.id)
    main = repo.branch("main")
    main.object("dir/keep.txt").upload(b"keep")
    main.object("dir/gone.txt").upload(b"gone")
    main.commit(message="seed")
    repo.tag("t1").create("main")
    page = admin_page(served, browser)
    try:
        page.goto(f"{served.api}/#/r/{rid}/tree/main/dir/")
        page.wait_for_selector("#listing >> text=keep.txt")
        page.set_input_files("#upload-input", files=[{"name": "picked.csv", "mimeType": "text/csv", "buffer": b"id\n1\n"}])
        page.wait_for_selector("#uploads li[data-path='dir/picked.csv'][data-state=done]")
        assert page.locator("#uploads li[data-path='dir/picked.csv'] progress").evaluate("p => p.value") == 1
        page.wait_for_selector("#listing >> text=picked.csv")  # redrawn once the uploads ended
        # Drag and drop onto the listing (a DataTransfer with a file, as a drop from the desktop makes).
        page.evaluate("""() => {
          const dt = new DataTransfer();
          dt.items.add(new File(["dropped bytes"], "dropped.txt", {type: "text/plain"}));
          document.getElementById("listing").dispatchEvent(new DragEvent("drop", {dataTransfer: dt, bubbles: true, cancelable: true}));
        }""")
        page.wait_for_selector("#listing >> text=dropped.txt")
        got = requests.get(f"{served.api}/api/v1/repositories/{rid}/refs/main/objects", params={"path": "dir/dropped.txt"},
                           auth=AUTH, timeout=30)
        assert got.content == b"dropped bytes"
        assert rest(served, "GET", f"/repositories/{rid}/refs/main/objects/stat", params={"path": "dir/picked.csv"})["size_bytes"] == 5
        # A folder keeps its layout under the directory shown.
        (tmp_path / "batch" / "sub").mkdir(parents=True)
        (tmp_path / "batch" / "one.txt").write_bytes(b"one")
        (tmp_path / "batch" / "sub" / "two.txt").write_bytes(b"two")
        page.set_input_files("#upload-folder", str(tmp_path / "batch"))
        page.wait_for_selector("#uploads li[data-path='dir/batch/sub/two.txt'][data-state=done]")
        page.wait_for_selector("#uploads li[data-path='dir/batch/one.txt'][data-state=done]")
        page.wait_for_selector("#listing >> text=batch/")
        assert {"dir/batch/one.txt", "dir/batch/sub/two.txt"} <= paths(served, rid, "main")
        # Cancel: the upload is held in flight (the route never answers) and cancelled from the page.
        held: list[Any] = []
        page.route("**/objects?path=dir%2Fslow.bin", lambda route: held.append(route))
        page.set_input_files("#upload-input", files=[{"name": "slow.bin", "mimeType": "application/octet-stream", "buffer": b"s" * 1000}])
        page.wait_for_selector("#uploads li[data-path='dir/slow.bin'] .cancel-upload")
        assert page.locator("#uploads li[data-path='dir/slow.bin']").get_attribute("data-state") is None
        shot(page, "31-upload-in-flight")
        page.click("#uploads li[data-path='dir/slow.bin'] .cancel-upload")
        page.wait_for_selector("#uploads li[data-path='dir/slow.bin'][data-state=cancelled]", state="attached")
        page.wait_for_selector("#listing >> text=dropped.txt")
        assert held, "the upload never reached the network"
        assert "dir/slow.bin" not in paths(served, rid, "main")
        # Delete an object: a staged removal.
        page.click("#listing .delete-object[data-path='dir/gone.txt']")
        page.wait_for_selector("#listing >> text=gone.txt", state="detached")
        assert "dir/gone.txt" not in paths(served, rid, "main")
        assert staged(served, rid, "main") == {"dir/picked.csv", "dir/dropped.txt", "dir/gone.txt", "dir/batch/one.txt",
                                               "dir/batch/sub/two.txt"}
        # A tag takes no change: no upload box and no delete buttons there.
        page.goto(f"{served.api}/#/r/{rid}/tree/t1/dir/")
        page.wait_for_selector("#listing >> text=gone.txt")
        assert page.locator("#upload, .delete-object").count() == 0
    finally:
        page.close()


def test_commit_with_metadata_and_reset_a_path_a_prefix_and_all(served: Served, browser: Any) -> None:
    repo = served.repo(prefix="wc")
    rid = str(repo.id)
    main = repo.branch("main")
    for p in ("x/1.txt", "x/2.txt", "y/1.txt", "z.txt", "w.txt"):
        main.object(p).upload(b"v")
    page = admin_page(served, browser)
    try:
        page.goto(f"{served.api}/#/r/{rid}/changes/main")
        page.wait_for_selector("#changes tr[data-path='z.txt']")
        page.click("#changes tr[data-path='z.txt'] .reset-path")
        page.wait_for_selector("#changes tr[data-path='z.txt']", state="detached")
        assert staged(served, rid, "main") == {"x/1.txt", "x/2.txt", "y/1.txt", "w.txt"}
        page.fill("#reset-prefix", "x/")
        page.click("#reset-prefix-form button")
        page.wait_for_selector("#changes tr[data-path='x/1.txt']", state="detached")
        assert staged(served, rid, "main") == {"y/1.txt", "w.txt"}
        # Commit with a message and two metadata rows (a third, removed, is not sent).
        page.fill("#commit-message-input", "add y and w")
        for k, v in (("owner", "team-a"), ("drop", "me"), ("ticket", "T-7")):
            page.click("#add-metadata")
            page.locator("#commit-metadata .meta-key").last.fill(k)
            page.locator("#commit-metadata .meta-value").last.fill(v)
        page.locator("#commit-metadata tr", has=page.locator("input[aria-label='metadata key']")).nth(1).locator(".meta-remove").click()
        shot(page, "32-commit-form")
        missing: list[str] = []  # what the browser asked that was not there (the picker asked branches/<commit id>)
        page.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
        page.click("#commit-button")
        page.wait_for_url(re.compile(r".*#/r/[^/]+/commit/[0-9a-f]+\?branch=main$"))
        head = rest(served, "GET", f"/repositories/{rid}/refs/main/commits", params={"amount": 1})["results"][0]
        assert head["message"] == "add y and w" and head["metadata"] == {"owner": "team-a", "ticket": "T-7"}
        # Issue 38 item 4: after the commit the user is still on main, and "objects" is main, with its upload.
        expect(page.locator("#commit-message")).to_have_text("add y and w")
        expect(page.locator("#ref-picker")).to_have_value("main")
        page.click(".tabs >> text=objects")
        page.wait_for_url(re.compile(r".*#/r/[^/]+/tree/main$"))
        expect(page.locator("#upload-input")).to_be_attached()
        assert not missing, missing
        assert paths(served, rid, "main") == {"y/1.txt", "w.txt"} and staged(served, rid, "main") == set()
        # Reset all.
        main.object("q.txt").upload(b"q")
        main.object("r/s.txt").upload(b"s")
        page.goto(f"{served.api}/#/r/{rid}/changes/main")
        page.wait_for_selector("#changes tr[data-path='q.txt']")
        page.click("#reset-all")
        page.wait_for_selector("#no-changes")
        assert staged(served, rid, "main") == set()
        # An empty commit is refused, in place.
        page.fill("#commit-message-input", "nothing")
        page.click("#commit-button")
        expect(page.locator("#changes-message .error")).to_be_visible()
    finally:
        page.close()


def compare_drawn(page: Any, base: str) -> None:
    """Wait until the compare page of ``base`` is drawn.

    A hash change (``goto``, the merge's ``location.assign``) keeps the page before it on screen until the new one
    draws, and a compare page draws its base picker, merge form and counts at once: the merge form or ``#counts``
    seen before the picker shows ``base`` may be the previous compare page's.
    """
    expect(page.locator("#base-picker")).to_have_value(base)


def test_merge_from_the_compare_page_with_a_strategy(served: Served, browser: Any) -> None:
    repo = served.repo(prefix="wm")
    rid = str(repo.id)
    main = repo.branch("main")
    main.object("a.csv").upload(b"id\n0\n")
    main.commit(message="base")
    feat = repo.branch("feat").create(source_reference="main")
    feat.object("a.csv").upload(b"id\nfeat\n")
    feat.commit(message="feat side")
    main.object("a.csv").upload(b"id\nmain\n")
    main.commit(message="main side")
    page = admin_page(served, browser)
    try:
        # From the branch page: its row leads to the compare page with the merge form.
        page.goto(f"{served.api}/#/r/{rid}/refs/main")
        page.click("#branches tr[data-name=feat] .merge-link")
        page.wait_for_url(f"**/#/r/{rid}/compare/main/feat")
        compare_drawn(page, "main")
        page.wait_for_selector("#compare-merge")
        assert page.locator("#branches tr[data-name=main] .merge-link").count() == 0
        page.click("#compare-merge-button")  # the default strategy: a conflict, listed
        page.wait_for_selector("#merge-message #conflicts >> text=a.csv")
        page.select_option("#compare-merge-strategy", "source-wins")
        page.fill("#compare-merge-message", "feat wins")
        shot(page, "33-compare-merge")
        page.click("#compare-merge-button")
        page.wait_for_url(f"**/#/r/{rid}/commits/main")
        got = requests.get(f"{served.api}/api/v1/repositories/{rid}/refs/main/objects", params={"path": "a.csv"}, auth=AUTH, timeout=30)
        assert got.content == b"id\nfeat\n"
        head = rest(served, "GET", f"/repositories/{rid}/refs/main/commits", params={"amount": 1})["results"][0]
        assert head["message"] == "feat wins" and len(head["parents"]) == 2
        # dest-wins, main into feat after both changed a.csv again: feat (the destination) keeps its bytes.
        feat.object("a.csv").upload(b"id\nfeat2\n")
        feat.commit(message="feat again")
        main.object("a.csv").upload(b"id\nmain2\n")
        main.commit(message="main again")
        page.goto(f"{served.api}/#/r/{rid}/compare/feat/main")
        compare_drawn(page, "feat")  # not the merge form of the compare page before (main/feat), if still drawn
        page.wait_for_selector("#compare-merge")
        page.select_option("#compare-merge-strategy", "dest-wins")
        page.click("#compare-merge-button")
        page.wait_for_url(f"**/#/r/{rid}/commits/feat")
        got = requests.get(f"{served.api}/api/v1/repositories/{rid}/refs/feat/objects", params={"path": "a.csv"}, auth=AUTH, timeout=30)
        assert got.content == b"id\nfeat2\n"
        # A tag as the base: nothing to merge into, no form.
        repo.tag("t").create("main")
        page.goto(f"{served.api}/#/r/{rid}/compare/t/feat")
        compare_drawn(page, "t")  # the page of t/feat, not the feat/main page a hash change may still show
        page.wait_for_selector("#counts")
        assert page.locator("#compare-merge").count() == 0
    finally:
        page.close()


def test_breadcrumb_with_the_ref_picker_and_one_date_format(served: Served, browser: Any) -> None:
    repo = served.repo(prefix="wd")
    rid = str(repo.id)
    main = repo.branch("main")
    main.object("d1/d2/f.txt").upload(b"f")
    main.commit(message="deep")
    repo.branch("dev").create(source_reference="main")
    page = admin_page(served, browser)
    try:
        page.goto(f"{served.api}/#/r/{rid}/object/main?path=d1%2Fd2%2Ff.txt")
        page.wait_for_selector("#preview")
        crumbs = page.locator("#breadcrumb")
        assert crumbs.locator("a").first.inner_text() == rid
        assert crumbs.locator("#ref-picker").input_value() == "main"
        assert crumbs.locator("a.dir").all_inner_texts() == ["d1", "d2"]
        assert crumbs.locator("strong.file").inner_text() == "f.txt"
        # The picker in the breadcrumb: the same object on another ref.
        page.select_option("#breadcrumb #ref-picker", "dev")
        page.wait_for_url(f"**/#/r/{rid}/object/dev?path=d1%2Fd2%2Ff.txt")
        # The page for dev is drawn when its breadcrumb's links lead into dev: the picker says dev already on the
        # page for main (the choice just made there), which shows a #preview too.
        page.wait_for_selector("#breadcrumb a.dir[href*='/tree/dev/']")
        page.wait_for_selector("#preview")
        assert crumbs.locator("#ref-picker").input_value() == "dev"
        crumbs.locator("a.dir", has_text="d1").click()
        page.wait_for_selector("#listing >> text=d2/")
        assert page.locator("#breadcrumb #ref-picker").input_value() == "dev"
        for view in ("commits/main", "refs/main", "changes/main", "history/main?path=d1%2Fd2%2Ff.txt", "compare/main/dev",
                     "pulls", "feed", "actions", "settings"):
            page.goto(f"{served.api}/#/r/{rid}/{view}")
            page.wait_for_selector("#breadcrumb #ref-picker")
            assert page.locator("#breadcrumb a").first.inner_text() == rid, view
        # On compare, the breadcrumb's picker is the compared ref; the base keeps its own.
        page.goto(f"{served.api}/#/r/{rid}/compare/main/dev")
        page.wait_for_selector("#base-picker")
        page.select_option("#breadcrumb #ref-picker", "main")
        page.wait_for_url(f"**/#/r/{rid}/compare/main/main")
        assert page.locator("#base-picker").input_value() == "main"
        # Dates: relative text, the exact ISO time as the tooltip, on the listing, the log and the object page.
        page.goto(f"{served.api}/#/r/{rid}/commits/main")
        page.wait_for_selector("#commits time")
        stamp = page.locator("#commits time").first
        assert re.fullmatch(r"just now|\d+ min ago", stamp.inner_text()), stamp.inner_text()
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", stamp.get_attribute("title") or "")
        page.goto(f"{served.api}/#/r/{rid}/tree/main/d1/d2/")
        page.wait_for_selector("#listing time")
        assert page.locator("#listing time").first.get_attribute("title") == page.locator("#listing time").first.get_attribute("datetime")
        # Older dates read in larger units (core.js's helpers, imported as the page's modules import them: the
        # same module instance).
        core = "(await import('/static/core.js'))"
        assert page.evaluate(f"async () => {core}.relTime(new Date(Date.now() - 3 * 60 * 1000))") == "3 min ago"
        assert page.evaluate(f"async () => {core}.relTime(new Date(Date.now() - 2 * 86400 * 1000))") == "2 days ago"
        assert page.evaluate(f"async () => {core}.fmtTime('not a date')") == "not a date"
    finally:
        page.close()


def test_write_controls_are_disabled_with_the_reason_for_a_reader(served: Served, browser: Any) -> None:
    reader_key, reader_secret = served.gateway.user("uiwreader", "Analyst")
    repo = served.repo(prefix="wr")
    rid = str(repo.id)
    main = repo.branch("main")
    main.object("a.txt").upload(b"a")
    main.commit(message="a")
    repo.branch("feat").create(source_reference="main")
    main.object("staged.txt").upload(b"s")
    head = main.get_commit().id
    controls = {
        f"#/r/{rid}/commit/{head}": ("#revert-button", "#revert-branch"),
        f"#/r/{rid}/refs/main": ("#create-branch button", "#new-branch", "#create-tag button", ".delete-branch"),
        f"#/r/{rid}/tree/main": ("#upload-input", "#upload-folder", ".delete-object"),
        f"#/r/{rid}/changes/main": ("#commit-button", "#commit-message-input", "#reset-all", ".reset-path", "#reset-prefix-form button"),
        f"#/r/{rid}/compare/main/feat": ("#compare-merge-button", "#compare-merge-strategy"),
    }
    page = browser.new_page()
    try:
        login(page, served.api, reader_key, reader_secret)
        for hash_, selectors in controls.items():
            page.goto(f"{served.api}/{hash_}")
            page.wait_for_selector(selectors[0])
            for sel in selectors:
                loc = page.locator(sel).first
                assert loc.is_disabled(), (hash_, sel)
                assert loc.get_attribute("title") == "You may not do this: it needs WriteRepo on this repository", (hash_, sel)
        shot(page, "34-read-only-merge")
        # A drop on the listing is refused as the input is: nothing uploaded.
        page.goto(f"{served.api}/#/r/{rid}/tree/main")
        page.wait_for_selector("#upload-input:disabled")
        page.evaluate("""() => {
          const dt = new DataTransfer();
          dt.items.add(new File(["x"], "sneak.txt"));
          document.getElementById("listing").dispatchEvent(new DragEvent("drop", {dataTransfer: dt, bubbles: true, cancelable: true}));
        }""")
        assert page.locator("#uploads li").count() == 0
        assert "sneak.txt" not in paths(served, rid, "main")
        # The administrator: the same controls enabled, without a tooltip.
        login(page, served.api, ADMIN_KEY, ADMIN_SECRET)
        for hash_, selectors in controls.items():
            page.goto(f"{served.api}/{hash_}")
            page.wait_for_selector(selectors[0])
            for sel in selectors:
                loc = page.locator(sel).first
                assert loc.is_enabled() and loc.get_attribute("title") is None, (hash_, sel)
    finally:
        page.close()


def test_issue38_the_authors_approve_button_is_disabled_with_the_reason(served: Served, browser: Any) -> None:
    """The author's Approve button was enabled and answered "authors cannot approve their own pull request /
    Correct the value and try again"; controls a user may not use are disabled with the reason (README)."""
    from tests.ui.test_browser import _pull_of_one_file

    rid, pull = _pull_of_one_file(served, "own", "x.txt", "x")
    author = admin_page(served, browser)
    try:
        author.goto(f"{served.api}/#/r/{rid}/pull/{pull['id']}")
        approve = author.locator("#approve")
        expect(approve).to_be_disabled()
        expect(approve).to_have_attribute("title", re.compile("Authors cannot approve their own pull request"))
        expect(author.locator("#merge")).to_be_enabled()  # the author's other controls stay
        shot(author, "38-own-pull-approve-disabled")
    finally:
        author.close()
    key, secret = served.gateway.user("reviewer38", "Admin")
    reviewer = browser.new_page()
    try:
        login(reviewer, served.api, key, secret)
        reviewer.goto(f"{served.api}/#/r/{rid}/pull/{pull['id']}")
        expect(reviewer.locator("#approve")).to_be_enabled()
        reviewer.click("#approve")
        expect(reviewer.locator("#pr-approvals")).to_contain_text("reviewer38")
    finally:
        reviewer.close()
    assert [a["user"] for a in rest(served, "GET", f"/repositories/{rid}/pulls/{pull['id']}")["approvals"]] == ["reviewer38"]
