"""Raw HTTP against a live API: bad input gets a 4xx JSON error (never a 500, never a partial object), auth, tokens."""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import socket
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests

from lakemount.api.auth import issue_token, signing_key
from lakemount.api.handler import server_key
from lakemount.catalog.writer import INLINE_MAX
from lakemount.serving import metrics
from lakemount.serving.asgi import BODY_IDLE_TIMEOUT, PULL_BYTES
from tests.api.conftest import Served
from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET

AUTH = (ADMIN_KEY, ADMIN_SECRET)


def api(served: Served, path: str) -> str:
    return f"{served.api}/api/v1{path}"


def expect_error(resp: requests.Response, status: int | tuple[int, ...]) -> str:
    statuses = (status,) if isinstance(status, int) else status
    assert resp.status_code in statuses, (resp.status_code, resp.text)
    assert resp.headers["Content-Type"] == "application/json"
    message = resp.json()["message"]
    assert isinstance(message, str) and message
    return message


def uncommitted(served: Served, repo: str) -> list[str]:
    r = requests.get(api(served, f"/repositories/{repo}/branches/main/diff"), auth=AUTH, timeout=30)
    assert r.status_code == 200
    return [d["path"] for d in r.json()["results"]]


def landing_files(served: Served, repo: str) -> list[str]:
    return [str(p) for p in (served.home / "data" / "ns" / repo).rglob(".tmp-*")]


@pytest.fixture
def repo_id(repo: Any) -> str:
    return str(repo.id)


def test_malformed_and_unexpected_json(served: Served, repo_id: str) -> None:
    url = api(served, f"/repositories/{repo_id}/branches")
    hdr = {"Content-Type": "application/json"}
    assert "malformed JSON" in expect_error(requests.post(url, data=b"{not json", headers=hdr, auth=AUTH), 400)
    assert "unknown field" in expect_error(
        requests.post(url, json={"name": "x", "source": "main", "color": "red"}, auth=AUTH), 400)
    assert "expected string" in expect_error(requests.post(url, json={"name": 5, "source": "main"}, auth=AUTH), 400)
    assert "missing required" in expect_error(requests.post(url, json={"name": "x"}, auth=AUTH), 400)
    expect_error(requests.post(url, json=["name", "x"], auth=AUTH), 400)
    expect_error(requests.post(url, data=b"\xff\xfe", headers=hdr, auth=AUTH), 400)
    expect_error(requests.post(url, data=b'{"name": "x", "source": "main"}', headers={"Content-Type": "text/plain"}, auth=AUTH), 415)
    big = json.dumps({"name": "x", "source": "main" + " " * (2 << 20)})
    expect_error(requests.post(url, data=big, headers=hdr, auth=AUTH), 413)
    # None of it made a branch.
    branches = requests.get(url, auth=AUTH, timeout=30).json()["results"]
    assert [b["id"] for b in branches] == ["main"]


def test_bad_refs_and_parameters(served: Served, repo_id: str) -> None:
    for ref in ("main~~x", "no-such-branch", "deadbeefdeadbeef", "main^9", "..", "a b"):
        expect_error(requests.get(api(served, f"/repositories/{repo_id}/refs/{ref}/commits"), auth=AUTH), (400, 404))
        expect_error(requests.get(api(served, f"/repositories/{repo_id}/refs/{ref}/objects/stat"), params={"path": "x"},
                                  auth=AUTH), (400, 404))
    expect_error(requests.get(api(served, f"/repositories/{repo_id}/refs/main/objects/ls"), params={"amount": "abc"}, auth=AUTH), 400)
    expect_error(requests.get(api(served, f"/repositories/{repo_id}/refs/main/objects/stat"), auth=AUTH), 400)
    expect_error(requests.get(api(served, f"/repositories/{repo_id}/refs/main/commits"), params={"since": "yesterday"}, auth=AUTH), 400)
    expect_error(requests.get(api(served, f"/repositories/{repo_id}/refs/main/diff/main"), params={"type": "four_dot"}, auth=AUTH), 400)
    expect_error(requests.get(api(served, "/no/such/thing"), auth=AUTH), 404)
    expect_error(requests.patch(api(served, f"/repositories/{repo_id}"), auth=AUTH), 405)
    expect_error(requests.get(f"{served.api}/elsewhere", auth=AUTH), 404)
    expect_error(requests.get(api(served, "/repositories/%2e%2e%2f%2e%2e%2fetc"), auth=AUTH), (400, 404))
    expect_error(requests.get(api(served, "/repositories/%ff"), auth=AUTH), 400)
    expect_error(requests.get(api(served, "/repositories") + "?prefix=%ff", auth=AUTH), 400)
    for ns in ("mem://x", "ftp://x/y", "local://relative", "://", "local:///dev/null/x"):
        expect_error(requests.post(api(served, "/repositories"), json={"name": "nsbad", "storage_namespace": ns}, auth=AUTH), 400)


