"""``GET /metrics`` on a live ``lakemount serve`` with 2 gateway and 2 API workers: exact sums over the workers.

The counts are published by each worker every second, so the test polls until
they settle and then requires them to be exactly what it sent.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests
from botocore.exceptions import ClientError

from lakemount.serving import metrics
from tests.api.conftest import Served, running
from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET
from tests.serving.prometheus_text import Exposition, parse

GETS = 7
MISSES = 3
API_GETS = 4
BODY = b"m" * 1500


@pytest.fixture(scope="module")
def two_by_two(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with running(tmp_path_factory.mktemp("metrics"), gateway_workers=2, env={"LAKEMOUNT_API_WORKERS": "2"}) as s:
        yield s


def scrape(served: Served) -> Exposition:
    r = requests.get(served.api + "/metrics", timeout=30)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    return parse(r.text)


def settled(served: Served, ok: object, timeout: float = 60.0) -> Exposition:
    """Scrape until ``ok(exposition)`` holds (workers publish every second)."""
    deadline = time.monotonic() + timeout
    while True:
        exp = scrape(served)
        if ok(exp):  # type: ignore[operator]
            return exp
        if time.monotonic() > deadline:
            raise AssertionError(f"metrics never settled: {sorted(exp.samples.items())}")
        time.sleep(0.3)


def s3_count(exp: Exposition, op: str, status: int) -> float:
    return exp.value("lakemount_http_requests_total", server="s3", operation=op, status=str(status))


def snapshot_files(served: Served, server: str) -> list[str]:
    return sorted(n for n in os.listdir(metrics.directory(str(served.home))) if n.startswith(server + "-"))


def _until_both_workers_published(served: Served, server: str, hit: Callable[[], object]) -> None:
    """Send ``hit`` (a request on a fresh connection, of an operation the test does not count exactly) until both
    workers of ``server`` published a snapshot: they share one listening socket, so which one accepts is up to
    them, and on a loaded machine one took every counted request once (stop 51), leaving the sum over one."""
    deadline = time.monotonic() + 60
    while len(snapshot_files(served, server)) < 2:
        if time.monotonic() > deadline:
            raise AssertionError(f"a {server} worker served nothing in 60 s: {snapshot_files(served, server)}")
        hit()
        time.sleep(0.05)


def test_metrics_sum_both_servers_workers_exactly(two_by_two: Served) -> None:
    served = two_by_two
    _until_both_workers_published(served, "api", lambda: requests.get(f"{served.api}/api/v1/healthcheck", timeout=30))
    _until_both_workers_published(served, "s3", lambda: requests.get(f"{served.gateway.url}/", timeout=30))
    s3 = served.gateway.client()
    bucket = served.gateway.bucket(s3)
    s3.put_object(Bucket=bucket, Key="main/k", Body=BODY)
    for _ in range(GETS):
        # A fresh connection each time, so the kernel spreads them over the workers.
        assert requests.get(f"{served.gateway.url}/{bucket}/main/k", timeout=30,
                            headers=_signed(served, bucket)).status_code == 200
    for _ in range(MISSES):
        with pytest.raises(ClientError) as e:
            s3.get_object(Bucket=bucket, Key="main/missing")
        assert e.value.response["Error"]["Code"] == "NoSuchKey"
    for _ in range(API_GETS):
        r = requests.get(f"{served.api}/api/v1/repositories/{bucket}/refs/main/objects", params={"path": "k"},
                         auth=(ADMIN_KEY, ADMIN_SECRET), timeout=30)
        assert r.status_code == 200 and r.content == BODY
    r = requests.get(f"{served.api}/api/v1/repositories/{bucket}/refs/main/objects", params={"path": "k"}, timeout=30)
    assert r.status_code == 401

    def done(exp: Exposition) -> bool:
        # Every request counted somewhere: each worker publishes its own snapshot on its own clock, so the 401
        # (the last request) may reach the sum after the GETs did (it was 0 once, in a fast-tier run at load 15).
        return (s3_count(exp, "GetObject", 200) == GETS and s3_count(exp, "GetObject", 404) == MISSES
                and exp.value("lakemount_http_requests_total", server="api", operation="getObject", status="200") == API_GETS
                and exp.value("lakemount_http_requests_total", server="api", operation="getObject", status="401") >= 1
                and s3_count(exp, "PutObject", 200) >= 1 and s3_count(exp, "CreateBucket", 200) >= 1
                # A scrape before this one, counted (if the first scrape settled, none had finished yet).
                and exp.value("lakemount_http_requests_total", server="api", operation="metrics", status="200") >= 1)

    exp = settled(served, done)
    # Exact, not just reached: nothing else was counted under these labels.
    assert s3_count(exp, "PutObject", 200) == 1
    assert s3_count(exp, "CreateBucket", 200) == 1
    assert exp.value("lakemount_http_requests_total", server="api", operation="getObject", status="401") == 1
    for op, n in (("GetObject", GETS + MISSES), ("PutObject", 1)):
        assert exp.value("lakemount_http_request_duration_seconds_count", server="s3", operation=op) == n
        assert exp.value("lakemount_http_request_duration_seconds_bucket", server="s3", operation=op, le="+Inf") == n
    assert exp.value("lakemount_http_request_duration_seconds_count", server="api", operation="getObject") == API_GETS + 1
    # No label carries a path or a key.
    for (_name, labels) in exp.samples:
        for _k, v in labels:
            assert bucket not in v and "missing" not in v
    assert exp.value("lakemount_http_bytes_received_total", server="s3") >= len(BODY)
    assert exp.value("lakemount_http_bytes_sent_total", server="s3") >= GETS * len(BODY)
    assert exp.value("lakemount_http_bytes_sent_total", server="api") >= API_GETS * len(BODY)
    assert exp.value("lakemount_http_requests_in_flight", server="s3") == 0
    assert exp.value("lakemount_http_requests_in_flight", server="api") == 1  # this scrape
    assert exp.value("lakemount_http_requests_total", server="api", operation="metrics", status="200") >= 1
    # Each worker of each server published its own snapshot.
    assert len(snapshot_files(served, "s3")) == 2
    assert len(snapshot_files(served, "api")) == 2


def test_a_killed_worker_s_counts_survive_its_restart(two_by_two: Served) -> None:
    served = two_by_two
    s3 = served.gateway.client()
    s3.list_buckets()
    before = settled(served, lambda exp: s3_count(exp, "ListBuckets", 200) >= 1)
    files = snapshot_files(served, "s3")
    victim = int(files[0].removesuffix(".json").split("-")[2])
    # ``before`` was read from the published files (another process's counts come from its file), so what the
    # victim counted in it is on disk already: nothing to wait for before the kill.
    os.kill(victim, signal.SIGKILL)

    def restarted(exp: Exposition) -> bool:
        return len(snapshot_files(served, "s3")) == 3

    settled(served, restarted, timeout=30)
    s3.list_buckets()  # the restarted worker or the other one serves it
    after = settled(served, lambda exp: s3_count(exp, "ListBuckets", 200) == s3_count(before, "ListBuckets", 200) + 1)
    for (name, labels), value in before.samples.items():
        if name.endswith("_total") or name.endswith("_count") or name.endswith("_bucket"):
            assert after.samples.get((name, labels), 0) >= value, (name, labels)


def test_metrics_is_not_an_api_operation(two_by_two: Served) -> None:
    served = two_by_two
    doc = requests.get(f"{served.api}/api/v1/openapi.json", timeout=30).json()
    assert not [p for p in doc["paths"] if "metrics" in p]
    assert requests.post(served.api + "/metrics", timeout=30).status_code == 405


def test_api_metrics_false_serves_no_metrics(tmp_path: Path) -> None:
    with running(tmp_path, env={"LAKEMOUNT_API_METRICS": "false"}) as served:
        served.gateway.client().list_buckets()
        assert requests.get(served.api + "/metrics", timeout=30).status_code == 404
        assert not os.path.exists(metrics.directory(str(served.home))) or not os.listdir(metrics.directory(str(served.home)))


def _signed(served: Served, bucket: str) -> dict[str, str]:
    from tests.gateway.server_fixture import signed_headers

    return signed_headers("GET", f"{served.gateway.url}/{bucket}/main/k", {}, "UNSIGNED-PAYLOAD")
