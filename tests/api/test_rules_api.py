"""Branch protection, hooks and pull requests through the REST API (a live ``lakemount serve``)."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from tests.api.conftest import Served
from tests.api.test_http import AUTH, api, expect_error


@pytest.fixture
def repo_id(repo: Any) -> str:
    return str(repo.id)


def upload(served: Served, repo: str, branch: str, path: str, data: bytes) -> requests.Response:
    return requests.post(api(served, f"/repositories/{repo}/branches/{branch}/objects"), params={"path": path},
                         files={"content": data}, auth=AUTH, timeout=30)


def commit(served: Served, repo: str, branch: str, message: str) -> requests.Response:
    return requests.post(api(served, f"/repositories/{repo}/branches/{branch}/commits"),
                         json={"message": message}, auth=AUTH, timeout=30)


def test_protection_rules_are_enforced_through_the_api(served: Served, repo_id: str) -> None:
    url = api(served, f"/repositories/{repo_id}/settings/branch_protection")
    assert requests.get(url, auth=AUTH, timeout=30).json() == []
    r = requests.put(url, json=[{"pattern": "main", "required_approvals": 1}, {"pattern": "rel-*"}], auth=AUTH, timeout=30)
    assert r.status_code == 204, r.text
    assert requests.get(url, auth=AUTH, timeout=30).json() == [
        {"pattern": "main", "required_approvals": 1}, {"pattern": "rel-*", "required_approvals": 0},
    ]
    assert "protected" in expect_error(upload(served, repo_id, "main", "x.csv", b"x"), 403)
    assert "protected" in expect_error(commit(served, repo_id, "main", "direct"), 403)
    expect_error(requests.put(url, json=[{"pattern": "has space"}], auth=AUTH, timeout=30), 400)
    expect_error(requests.put(url, json=[{"nope": 1}], auth=AUTH, timeout=30), 400)
    old = api(served, f"/repositories/{repo_id}/branch_protection")
    assert requests.delete(old, json={"pattern": "main"}, auth=AUTH, timeout=30).status_code == 204
    expect_error(requests.delete(old, json={"pattern": "main"}, auth=AUTH, timeout=30), 404)
    assert upload(served, repo_id, "main", "x.csv", b"x").status_code == 201
    assert requests.post(old, json={"pattern": "main"}, auth=AUTH, timeout=30).status_code == 204
    expect_error(requests.post(old, json={"pattern": "main"}, auth=AUTH, timeout=30), 409)
    assert [r["pattern"] for r in requests.get(old, auth=AUTH, timeout=30).json()] == ["main", "rel-*"]



def test_protection_rules_update_is_conditional_on_their_etag(served: Served, repo: Any) -> None:
    # lakectl branch-protect add reads the rules with their ETag and writes them back with
    # If-Match: a change made in between must make the write fail (412), not be dropped.
    import lakefs_sdk

    sdk = repo._client.sdk_client.repositories_api
    rule = lakefs_sdk.BranchProtectionRule
    first = sdk.get_branch_protection_rules_with_http_info(repo.id)
    assert first.data == [] and first.headers["ETag"] == ""
    # The Python SDK leaves an empty if_match out; lakectl (Go) sends it: "" = only while there are none.
    sdk.set_branch_protection_rules(repo.id, [rule(pattern="main")], _headers={"If-Match": ""})
    with pytest.raises(lakefs_sdk.exceptions.ApiException) as e:
        sdk.set_branch_protection_rules(repo.id, [rule(pattern="other")], _headers={"If-Match": ""})
    assert e.value.status == 412
    seen = sdk.get_branch_protection_rules_with_http_info(repo.id).headers["ETag"]
    assert seen
    sdk.set_branch_protection_rules(repo.id, [rule(pattern="main"), rule(pattern="rel-*")])  # a concurrent change
    with pytest.raises(lakefs_sdk.exceptions.ApiException) as e:
        sdk.set_branch_protection_rules(repo.id, [rule(pattern="main"), rule(pattern="dev")], if_match=seen)
    assert e.value.status == 412
    assert [r.pattern for r in sdk.get_branch_protection_rules(repo.id)] == ["main", "rel-*"]
    now = sdk.get_branch_protection_rules_with_http_info(repo.id).headers["ETag"]
    assert now != seen
    sdk.set_branch_protection_rules(repo.id, [rule(pattern="dev")], if_match=now)
    assert [r.pattern for r in sdk.get_branch_protection_rules(repo.id)] == ["dev"]


WRITERS, ROUNDS = 12, 10


def test_concurrent_conditional_protection_writes_one_wins(served: Served, repo_id: str) -> None:
    # Writers that all read the same ETag and write at once: the compare and the write are one
    # transaction, so exactly one write lands and every other gets 412 (none is silently lost).
    import threading

    url = api(served, f"/repositories/{repo_id}/settings/branch_protection")
    for round_ in range(ROUNDS):
        etag = requests.get(url, auth=AUTH, timeout=30).headers["ETag"]
        barrier = threading.Barrier(WRITERS)
        codes: dict[int, int] = {}
        errors: list[BaseException] = []  # a writer that raised (a timeout) fails the test with its own error

        def put(i: int, etag: str = etag, barrier: threading.Barrier = barrier, codes: dict[int, int] = codes,
                round_: int = round_, errors: list[BaseException] = errors) -> None:
            try:
                body = [{"pattern": f"r{round_}-w{i}", "required_approvals": i}]
                barrier.wait()
                codes[i] = requests.put(url, json=body, headers={"If-Match": etag}, auth=AUTH, timeout=60).status_code
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=put, args=(i,)) for i in range(WRITERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        winners = [i for i, c in codes.items() if c == 204]
        assert len(winners) == 1 and sorted(codes.values()) == [204] + [412] * (WRITERS - 1), codes
        assert requests.get(url, auth=AUTH, timeout=30).json() == [
            {"pattern": f"r{round_}-w{winners[0]}", "required_approvals": winners[0]}]


def test_gc_rules_through_the_api_are_the_rules_gc_reads(served: Served, repo_id: str) -> None:
    from lakemount.app import App
    from lakemount.config import load
    from lakemount.jobs.retention import load_rules

    url = api(served, f"/repositories/{repo_id}/settings/gc_rules")
    assert "no GC rules" in expect_error(requests.get(url, auth=AUTH, timeout=30), 404)
    rules = {"default_retention_days": 21, "branches": [{"branch_id": "main", "retention_days": 90}]}
    assert requests.put(url, json=rules, auth=AUTH, timeout=30).status_code == 204
    assert requests.get(url, auth=AUTH, timeout=30).json() == rules
    app = App(load(env={"LAKEMOUNT_HOME": str(served.home)}))  # the server's stores: `lakemount gc run` sees these rules
    stored = load_rules(app.adapter, app.catalog.repository(repo_id).storage_namespace)
    assert stored is not None and stored.days_for("main") == 90 and stored.days_for("dev") == 21
    expect_error(requests.put(url, json={"default_retention_days": -1, "branches": []}, auth=AUTH, timeout=30), 400)
    expect_error(requests.put(url, json={"default_retention_days": 0, "branches": []}, auth=AUTH, timeout=30), 400)
    expect_error(requests.put(url, json={"default_retention_days": 1}, auth=AUTH, timeout=30), 400)
    assert requests.delete(url, auth=AUTH, timeout=30).status_code == 204
    expect_error(requests.get(url, auth=AUTH, timeout=30), 404)

GUARD = b"""name: guard
on: {pre-commit: {branches: [dev]}}
hooks: [{id: csv_only, type: lakemount_check, properties: {formats: [csv]}}]
"""


def test_hooks_reject_api_commits_and_runs_are_listed(served: Served, repo_id: str) -> None:
    requests.post(api(served, f"/repositories/{repo_id}/branches"), json={"name": "dev", "source": "main"}, auth=AUTH, timeout=30)
    assert upload(served, repo_id, "dev", "_lakefs_actions/guard.yaml", GUARD).status_code == 201
    assert upload(served, repo_id, "dev", "notes.txt", b"text").status_code == 201
    message = expect_error(commit(served, repo_id, "dev", "refused"), 403)
    assert message.startswith("pre-commit rejected by hook guard/csv_only: 1 path(s) not of formats csv: notes.txt")
    runs = requests.get(api(served, f"/repositories/{repo_id}/actions/runs"), auth=AUTH, timeout=30).json()
    (run,) = runs["results"]
    assert (run["event_type"], run["branch"], run["status"]) == ("pre-commit", "dev", "failed")
    one = requests.get(api(served, f"/repositories/{repo_id}/actions/runs/{run['run_id']}"), auth=AUTH, timeout=30).json()
    assert one["run_id"] == run["run_id"]
    hooks = requests.get(api(served, f"/repositories/{repo_id}/actions/runs/{run['run_id']}/hooks"), auth=AUTH, timeout=30).json()
    (hook,) = hooks["results"]
    assert (hook["hook_id"], hook["status"]) == ("csv_only", "failed")
    out = requests.get(api(served, f"/repositories/{repo_id}/actions/runs/{run['run_id']}/hooks/{hook['hook_run_id']}/output"),
                       auth=AUTH, timeout=30)
    assert out.status_code == 200 and b"notes.txt" in out.content
    assert_inert(out)


def assert_inert(r: requests.Response) -> None:
    """Bytes a user controls come back sandboxed and never sniffed (the web UI shares the API's origin)."""
    from lakemount.api.context import UNTRUSTED_CSP

    assert r.headers["X-Content-Type-Options"] == "nosniff", r.headers
    assert r.headers["Content-Security-Policy"] == UNTRUSTED_CSP and UNTRUSTED_CSP.startswith("sandbox;")


def test_user_bytes_served_as_text_are_inert(served: Served, repo_id: str) -> None:
    # A commit message is user-controlled and reaches the event stream; a branch's creation answers text/html.
    r = requests.post(api(served, f"/repositories/{repo_id}/branches"), json={"name": "x", "source": "main"}, auth=AUTH, timeout=30)
    assert r.status_code == 201 and r.headers["Content-Type"] == "text/html"
    assert_inert(r)
    assert upload(served, repo_id, "x", "a.html", b"a").status_code == 201
    assert commit(served, repo_id, "x", "<script>alert(1)</script>").status_code == 201
    r = requests.get(api(served, f"/repositories/{repo_id}/events"), auth=AUTH, timeout=30)
    assert r.status_code == 200 and b"<script>" in r.content
    assert_inert(r)
    # JSON (errors echo names the caller sent) is never sniffed as HTML either.
    r = requests.get(api(served, f"/repositories/{repo_id}/branches/%3Cscript%3E"), auth=AUTH, timeout=30)
    assert r.status_code in (400, 404) and r.headers["X-Content-Type-Options"] == "nosniff"
    expect_error(requests.get(api(served, f"/repositories/{repo_id}/actions/runs/nope"), auth=AUTH, timeout=30), 404)


def test_pull_requests_through_the_api(served: Served, repo_id: str) -> None:
    base = api(served, f"/repositories/{repo_id}/pulls")
    requests.post(api(served, f"/repositories/{repo_id}/branches"), json={"name": "feat", "source": "main"}, auth=AUTH, timeout=30)
    upload(served, repo_id, "feat", "a.csv", b"a\n")
    assert commit(served, repo_id, "feat", "a").status_code == 201
    r = requests.post(base, json={"title": "Add <a>", "description": "d", "source_branch": "feat", "destination_branch": "main"},
                      auth=AUTH, timeout=30)
    assert r.status_code == 201, r.text
    pid = r.json()["id"]
    expect_error(requests.post(base, json={"title": "x", "source_branch": "nope", "destination_branch": "main"}, auth=AUTH, timeout=30), 404)
    expect_error(requests.post(base, json={"title": "x"}, auth=AUTH, timeout=30), 400)
    listed = requests.get(base, auth=AUTH, timeout=30).json()
    assert [p["id"] for p in listed["results"]] == [pid] and listed["results"][0]["title"] == "Add <a>"
    c = requests.post(f"{base}/{pid}/comments", json={"body": "ok?"}, auth=AUTH, timeout=30)
    assert c.status_code == 201 and c.json()["body"] == "ok?"
    assert [x["body"] for x in requests.get(f"{base}/{pid}/comments", auth=AUTH, timeout=30).json()["results"]] == ["ok?"]
    # The caller opened it: approving one's own pull request is refused.
    expect_error(requests.post(f"{base}/{pid}/approvals", auth=AUTH, timeout=30), 412)
    assert requests.patch(f"{base}/{pid}", json={"status": "closed"}, auth=AUTH, timeout=30).status_code == 204
    assert requests.get(f"{base}/{pid}", auth=AUTH, timeout=30).json()["status"] == "closed"
    expect_error(requests.put(f"{base}/{pid}/merge", json={}, auth=AUTH, timeout=30), 412)
    assert requests.patch(f"{base}/{pid}", json={"status": "open", "title": "Add a"}, auth=AUTH, timeout=30).status_code == 204
    m = requests.put(f"{base}/{pid}/merge", json={}, auth=AUTH, timeout=30)
    assert m.status_code == 200, m.text
    got = requests.get(f"{base}/{pid}", auth=AUTH, timeout=30).json()
    assert got["status"] == "merged" and got["merged_commit_id"] == m.json()["reference"] and got["title"] == "Add a"
    expect_error(requests.get(f"{base}/999", auth=AUTH, timeout=30), 404)


def test_the_event_feed_as_server_sent_events(served: Served, repo_id: str) -> None:
    url = api(served, f"/repositories/{repo_id}/events")
    upload(served, repo_id, "main", "e.csv", b"e\n")
    assert commit(served, repo_id, "main", "feed me").status_code == 201
    r = requests.get(url, auth=AUTH, timeout=30)
    assert r.status_code == 200 and r.headers["Content-Type"] == "text/event-stream"
    blocks = [b for b in r.text.split("\n\n") if b.strip()]
    assert blocks[0] == "retry: 1000"
    lines = dict(line.split(": ", 1) for line in blocks[-1].splitlines())
    assert lines["event"] == "commit" and '"message": "feed me"' in lines["data"]
    last = lines["id"]
    # A reconnecting EventSource sends Last-Event-ID: only newer events come back.
    again = requests.get(url, auth=AUTH, headers={"Last-Event-ID": last}, timeout=30)
    assert [b for b in again.text.split("\n\n") if b.strip()] == ["retry: 1000"]
    requests.put(api(served, f"/repositories/{repo_id}/settings/branch_protection"), json=[{"pattern": "main"}], auth=AUTH, timeout=30)
    newer = requests.get(url, params={"after": last}, auth=AUTH, timeout=30).text
    assert "event: protection" in newer and '"patterns": ["main"]' in newer
    expect_error(requests.get(url, auth=AUTH, headers={"Last-Event-ID": "x"}, timeout=30), 400)