@pytest.mark.parametrize("path", ["../etc/passwd", "a/../b", "./a", "a/./b", "/abs", "a\x00b", ""])
def test_path_traversal_refused(served: Served, repo_id: str, path: str) -> None:
    url = api(served, f"/repositories/{repo_id}/branches/main/objects")
    expect_error(requests.post(url, params={"path": path}, data=b"data", auth=AUTH), 400)
    expect_error(requests.get(api(served, f"/repositories/{repo_id}/refs/main/objects"), params={"path": path}, auth=AUTH), 400)
    assert uncommitted(served, repo_id) == []


def test_upload_refused_before_anything_is_stored(served: Served, repo_id: str) -> None:
    url = api(served, f"/repositories/{repo_id}/branches/main/objects")
    u = urlsplit(served.api)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    conn.putrequest("POST", f"/api/v1/repositories/{repo_id}/branches/main/objects?path=x")
    conn.putheader("Authorization", "Basic " + base64.b64encode(f"{ADMIN_KEY}:{ADMIN_SECRET}".encode()).decode())
    conn.putheader("Content-Length", str(6 << 30))
    conn.endheaders(b"data")
    resp = conn.getresponse()
    assert resp.status == 413 and json.loads(resp.read())["message"]
    conn.close()
    form = b"--XX\r\nContent-Disposition: form-data; name=\"content\"\r\n\r\npartial data without an end"
    expect_error(requests.post(url, params={"path": "y"}, data=form, auth=AUTH,
                               headers={"Content-Type": "multipart/form-data; boundary=XX"}), 400)
    wrong_field = b"--XX\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\nz\r\n--XX--\r\n"
    expect_error(requests.post(url, params={"path": "y"}, data=wrong_field, auth=AUTH,
                               headers={"Content-Type": "multipart/form-data; boundary=XX"}), 400)
    expect_error(requests.post(url, params={"path": "y"}, data=b"abc", auth=AUTH,
                               headers={"Content-Type": "multipart/form-data"}), 400)
    expect_error(requests.post(api(served, f"/repositories/{repo_id}/branches/nobranch/objects"), params={"path": "y"},
                               data=b"abc", auth=AUTH), 404)
    assert uncommitted(served, repo_id) == []
    assert landing_files(served, repo_id) == []


def upload_endings(served: Served) -> tuple[dict[int, int], int, int]:
    """The API workers' published counts: uploadObject requests ended, by status; body bytes received;
    requests in flight.

    Read from the snapshot files, not from ``/metrics``: that adds the live counts of the worker serving it
    to the others' published ones, so two scrapes served by two workers may go back by what one of them
    has not published yet (a drop counted twice in the second of two drops, once in a loop of 20).
    The files alone only grow.
    """
    ended: dict[int, int] = {}
    received = in_flight = 0
    folder = Path(metrics.directory(str(served.home)))
    for path in folder.glob("api-*.json"):
        with contextlib.suppress(FileNotFoundError):  # a worker's snapshot is replaced by a rename
            snap = json.loads(path.read_text())
            for op, status, n in snap["requests"]:
                if op == "uploadObject":
                    ended[status] = ended.get(status, 0) + n
            received += snap["received"]
            in_flight += snap["in_flight"]
    return ended, received, in_flight


