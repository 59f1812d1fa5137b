"""Request metrics: the registry, its Prometheus text, the ASGI adapter's recording, and summing worker snapshots."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lakemount.serving import metrics
from lakemount.serving.asgi import AsgiApp
from lakemount.serving.http import Request, Response
from lakemount.serving.metrics import BUCKETS, Publisher, Registry
from tests.serving.prometheus_text import ExpositionError, parse


def test_render_is_prometheus_text_with_cumulative_buckets_and_counts() -> None:
    reg = Registry("s3")
    durations = [0.001, 0.004, 0.005, 0.02, 0.3, 3.0, 12.0]  # 0.005 falls in the le="0.005" bucket
    for seconds in durations:
        reg.started()
        reg.finished("GetObject", 200, 0, 4096, seconds)
    reg.started()
    reg.finished("GetObject", 404, 0, 300, 0.002)
    reg.started()
    reg.finished('we"ird\\op\n', 500, 10, 0, 0.1)
    reg.started()  # still in flight
    exp = parse(metrics.render([reg.snapshot()]))

    assert exp.types == {
        "lakemount_http_requests_total": "counter",
        "lakemount_http_request_duration_seconds": "histogram",
        "lakemount_http_bytes_received_total": "counter",
        "lakemount_http_bytes_sent_total": "counter",
        "lakemount_http_requests_in_flight": "gauge",
    }
    assert exp.value("lakemount_http_requests_total", server="s3", operation="GetObject", status="200") == len(durations)
    assert exp.value("lakemount_http_requests_total", server="s3", operation="GetObject", status="404") == 1
    assert exp.value("lakemount_http_requests_total", server="s3", operation='we"ird\\op\n', status="500") == 1
    buckets = {
        dict(labels)["le"]: v
        for labels, v in exp.series("lakemount_http_request_duration_seconds_bucket").items()
        if dict(labels)["operation"] == "GetObject"
    }
    assert len(buckets) == len(BUCKETS) + 1
    assert buckets["0.005"] == 4  # 0.001, 0.002, 0.004, 0.005
    assert buckets["0.025"] == 5
    assert buckets["5.0"] == 7
    assert buckets["10.0"] == 7
    assert buckets["+Inf"] == 8
    assert exp.value("lakemount_http_request_duration_seconds_count", server="s3", operation="GetObject") == 8
    total = sum(durations) + 0.002
    assert exp.value("lakemount_http_request_duration_seconds_sum", server="s3", operation="GetObject") == pytest.approx(total, abs=1e-5)
    assert exp.value("lakemount_http_bytes_sent_total", server="s3") == 7 * 4096 + 300
    assert exp.value("lakemount_http_bytes_received_total", server="s3") == 10
    assert exp.value("lakemount_http_requests_in_flight", server="s3") == 1


def test_the_test_parser_refuses_what_a_scraper_would() -> None:
    good = metrics.render([Registry("api").snapshot()])
    parse(good)
    for bad in (
        "x 1\n",  # no TYPE
        "# TYPE x counter\nx{a=\"1} 1\n",  # unterminated label
        "# TYPE x counter\nx 1\nx 2\n",  # a series twice
        "# TYPE x counter\nx one\n",
        "# TYPE h histogram\nh_bucket{le=\"1\"} 3\nh_bucket{le=\"+Inf\"} 2\nh_count 2\nh_sum 1\n",  # not cumulative
        "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_count 3\nh_sum 1\n",
        "# TYPE x counter\nx 1",  # no final newline
    ):
        with pytest.raises(ExpositionError):
            parse(bad)


class _Client:
    def __init__(self, body: bytes) -> None:
        self.body = body
        self.sent: list[dict[str, Any]] = []
        self.given = False

    async def receive(self) -> dict[str, Any]:
        if self.given:
            await asyncio.sleep(3600)
        self.given = True
        return {"type": "http.request", "body": self.body, "more_body": False}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)


def _serve(app: AsgiApp, method: str, body: bytes = b"") -> _Client:
    client = _Client(body)
    scope = {"type": "http", "method": method, "path": "/x", "raw_path": b"/x", "query_string": b"", "headers": [], "client": ("127.0.0.1", 1)}
    asyncio.run(asyncio.wait_for(app(scope, client.receive, client.send), 30))
    return client


def test_asgi_adapter_records_each_request_once_with_the_operation_the_core_named() -> None:
    def handler(req: Request) -> Response:
        if req.method == "PUT":
            data = b""
            while piece := req.body.read():
                data += piece
            return Response(201, [], b"ok", operation="PutThing")
        if req.method == "POST":
            raise RuntimeError("a core that raises is still counted")
        # A streamed body: the bytes sent are counted as they go.
        return Response(200, [], iter([b"a" * 1000, b"b" * 24]), length=1024, operation="GetThing")

    reg = Registry("s3")
    app = AsgiApp(handler, threads=2, metrics=reg)
    try:
        for _ in range(3):
            assert _serve(app, "GET").sent[0]["status"] == 200
        assert _serve(app, "PUT", b"z" * 5000).sent[0]["status"] == 201
        with pytest.raises(RuntimeError):
            _serve(app, "POST")
    finally:
        app.executor.shutdown(wait=True)
    snap = reg.snapshot()
    assert sorted(map(tuple, snap["requests"])) == [("GetThing", 200, 3), ("PutThing", 201, 1), ("unknown", 500, 1)]
    assert snap["received"] == 5000
    assert snap["sent"] == 3 * 1024 + 2
    assert snap["in_flight"] == 0
    assert sum(snap["latency"]["GetThing"][0]) == 3


def _write(home: Path, name: str, snap: dict[str, Any]) -> None:
    d = Path(metrics.directory(str(home)))
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_text(json.dumps(snap))


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _snap(server: str, pid: int, gets: int, in_flight: int = 0) -> dict[str, Any]:
    reg = Registry(server)
    for _ in range(gets):
        reg.started()
        reg.finished("GetObject", 200, 1, 100, 0.001)
    for _ in range(in_flight):
        reg.started()
    snap = reg.snapshot()
    snap["pid"] = pid
    return snap


def test_exposition_sums_workers_and_keeps_a_dead_workers_counts_but_not_its_in_flight(tmp_path: Path) -> None:
    me, dead = os.getpid(), _dead_pid()
    # Two live workers of this "supervisor" and one that died (restarted as the second).
    _write(tmp_path, f"s3-{me}-{me}.json", _snap("s3", me, 5, in_flight=2))
    _write(tmp_path, f"s3-{me}-{dead}.json", _snap("s3", dead, 7, in_flight=3))
    _write(tmp_path, f"api-{me}-{me}.json", _snap("api", me, 2))
    _write(tmp_path, f".api-{me}-{me}.json.tmp", _snap("api", me, 1000))  # a write in progress: not read
    exp = parse(metrics.exposition(str(tmp_path)))
    assert exp.value("lakemount_http_requests_total", server="s3", operation="GetObject", status="200") == 12
    assert exp.value("lakemount_http_request_duration_seconds_count", server="s3", operation="GetObject") == 12
    assert exp.value("lakemount_http_requests_total", server="api", operation="GetObject", status="200") == 2
    assert exp.value("lakemount_http_requests_in_flight", server="s3") == 2
    assert exp.value("lakemount_http_bytes_sent_total", server="s3") == 1200


def test_a_process_shows_its_own_registry_live_not_its_last_file(tmp_path: Path) -> None:
    code = (
        "import json, os, sys\n"
        "from lakemount.serving import metrics\n"
        "home = sys.argv[1]\n"
        "reg = metrics.registry('api')\n"
        "pub = metrics.Publisher(home, reg, interval=3600)\n"
        "pub.start()\n"
        "reg.started(); reg.finished('getObject', 200, 0, 5, 0.01)\n"
        "text = metrics.exposition(home)\n"
        "assert 'operation=\"getObject\",status=\"200\"} 1' in text, text\n"
        "on_disk = json.load(open(pub.path))\n"
        "assert on_disk['requests'] == [], on_disk  # published before the request, not since\n"
        "pub.close()\n"
        "assert json.load(open(pub.path))['requests'] == [['getObject', 200, 1]]\n"
        "print(os.path.basename(pub.path))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    # Named after the supervisor (here: this test process) and the worker.
    server, supervisor, worker = out.stdout.strip().removesuffix(".json").split("-")
    assert (server, int(supervisor)) == ("api", os.getpid()) and int(worker) != os.getpid()
    # The worker is gone: this process reads the final file.
    exp = parse(metrics.exposition(str(tmp_path)))
    assert exp.value("lakemount_http_requests_total", server="api", operation="getObject", status="200") == 1


def test_clear_stale_removes_files_of_dead_supervisors_and_its_own_earlier_run_only(tmp_path: Path) -> None:
    me, dead = os.getpid(), _dead_pid()
    parent = os.getppid()  # alive: another supervisor's files stay
    names = {
        f"s3-{dead}-{dead}.json": False,
        f".s3-{dead}-{dead}.json.tmp": False,
        f"s3-{me}-{dead}.json": False,  # this supervisor's previous run under the same pid
        f"api-{me}-{dead}.json": True,  # the other server of this process (serve runs both)
        f"s3-{parent}-{dead}.json": True,
        "notes.txt": True,
    }
    for name in names:
        _write(tmp_path, name, _snap("s3", dead, 1))
    metrics.clear_stale(str(tmp_path), "s3")
    assert sorted(os.listdir(metrics.directory(str(tmp_path)))) == sorted(n for n, keep in names.items() if keep)
    metrics.clear_stale(str(tmp_path / "nowhere"), "s3")  # no directory yet: nothing to do


def test_publisher_writes_only_when_something_changed(tmp_path: Path) -> None:
    reg = Registry("s3")
    pub = Publisher(str(tmp_path), reg, interval=3600)
    pub.start()
    try:
        first = os.stat(pub.path).st_mtime_ns
        os.utime(pub.path, ns=(1, 1))
        pub.publish()
        assert os.stat(pub.path).st_mtime_ns == 1  # unchanged: not rewritten
        reg.started()
        pub.publish()
        assert os.stat(pub.path).st_mtime_ns >= first
        assert json.loads(Path(pub.path).read_text())["in_flight"] == 1
    finally:
        pub.close()
    assert not [n for n in os.listdir(pub.dir) if n.endswith(".tmp")]
