"""Faults: kill -9 loses at most one flush interval and the next process says so; a failing or hanging store
drops records (counted) and never fails or slows the data path; a full buffer drops, counted."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from lakemount.audit import log as audit_log
from lakemount.audit.table import Filter, files
from lakemount.block.flaky import FaultKind, FlakyAdapter
from tests.gateway.server_fixture import start_gateway
from tests.gateway.test_server_core import call

from .conftest import Lake


def _wait(cond, timeout: float = 30.0, what: str = "") -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def test_kill_9_loses_at_most_one_interval_and_the_restart_counts_it(tmp_path: Path) -> None:
    flush_s = 0.5
    gw = start_gateway(tmp_path, workers=1, env={"LAKEMOUNT_AUDIT_FLUSH_S": str(flush_s)})
    try:
        s3 = gw.client()
        s3.create_bucket(Bucket="kill9")
        s3.put_object(Bucket="kill9", Key="main/before", Body=b"1")
        app = gw.app()
        ns = app.catalog.repository("kill9").storage_namespace
        _wait(lambda: any("before" == r.path for r in app.catalog.audit_records("kill9", Filter())), what="a flush")
        # The worker that wrote it names itself in its file names: <host>-<pid>-<seq>.parquet.
        worker = int(files(app.adapter, ns)[0].rsplit("/", 1)[1].split("-")[-2])
        assert worker != gw.proc.pid and os.path.exists(f"/proc/{worker}")
        assert audit_log.collect(str(gw.home))["lost_intervals"] == 0
        s3.get_object(Bucket="kill9", Key="main/before")["Body"].read()
        os.kill(worker, signal.SIGKILL)
        _wait(lambda: not os.path.exists(f"/proc/{worker}") or open(f"/proc/{worker}/stat").read().split()[2] == "Z",
              what="the worker's death")
        # The supervisor starts a new worker, whose audit log finds the dead one's open marker.
        _wait(lambda: audit_log.collect(str(gw.home))["lost_intervals"] >= 1, what="the loss to be counted")
        assert audit_log.collect(str(gw.home))["lost_intervals"] == 1
        assert "ended without flushing its audit trail" in gw.log()
        s3.put_object(Bucket="kill9", Key="main/after", Body=b"22")  # served by the new worker
        s3.put_object(Bucket="kill9", Key="main/last", Body=b"333")
    finally:
        gw.stop()
    assert gw.proc.returncode is not None
    # A clean stop flushes what was pending and removes its markers: nothing more counted lost.
    paths = [r.path for r in app.catalog.audit_records("kill9", Filter(op="PutObject"))]
    assert paths[0] == "before" and paths[-2:] == ["after", "last"]
    assert not os.listdir(os.path.join(audit_log.run_dir(str(gw.home)), "open"))
    assert audit_log.collect(str(gw.home))["lost_intervals"] == 1


def test_a_failing_store_drops_records_counted_and_the_data_path_is_unaffected(lake: Lake) -> None:
    log = lake.app.audit
    assert log is not None
    assert call(lake.gw, "PUT", "/flaky").status == 200
    assert call(lake.gw, "PUT", "/flaky/main/a", b"abc").status == 200
    log.flush()
    flaky = FlakyAdapter(log.adapter)
    log.adapter = flaky
    flaky.fail_next("put", 1)
    for _ in range(5):
        assert call(lake.gw, "GET", "/flaky/main/a").status == 200
    assert log.flush() == 0
    assert flaky.injected["put"] == 1  # the fault landed, on the audit write
    assert log.counters["dropped"] == 5
    assert call(lake.gw, "GET", "/flaky/main/a").status == 200
    assert log.flush() == 1  # healed: the trail resumes
    assert [r.op for r in lake.records("flaky")] == ["PutObject", "GetObject"]


class _Hanging:
    """A store whose ``put`` hangs until ``release`` is set (at most two minutes), then goes on to ``inner``."""

    def __init__(self, inner: FlakyAdapter) -> None:
        self.inner = inner
        self.entered, self.release = threading.Event(), threading.Event()
        self.inside = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def put(self, url: str, data: bytes) -> None:
        self.inside += 1
        self.entered.set()
        try:
            self.release.wait(120)
            self.inner.put(url, data)
        finally:
            self.inside -= 1


def test_a_hanging_store_never_slows_a_request(lake: Lake) -> None:
    """The audit store hangs until the requests are done (not for a fixed time they must beat): 20 requests
    answered while the flusher is still inside the hung write never waited for it, however slow the machine."""
    log = lake.app.audit
    assert log is not None
    assert call(lake.gw, "PUT", "/hang").status == 200
    flaky = FlakyAdapter(log.adapter)
    hanging = _Hanging(flaky)
    log.adapter = hanging  # type: ignore[assignment]
    flaky.fail_next("put", 1, kind=FaultKind.TIMEOUT)  # once released, the hung write fails
    call(lake.gw, "PUT", "/hang/main/a", b"x")
    log._wake.set()  # the flusher now hangs in the store
    try:
        assert hanging.entered.wait(30), "the flusher never reached the store"
        answered: list[int] = []
        errors: list[BaseException] = []

        def requests() -> None:
            try:
                for _ in range(20):
                    answered.append(call(lake.gw, "GET", "/hang/main/a").status)
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                errors.append(exc)

        t = threading.Thread(target=requests, daemon=True)
        t.start()
        t.join(60)
        assert not t.is_alive(), f"the requests waited for the hanging store: {len(answered)} of 20 answered in 60 s"
        assert not errors, errors
        assert answered == [200] * 20
        assert hanging.inside == 1 and flaky.calls["put"] == 0  # the flusher is still in the hung write
    finally:
        hanging.release.set()
    _wait(lambda: flaky.injected["put"] == 1 and hanging.inside == 0, what="the released write to fail")
    _wait(lambda: log.counters["dropped"] >= 1, what="the failed write's records to be counted dropped")


def test_a_full_buffer_drops_counted(lake: Lake) -> None:
    log = lake.app.audit
    assert log is not None
    log.max_pending = 3
    assert call(lake.gw, "PUT", "/full").status == 200
    log.flush()
    for _ in range(10):
        assert call(lake.gw, "HEAD", "/full/main/nope").status == 404
    assert log.counters["dropped"] == 7
    assert log.flush() == 3


@pytest.mark.parametrize("enabled", [True, False])
def test_metrics_show_the_audit_counters(tmp_path: Path, enabled: bool) -> None:
    """With the audit trail on, /metrics has its counters; with it off (audit.enabled false) there are none."""
    from lakemount.serving.http import BytesBody, Request

    lake = Lake(tmp_path / "home", LAKEMOUNT_AUDIT_ENABLED=str(enabled).lower())
    try:
        assert (lake.app.audit is not None) == enabled
        if lake.app.audit is not None:
            lake.app.audit.flush()
        resp = lake.api.handle(Request("GET", "/metrics", "", (), BytesBody()))
        assert resp.status == 200
        body = resp.body if isinstance(resp.body, bytes) else b"".join(resp.body)
        assert b"lakemount_http_requests_total" in body  # the rest of the page is there either way
        if enabled:
            assert b"lakemount_audit_lost_intervals_total 0" in body and b"lakemount_audit_dropped_total 0" in body
        else:
            assert b"lakemount_audit_" not in body
    finally:
        if lake.app.audit is not None:
            lake.app.audit.close()