def test_client_dropping_mid_upload_leaves_nothing(served: Served, repo_id: str) -> None:
    u = urlsplit(served.api)
    auth = base64.b64encode(f"{ADMIN_KEY}:{ADMIN_SECRET}".encode()).decode()
    for ctype in ("application/octet-stream", "multipart/form-data; boundary=B"):
        ended_before, received_before, _ = upload_endings(served)
        with socket.create_connection((u.hostname, u.port)) as s:
            s.sendall(
                f"POST /api/v1/repositories/{repo_id}/branches/main/objects?path=dropped HTTP/1.1\r\n"
                f"Host: {u.netloc}\r\nAuthorization: Basic {auth}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {64 << 20}\r\n\r\n".encode()
            )
            if ctype.startswith("multipart"):
                s.sendall(b'--B\r\nContent-Disposition: form-data; name="content"\r\n\r\n')
            s.sendall(b"x" * (4 << 20))
        # What is checked is the server's end of the request (its published metrics), not the landing file:
        # a wait for the file to go passed at once when the server had not made it yet, which under load was
        # 40% of the drops. The request ended once its count moved with more body bytes than any other request
        # of the module sends (the drop's own: a small upload of an earlier test published late cannot pass for
        # it); its handler has returned, so the writer's block has been left and its landing file removed:
        # nothing is waited for after that. The deadline only bounds a failure; a server that missed the drop
        # would end the request after BODY_IDLE_TIMEOUT (408).
        deadline = time.monotonic() + BODY_IDLE_TIMEOUT + 60
        while True:
            ended, received, in_flight = upload_endings(served)
            new = {status: n - ended_before.get(status, 0) for status, n in ended.items() if n != ended_before.get(status, 0)}
            got = received - received_before
            if (new and got > INLINE_MAX + PULL_BYTES) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        left = landing_files(served, repo_id)
        # The drop met a body on its way to a landing file: past INLINE_MAX once the pump's last, partial piece is lost.
        assert new and got > INLINE_MAX + PULL_BYTES, (
            f"the server never ended the dropped upload ({ctype}) in {BODY_IDLE_TIMEOUT + 60:g} s with the body on "
            f"its way to a landing file: uploadObject requests ended since {new} (status: count), body bytes "
            f"received {got} (a landing file from {INLINE_MAX + PULL_BYTES}), requests in flight {in_flight}, "
            f"landing files {left}; server log: {served.gateway.log()[-3000:]}"
        )
        assert 400 in new and 408 not in new, (
            f"the dropped upload ({ctype}) was not ended as a drop (400): ended since {new} (status: count); 408 is "
            f"the server missing the drop and giving the body up after {BODY_IDLE_TIMEOUT:g} s; landing files {left}"
        )
        assert left == [], (
            f"the server ended the dropped upload ({ctype}) as a drop (400), so its writer's block was left, and the "
            f"landing files {left} remain: the block did not remove them"
        )
        assert uncommitted(served, repo_id) == []
    r = requests.get(api(served, f"/repositories/{repo_id}/refs/main/objects/stat"), params={"path": "dropped"}, auth=AUTH)
    expect_error(r, 404)


