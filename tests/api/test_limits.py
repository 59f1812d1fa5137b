"""What one request can make a live server hold is bounded: each "bomb" is refused (or cut short) with a clear
answer naming its limit, and the server keeps answering other requests while and after it lands.

docs/CONFIGURATION.md's "Limits" table lists every bound; this module proves those that one request of a
user with ordinary rights can reach through the servers.  The server runs with a few limits configured low
(``LIMITS``) so a bomb costs the test little; the preview bomb runs at the default page limit.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.client
import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from tests.api.conftest import Served, running
from tests.api.parquet_bombs import write_bomb
from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET

AUTH = (ADMIN_KEY, ADMIN_SECRET)
LIMITS = {"LAKEMOUNT_PULLS_MAX_COMMENTS": "3", "LAKEMOUNT_ACTIONS_MAX_FILES": "2", "LAKEMOUNT_ACTIONS_HOOKS_MAX_RUNNING": "1",
          "LAKEMOUNT_ACTIONS_HOOKS_MAX_WAIT": "0.5", "LAKEMOUNT_API_WORKERS": "1"}  # one process: its hook bound is the server's


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with running(tmp_path_factory.mktemp("limits"), env=LIMITS) as s:
        yield s
        log = s.gateway.log()
    assert "unexpected error serving" not in log, log[-5000:]


@pytest.fixture
def repo(served: Served) -> str:
    return str(served.repo().id)


def api(served: Served, path: str) -> str:
    return f"{served.api}/api/v1{path}"


def message(resp: requests.Response, status: int) -> str:
    assert resp.status_code == status, (resp.status_code, resp.text[:500])
    text = resp.json()["message"]
    assert isinstance(text, str) and "\n" not in text
    return text


@contextlib.contextmanager
def others_served(served: Served, repo: str) -> Iterator[list[float]]:
    """Ordinary GETs (an object's stat on the API, a HeadBucket on the gateway) in a loop while the block
    runs: every one must succeed, one after the block and, if the block took over a second, one while it
    ran; yields their durations."""
    requests.post(api(served, f"/repositories/{repo}/branches/main/objects"), params={"path": "ordinary.txt"},
                  data=b"ordinary", auth=AUTH, timeout=30).raise_for_status()
    s3 = served.gateway.client()
    stop = threading.Event()
    took: list[float] = []
    failures: list[BaseException] = []

    def one() -> None:
        t0 = time.monotonic()
        r = requests.get(api(served, f"/repositories/{repo}/refs/main/objects/stat"), params={"path": "ordinary.txt"},
                         auth=AUTH, timeout=20)
        assert r.status_code == 200 and r.json()["size_bytes"] == 8, r.text
        s3.head_bucket(Bucket=repo)
        took.append(time.monotonic() - t0)

    def loop() -> None:
        try:
            while not stop.is_set():
                one()
                time.sleep(0.05)
        except BaseException as exc:  # collected: a failed ordinary request fails the test
            failures.append(exc)

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    began = time.monotonic()
    try:
        yield took
    finally:
        during, lasted = len(took), time.monotonic() - began
        stop.set()
        t.join(60)
    assert not failures, failures
    assert not t.is_alive()
    assert during >= 1 or lasted < 1, f"no ordinary request was answered in the {lasted:.1f}s the bomb ran"
    one()  # and after it


def worker_peaks(served: Served) -> dict[int, int]:
    """VmHWM (peak resident bytes) of every process of the server (its process group)."""
    pgid = served.gateway.proc.pid
    peaks: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid:
                continue
            status = (stat.parent / "status").read_text()
        except (OSError, IndexError, ValueError):
            continue
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                peaks[int(stat.parent.name)] = int(line.split()[1]) * 1024
    return peaks


def test_a_parquet_page_bomb_is_refused_while_others_are_served(served: Served, repo: str, tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.parquet"
    assert write_bomb(bomb, 1, 512 << 20) < 64 * 1024  # 16 KiB on disk, one page of 512 MiB
    requests.post(api(served, f"/repositories/{repo}/branches/main/objects"), params={"path": "t/bomb.parquet"},
                  data=bomb.read_bytes(), auth=AUTH, timeout=30).raise_for_status()
    assert worker_peaks(served)
    with others_served(served, repo):
        for _ in range(3):  # every API worker may get one
            r = requests.get(api(served, f"/repositories/{repo}/refs/main/objects/preview"), params={"path": "t/bomb.parquet"},
                             auth=AUTH, timeout=120)
            assert r.status_code == 200, r.text
            got = r.json()
            assert got["kind"] == "parquet" and got["rows"] == [] and got["truncated"]
            assert "more than api.preview.max_page_bytes (67108864)" in got["message"]
    # The page was never allocated: no process of the server grew near its 512 MiB (it took 2.7 GB).
    assert max(worker_peaks(served).values()) < 400 << 20, worker_peaks(served)


def test_bodies_past_their_limits_are_refused_while_others_are_served(served: Served, repo: str) -> None:
    big = b'{"name": "x", "source": "' + b"m" * (64 << 20) + b'"}'
    s3 = served.gateway.client()
    with others_served(served, repo):
        # An API JSON body: 1 MiB (413), whether or not it says its length up front.
        r = requests.post(api(served, f"/repositories/{repo}/branches"), data=big, auth=AUTH, timeout=60,
                          headers={"Content-Type": "application/json"})
        assert "request body larger than 1048576 bytes" in message(r, 413)
        # (sent chunked, so no length is declared: the server counts; a small excess, so the client gets to read the answer)
        r = requests.post(api(served, f"/repositories/{repo}/branches"), data=iter([big[:1 << 20], big[1 << 20:(3 << 19)]]),
                          auth=AUTH, timeout=60, headers={"Content-Type": "application/json"})
        assert "request body larger than 1048576 bytes" in message(r, 413)
        # API deleteObjects: 1,000 paths.
        r = requests.post(api(served, f"/repositories/{repo}/branches/main/objects/delete"),
                          json={"paths": [f"p{i}" for i in range(1001)]}, auth=AUTH, timeout=60)
        assert "at most 1000 paths per request" in message(r, 400)
        # An upload: 5 GiB (413 before a byte of the body is stored).
        u = urlsplit(served.api)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        conn.putrequest("POST", f"/api/v1/repositories/{repo}/branches/main/objects?path=huge")
        conn.putheader("Authorization", "Basic " + base64.b64encode(f"{ADMIN_KEY}:{ADMIN_SECRET}".encode()).decode())
        conn.putheader("Content-Length", str(6 << 30))
        conn.endheaders(b"x")
        answer = conn.getresponse()
        assert answer.status == 413 and b"larger than" in answer.read()
        conn.close()
        # Gateway XML bodies: 4 MiB, 1,000 keys to delete, 10,000 parts.
        xml = b"<Delete>" + b"<Object><Key>k</Key></Object>" * ((5 << 20) // 29) + b"</Delete>"
        req = AWSRequest("POST", f"{served.gateway.url}/{repo}?delete", data=xml,
                         headers={"x-amz-content-sha256": hashlib.sha256(xml).hexdigest()})
        S3SigV4Auth(Credentials(ADMIN_KEY, ADMIN_SECRET), "s3", "us-east-1").add_auth(req)
        r = requests.post(req.url, data=xml, headers=dict(req.headers), timeout=60)
        assert r.status_code == 400 and b"<Code>MalformedXML</Code>" in r.content and b"larger than the maximum" in r.content
        with pytest.raises(ClientError) as info:
            s3.delete_objects(Bucket=repo, Delete={"Objects": [{"Key": f"main/k{i}"} for i in range(1001)]})
        assert info.value.response["Error"]["Code"] == "MalformedXML"
        upload = s3.create_multipart_upload(Bucket=repo, Key="main/mp")["UploadId"]
        etag = '"0123456789abcdef0123456789abcdef"'
        # 10,001 parts, each numbered 1-10000 (the last number twice): only the count is past its limit.
        parts = [{"PartNumber": i + 1, "ETag": etag} for i in range(10_000)] + [{"PartNumber": 10_000, "ETag": etag}]
        with pytest.raises(ClientError) as info:
            s3.complete_multipart_upload(Bucket=repo, Key="main/mp", UploadId=upload, MultipartUpload={"Parts": parts})
        error = info.value.response["Error"]
        assert error["Code"] == "MalformedXML" and "lists 1 to 10000 parts" in error["Message"], error
        # A part number past 10000 is refused by its own check.
        with pytest.raises(ClientError) as info:
            s3.complete_multipart_upload(Bucket=repo, Key="main/mp", UploadId=upload, MultipartUpload={
                "Parts": [{"PartNumber": 10_001, "ETag": etag}]})
        error = info.value.response["Error"]
        assert error["Code"] == "MalformedXML" and "PartNumber must be an integer from 1 to 10000" in error["Message"], error
        s3.abort_multipart_upload(Bucket=repo, Key="main/mp", UploadId=upload)


def test_s3_objects_past_their_limits_are_refused(served: Served, repo: str) -> None:
    s3 = served.gateway.client()
    with others_served(served, repo):
        with pytest.raises(ClientError) as info:  # user metadata: 2 KiB
            s3.put_object(Bucket=repo, Key="main/meta", Body=b"x", Metadata={"k": "v" * 3000})
        assert info.value.response["Error"]["Code"] == "MetadataTooLarge"
        # A PutObject declaring 6 GiB (the most is 5 GiB): refused before its body is read.
        req = AWSRequest("PUT", f"{served.gateway.url}/{repo}/main/huge", headers={"x-amz-content-sha256": "UNSIGNED-PAYLOAD"})
        S3SigV4Auth(Credentials(ADMIN_KEY, ADMIN_SECRET), "s3", "us-east-1").add_auth(req)
        u = urlsplit(served.gateway.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        conn.putrequest("PUT", f"/{repo}/main/huge", skip_host=True)
        for k, v in req.headers.items():
            conn.putheader(k, v)
        conn.putheader("Host", u.netloc)
        conn.putheader("Content-Length", str(6 << 30))
        conn.endheaders(b"x")
        answer = conn.getresponse()
        assert answer.status == 400 and b"<Code>EntityTooLarge</Code>" in answer.read()
        conn.close()
    with pytest.raises(ClientError):
        s3.head_object(Bucket=repo, Key="main/huge")


def test_listings_diffs_and_logs_are_pages(served: Served, repo: str) -> None:
    s3 = served.gateway.client()
    for i in range(1005):
        s3.put_object(Bucket=repo, Key=f"main/many/{i:05d}", Body=b"")
    with others_served(served, repo):
        # API listings, diffs and logs: at most 1000 a page; more is served as 1000 (lakeFS's clamp), never a bigger page.
        for path in ("/refs/main/objects/ls", "/branches/main/diff", "/refs/main/commits", "/branches", "/pulls"):
            r = requests.get(api(served, f"/repositories/{repo}{path}"), params={"amount": "100000"}, auth=AUTH, timeout=60)
            assert r.status_code == 200 and r.json()["pagination"]["max_per_page"] == 1000, (path, r.text[:300])
            assert len(r.json()["results"]) <= 1000, path
        r = requests.get(api(served, f"/repositories/{repo}/refs/main/objects/ls"), params={"amount": "1000"}, auth=AUTH, timeout=60)
        assert len(r.json()["results"]) == 1000 and r.json()["pagination"]["has_more"]
        r = requests.get(api(served, f"/repositories/{repo}/branches/main/diff"), params={"amount": "1000"}, auth=AUTH, timeout=60)
        assert len(r.json()["results"]) == 1000 and r.json()["pagination"]["has_more"]
        # S3 listings: max-keys above 1000 answers 1000 (as S3 does).
        page = s3.list_objects_v2(Bucket=repo, Prefix="main/many/", MaxKeys=100_000)
        assert page["KeyCount"] == 1000 and page["IsTruncated"]


def test_comments_and_action_files_past_their_limits(served: Served, repo: str) -> None:
    base = api(served, f"/repositories/{repo}")
    requests.post(base + "/branches", json={"name": "dev", "source": "main"}, auth=AUTH, timeout=30).raise_for_status()
    r = requests.post(base + "/pulls", json={"title": "t", "source_branch": "dev", "destination_branch": "main"}, auth=AUTH, timeout=30)
    assert r.status_code == 201, r.text
    pull = r.json()["id"]
    with others_served(served, repo):
        for i in range(3):
            requests.post(f"{base}/pulls/{pull}/comments", json={"body": f"c{i}"}, auth=AUTH, timeout=30).raise_for_status()
        r = requests.post(f"{base}/pulls/{pull}/comments", json={"body": "one more"}, auth=AUTH, timeout=30)
        assert f"pull request {pull} has 3 comments, the most pulls.max_comments allows" in message(r, 400)
        r = requests.get(f"{base}/pulls/{pull}/comments", params={"amount": "2"}, auth=AUTH, timeout=30)
        assert [c["body"] for c in r.json()["results"]] == ["c0", "c1"] and r.json()["pagination"]["next_offset"] == "2"
        r = requests.get(f"{base}/pulls/{pull}/comments", params={"after": "2"}, auth=AUTH, timeout=30)
        assert [c["body"] for c in r.json()["results"]] == ["c2"] and not r.json()["pagination"]["has_more"]
        # Action files: more than actions.max_files at the ref fails the pre-commit, naming the key.
        action = "name: n{i}\non: {{pre-commit: {{}}}}\nhooks: [{{id: c, type: lakemount_check, properties: {{max_size: 100}}}}]\n"
        for i in range(3):
            requests.post(base + "/branches/dev/objects", params={"path": f"_lakefs_actions/a{i}.yaml"},
                          data=action.format(i=i).encode(), auth=AUTH, timeout=30).raise_for_status()
        r = requests.post(base + "/branches/dev/commits", json={"message": "m"}, auth=AUTH, timeout=30)
        assert "more than 2 action files at dev (actions.max_files)" in message(r, 403)


def test_slow_or_greedy_webhooks_are_bounded(served: Served, repo: str) -> None:
    calls: list[float] = []
    release = threading.Event()

    class Slow(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            calls.append(time.monotonic())
            release.wait(120)  # held until the second commit has been refused: no race with the clock
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

    hooks = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    hooks.daemon_threads = True
    threading.Thread(target=hooks.serve_forever, daemon=True).start()
    base = api(served, f"/repositories/{repo}")
    url = f"http://127.0.0.1:{hooks.server_address[1]}/"
    try:
        greedy = f"name: greedy\non: {{pre-commit: {{branches: [main]}}}}\nhooks: [{{id: w, type: webhook, properties: {{url: '{url}', timeout: 2h}}}}]\n"
        slow = f"name: slow\non: {{pre-commit: {{branches: ['b*']}}}}\nhooks: [{{id: w, type: webhook, properties: {{url: '{url}', timeout: 5m}}}}]\n"
        for b in ("b1", "b2"):
            requests.post(base + "/branches", json={"name": b, "source": "main"}, auth=AUTH, timeout=30).raise_for_status()
        for branch, text in (("main", greedy), ("b1", slow), ("b2", slow)):
            requests.post(base + f"/branches/{branch}/objects", params={"path": "_lakefs_actions/hook.yaml"}, data=text.encode(),
                          auth=AUTH, timeout=30).raise_for_status()
        with others_served(served, repo):
            # A timeout over actions.webhook.max_timeout: the hook fails before connecting.
            r = requests.post(base + "/branches/main/commits", json={"message": "m"}, auth=AUTH, timeout=30)
            assert "webhook timeout 2h is more than actions.webhook.max_timeout (300s)" in message(r, 403)
            assert calls == []
            # Two commits at once, the first's webhook held until the second is answered, one hook at a time:
            # the second waits 0.5 s (actions.hooks.max_wait) and fails.
            answers: dict[str, requests.Response] = {}

            def commit(b: str) -> None:
                answers[b] = requests.post(base + f"/branches/{b}/commits", json={"message": "m", "allow_empty": True},
                                           auth=AUTH, timeout=60)

            first = threading.Thread(target=commit, args=("b1",))
            first.start()
            deadline = time.monotonic() + 60
            while not calls and time.monotonic() < deadline:
                time.sleep(0.05)
            assert calls, "the first commit's webhook never ran"
            commit("b2")
            release.set()
            first.join(60)
            assert not first.is_alive(), "the first commit never returned once its webhook answered"
        assert answers["b1"].status_code == 201, answers["b1"].text
        assert "not run: 1 hooks were already running in this process (actions.hooks.max_running)" in message(answers["b2"], 403)
        assert len(calls) == 1
    finally:
        release.set()
        hooks.shutdown()
        hooks.server_close()


def test_the_limits_table_names_real_keys_and_tests() -> None:
    import re

    from lakemount.config import keys

    root = Path(__file__).resolve().parents[2]
    doc = (root / "docs" / "CONFIGURATION.md").read_text()
    table = doc.split("## Limits", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:-1] for line in table.splitlines() if line.startswith("| ") and not line.startswith("| what")]
    assert len(rows) >= 20
    named = 0
    for what, _bound, set_by, _past, tests in rows:
        for key in re.findall(r"`([a-z_]+\.[a-z_.]+)`", set_by):
            if not key.endswith(".py"):
                assert key in keys(), (what, key)
        path = None
        for ref in re.findall(r"`([^`]+)`", tests):
            file, _, name = ref.rpartition("::")
            if file:
                path = root / "tests" / "api" / file if "/" not in file else root / file
            assert path is not None and path.exists(), (what, ref)
            if name or not file:
                assert re.search(rf"^def {re.escape(name or ref)}\(", path.read_text(), re.M), (what, ref)
                named += 1
    assert named >= 25