def test_login_tokens_and_cookies(served: Served, repo_id: str) -> None:
    r = requests.post(api(served, "/auth/login"), json={"access_key_id": ADMIN_KEY, "secret_access_key": ADMIN_SECRET})
    assert r.status_code == 200
    token = r.json()["token"]
    assert r.json()["token_expiration"] > time.time()
    assert r.cookies.get("internal_auth_session") == token
    bearer = {"Authorization": f"Bearer {token}"}
    assert requests.get(api(served, f"/repositories/{repo_id}"), headers=bearer).status_code == 200
    assert requests.get(api(served, f"/repositories/{repo_id}"), cookies={"internal_auth_session": token}).status_code == 200
    assert requests.get(api(served, "/user"), headers=bearer).json()["user"]["id"] == "admin"

    expect_error(requests.post(api(served, "/auth/login"), json={"access_key_id": ADMIN_KEY, "secret_access_key": "wrong"}), 401)
    expect_error(requests.post(api(served, "/auth/login"), json={"access_key_id": "AKIANOPE", "secret_access_key": "x"}), 401)
    head, payload, sig = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    claims["sub"] = "someone-else"
    forged_payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    key = signing_key(server_key(served.gateway.app()))
    expired, _ = issue_token(key, "admin", ADMIN_KEY, now=time.time() - 2 * 86400)
    alien, _ = issue_token(b"not the server key", "admin", ADMIN_KEY)
    for bad in (f"{head}.{forged_payload}.{sig}", expired, alien, "garbage", "a.b.c", token[:-4]):
        expect_error(requests.get(api(served, f"/repositories/{repo_id}"), headers={"Authorization": f"Bearer {bad}"}), 401)
        expect_error(requests.get(api(served, f"/repositories/{repo_id}"), cookies={"internal_auth_session": bad}), 401)
    expect_error(requests.get(api(served, f"/repositories/{repo_id}")), 401)
    expect_error(requests.get(api(served, f"/repositories/{repo_id}"), auth=(ADMIN_KEY, "wrong")), 401)
    expect_error(requests.get(api(served, f"/repositories/{repo_id}"), headers={"Authorization": "Basic !!!"}), 401)
    expect_error(requests.get(api(served, f"/repositories/{repo_id}"), headers={"Authorization": "Digest x"}), 401)
    # A valid token of a user that was deleted stops working.
    key_id, secret = served.gateway.user("shortlived", "Developer")
    t = requests.post(api(served, "/auth/login"), json={"access_key_id": key_id, "secret_access_key": secret}).json()["token"]
    assert requests.get(api(served, "/repositories"), headers={"Authorization": f"Bearer {t}"}).status_code == 200
    assert requests.delete(api(served, "/auth/users/shortlived"), auth=AUTH).status_code == 204
    time.sleep(5.5)  # past the per-process cache of live users
    expect_error(requests.get(api(served, "/repositories"), headers={"Authorization": f"Bearer {t}"}), 401)
    # Public endpoints.
    assert requests.get(api(served, "/healthcheck")).status_code == 204
    assert requests.get(api(served, "/openapi.json")).json()["openapi"].startswith("3.")
    expect_error(requests.get(api(served, "/config")), 401)


def test_rbac_on_every_kind_of_endpoint(served: Served, repo: Any) -> None:
    key, secret = served.gateway.user("analyst1", "Analyst")
    a = (key, secret)
    rid = repo.id
    assert requests.get(api(served, f"/repositories/{rid}/refs/main/objects/ls"), auth=a).status_code == 200
    assert requests.get(api(served, "/repositories"), auth=a).status_code == 200
    denied = [
        ("post", f"/repositories/{rid}/branches", {"json": {"name": "x", "source": "main"}}),
        ("post", f"/repositories/{rid}/branches/main/objects?path=x", {"data": b"x"}),
        ("delete", f"/repositories/{rid}/branches/main/objects?path=x", {}),
        ("post", f"/repositories/{rid}/branches/main/commits", {"json": {"message": "m"}}),
        ("post", f"/repositories/{rid}/refs/main/merge/main", {"json": {}}),
        ("post", f"/repositories/{rid}/tags", {"json": {"id": "t", "ref": "main"}}),
        ("delete", f"/repositories/{rid}", {}),
        ("post", "/repositories", {"json": {"name": "nope", "storage_namespace": "local:///tmp/nope"}}),
        ("get", "/auth/users", {}),
        ("post", "/auth/users", {"json": {"id": "mallory"}}),
        ("get", "/auth/policies", {}),
        ("put", "/auth/users/analyst1/policies/Admin", {}),
        ("get", "/auth/users/admin/credentials", {}),
    ]
    for method, path, kw in denied:
        expect_error(getattr(requests, method)(api(served, path), auth=a, **kw), 403)
    # Their own credentials they may manage (ManageOwnCredentials).
    r = requests.post(api(served, "/auth/users/analyst1/credentials"), auth=a)
    assert r.status_code == 201 and r.json()["secret_access_key"]
    listed = requests.get(api(served, "/auth/users/analyst1/credentials"), auth=a).json()["results"]
    assert {c["access_key_id"] for c in listed} == {key, r.json()["access_key_id"]}
    # A Deny on this repository wins over Analyst's allow.
    pol = {"id": f"deny-{rid}", "statement": [{"effect": "deny", "action": ["ReadRepo"], "resource": f"arn:lakefs:fs:::repository/{rid}"}]}
    assert requests.post(api(served, "/auth/policies"), json=pol, auth=AUTH).status_code == 201
    assert requests.put(api(served, f"/auth/users/analyst1/policies/deny-{rid}"), auth=AUTH).status_code == 201
    time.sleep(5.5)  # decisions are cached for 5 s per process
    expect_error(requests.get(api(served, f"/repositories/{rid}/refs/main/objects/ls"), auth=a), 403)
    assert rid not in [x["id"] for x in requests.get(api(served, "/repositories"), auth=a).json()["results"]]


def test_users_policies_credentials_through_the_generated_client(served: Served, client: Any) -> None:
    import lakefs_sdk

    sdk = client.sdk_client
    sdk.auth_api.create_user(lakefs_sdk.UserCreation(id="dora"))
    assert "dora" in [u.id for u in sdk.auth_api.list_users().results]
    creds = sdk.auth_api.create_credentials("dora")
    assert creds.secret_access_key
    assert sdk.auth_api.get_credentials("dora", creds.access_key_id).access_key_id == creds.access_key_id
    sdk.auth_api.attach_policy_to_user("dora", "Developer")
    assert [p.id for p in sdk.auth_api.list_user_policies("dora").results] == ["Developer"]
    policies = {p.id: p for p in sdk.auth_api.list_policies().results}
    assert {"Admin", "Developer", "Analyst"} <= set(policies)
    assert sdk.auth_api.list_user_groups("dora").results == []
    dora = served.client(creds.access_key_id, creds.secret_access_key)
    assert dora.version == "1.50.0"
    with pytest.raises(lakefs_sdk.exceptions.ApiException) as e:
        sdk.auth_api.create_user(lakefs_sdk.UserCreation(id="dora"))
    assert e.value.status == 409
    with pytest.raises(lakefs_sdk.exceptions.NotFoundException):
        sdk.auth_api.get_user("nobody")
    sdk.auth_api.detach_policy_from_user("dora", "Developer")
    sdk.auth_api.delete_credentials("dora", creds.access_key_id)
    sdk.auth_api.delete_user("dora")
    assert "dora" not in [u.id for u in sdk.auth_api.list_users().results]


def test_item9_revert_honours_allow_empty(served: Served, repo_id: str) -> None:
    """RevertCreation.allow_empty (lakeFS's field) is not ignored: without it an empty revert is refused."""
    base = api(served, f"/repositories/{repo_id}")
    r = requests.post(f"{base}/branches/main/objects", params={"path": "x"}, files={"content": b"1"}, auth=AUTH, timeout=30)
    assert r.status_code == 201, r.text
    assert requests.post(f"{base}/branches/main/commits", json={"message": "one"}, auth=AUTH, timeout=30).status_code == 201
    assert requests.post(f"{base}/branches/main/revert", json={"ref": "main", "parent_number": 0}, auth=AUTH,
                         timeout=30).status_code == 204
    again = {"ref": "main~1", "parent_number": 0}
    expect_error(requests.post(f"{base}/branches/main/revert", json=again, auth=AUTH, timeout=30), (400, 409, 412))
    head = requests.get(f"{base}/branches/main", auth=AUTH, timeout=30).json()["commit_id"]
    r = requests.post(f"{base}/branches/main/revert", json={**again, "allow_empty": True}, auth=AUTH, timeout=30)
    assert r.status_code == 204, r.text
    assert requests.get(f"{base}/branches/main", auth=AUTH, timeout=30).json()["commit_id"] != head


def test_branch_names_that_look_like_commit_ids(served: Served, repo: Any) -> None:
    # lakeFS's branch names are ^\w[-\w]*$, hex ones included: getBranch and deleteBranch of a missing one
    # are 404 and createBranch makes it (201); only a name that is an existing commit's id is a 409.
    import lakefs
    from lakefs.exceptions import ConflictException, NotFoundException

    base = f"/repositories/{repo.id}/branches"
    head = requests.get(api(served, f"{base}/main"), auth=AUTH, timeout=30).json()["commit_id"]
    for name in ("f" * 40, "f" * 64, "abc123", head[:12]):
        expect_error(requests.get(api(served, f"{base}/{name}"), auth=AUTH, timeout=30), 404)
        expect_error(requests.delete(api(served, f"{base}/{name}"), auth=AUTH, timeout=30), 404)
        r = requests.post(api(served, base), json={"name": name, "source": "main"}, auth=AUTH, timeout=30)
        assert (r.status_code, r.text) == (201, head)
        assert requests.get(api(served, f"{base}/{name}"), auth=AUTH, timeout=30).json()["id"] == name
        assert requests.delete(api(served, f"{base}/{name}"), auth=AUTH, timeout=30).status_code == 204
    assert "commit" in expect_error(
        requests.post(api(served, base), json={"name": head, "source": "main"}, auth=AUTH, timeout=30), 409)
    with pytest.raises(NotFoundException):
        lakefs.Branch(repo.id, "a" * 40, client=repo._client).get_commit()
    # Writes through a commit id, a tag or main@ under /branches/{branch}: lakeFS finds no such branch (404).
    requests.post(api(served, f"/repositories/{repo.id}/tags"), json={"id": "v1", "ref": "main"}, auth=AUTH, timeout=30)
    for ref in (head, head[:12], "v1", "main@"):
        for method, path, kw in (
            ("POST", "commits", {"json": {"message": "m"}}),
            ("POST", "objects", {"params": {"path": "x"}, "data": b"x"}),
            ("DELETE", "objects", {"params": {"path": "x"}}),
            ("POST", "revert", {"json": {"ref": "main", "parent_number": 0}}),
        ):
            r = requests.request(method, api(served, f"{base}/{ref}/{path}"), auth=AUTH, timeout=30, **kw)
            assert "branch not found" in expect_error(r, 404), (ref, method, path)
    with pytest.raises(NotFoundException):
        lakefs.Branch(repo.id, "v1", client=repo._client).commit("through a tag")
    with pytest.raises(ConflictException):
        lakefs.Branch(repo.id, head, client=repo._client).create("main")


def _send_head(url: str, header_bytes: int) -> bytes:
    """Send a GET whose one header has ``header_bytes`` bytes; what the server answered (b'' if it cut the connection)."""
    host, port = urlsplit(url).hostname, urlsplit(url).port
    with socket.create_connection((host, port), timeout=30) as s:
        try:
            s.sendall(b"GET /api/v1/healthcheck HTTP/1.1\r\nHost: x\r\nX-Big: ")
            chunk = b"a" * 65536
            for _ in range(header_bytes // len(chunk)):
                s.sendall(chunk)
            s.sendall(b"\r\nConnection: close\r\n\r\n")
            return s.recv(64)
        except (ConnectionResetError, BrokenPipeError):
            return b""


@pytest.mark.parametrize("which", ["api", "gateway"])
def test_a_huge_request_header_is_cut_off(served: Served, which: str) -> None:
    # httptools buffered a header that never ended: 64 MiB of header grew a worker by 64 MiB.
    url = served.api if which == "api" else served.gateway.url
    assert _send_head(url, 512 * 1024).startswith((b"HTTP/1.1 204", b"HTTP/1.1 403", b"HTTP/1.1 404"))
    t0 = time.monotonic()
    answer = _send_head(url, 32 << 20)
    assert answer in (b"", ) or answer.startswith(b"HTTP/1.1 431"), answer
    assert time.monotonic() - t0 < 20
    assert _send_head(url, 0).startswith((b"HTTP/1.1 204", b"HTTP/1.1 403", b"HTTP/1.1 404"))


def test_every_listing_reads_amount_the_same_way(served: Served, repo_id: str) -> None:
    """``amount=-1`` was a 200 (a page of 100) while ``amount=100000000`` was a 400: both ask for a lot. Every
    listing now takes any integer: none, 0 or less is 100, more than 1000 is served as 1000 (max_per_page)."""
    from lakemount.app import App
    from lakemount.config import load

    app = App(load(None, env={"LAKEMOUNT_HOME": str(served.home)}))
    try:
        entry = app.catalog.put(repo_id, "main", "seed", b"x")
        app.catalog.apply(repo_id, "main", [(f"many/{i:05d}", entry) for i in range(1001)])
    finally:
        app.release_connections()
    ls = api(served, f"/repositories/{repo_id}/refs/main/objects/ls")
    for amount, size in (("-1", 100), ("0", 100), ("-5", 100), ("", 100), ("7", 7), ("1000", 1000), ("1001", 1000),
                         ("100000000", 1000), (str(1 << 62), 1000)):
        r = requests.get(ls, params={"prefix": "many/", "amount": amount}, auth=AUTH, timeout=30)
        assert r.status_code == 200, (amount, r.text)
        page = r.json()
        assert len(page["results"]) == size and page["pagination"]["has_more"], amount
        assert page["pagination"]["max_per_page"] == 1000
    assert expect_error(requests.get(ls, params={"amount": "abc"}, auth=AUTH), 400) == "query parameter 'amount' must be an integer"
    listings = [f"/repositories/{repo_id}/{p}" for p in (
        "branches", "tags", "refs/main/commits", "refs/main/diff/main", "branches/main/diff", "pulls", "actions/runs")]
    listings += ["/repositories", "/auth/users", "/auth/groups", "/auth/policies", "/auth/users/admin/credentials"]
    for path in listings:
        for amount in ("-1", "100000000"):
            r = requests.get(api(served, path), params={"amount": amount}, auth=AUTH, timeout=30)
            assert r.status_code == 200, (path, amount, r.text)
            assert r.json()["pagination"]["max_per_page"] == 1000, path


def test_every_paginated_operation_declares_the_one_amount() -> None:
    from pathlib import Path

    import lakemount.api
    from lakemount.api.routes import ROUTES
    from lakemount.api.routing import AMOUNT

    declared = [(op.operation_id, p) for op in ROUTES for p in op.params if p.name == "amount"]
    assert len(declared) >= 18 and all(p is AMOUNT for _op, p in declared), declared
    # ... and only Ctx.page_size reads it (routing.py declares it), in api/ and its operations/.
    readers = [f.name for f in Path(lakemount.api.__file__).parent.rglob("*.py") if '"amount"' in f.read_text()]
    assert sorted(readers) == ["context.py", "routing.py"]


def test_a_refused_rule_change_names_what_was_refused_and_the_permissions_say_it_first(served: Served, repo_id: str) -> None:
    """A read-only user changing branch protection was told "may not DeleteRepo", an action they never tried;
    the refusal names the operation, the action that grants it and lakeFS's name for it. The UI learns the
    same decisions beforehand from getRepositoryPermissions."""
    key, secret = served.gateway.user("reader23", "Analyst")
    reader = (key, secret)
    base = api(served, f"/repositories/{repo_id}/settings")
    for method, path, kw in (("put", "/branch_protection", {"json": [{"pattern": "main"}]}),
                             ("put", "/gc_rules", {"json": {"default_retention_days": 7, "branches": []}}),
                             ("delete", "/gc_rules", {})):
        message = expect_error(getattr(requests, method)(base + path, auth=reader, timeout=30, **kw), 403)
        what = "branch protection" if "protection" in path else "garbage collection"
        assert message.startswith(f"insufficient permissions: reader23 may not change the {what} rules on repository {repo_id}: "
                                  "that needs DeleteRepo ("), message
    message = expect_error(requests.post(api(served, f"/repositories/{repo_id}/branch_protection"), json={"pattern": "x"},
                                         auth=reader, timeout=30), 403)
    assert "branches:SetBranchProtectionRules" in message
    # Every other refusal still names its action.
    assert expect_error(requests.delete(api(served, f"/repositories/{repo_id}"), auth=reader, timeout=30), 403).endswith(
        f"may not DeleteRepo on repository {repo_id}")
    perms = api(served, f"/repositories/{repo_id}/permissions")
    assert requests.get(perms, auth=reader, timeout=30).json() == {
        "user": "reader23", "repository": repo_id, "actions": {"ReadRepo": True, "WriteRepo": False, "DeleteRepo": False,
                                                          "ImportFromStorage": False}}
    assert requests.get(perms, auth=AUTH, timeout=30).json()["actions"] == {"ReadRepo": True, "WriteRepo": True, "DeleteRepo": True,
                                                                                 "ImportFromStorage": True}
    expect_error(requests.get(api(served, "/repositories/no-such-repo/permissions"), auth=AUTH, timeout=30), 404)
