"""The API as a service: ``lakemount api`` alone, and beside the gateway in ``lakemount up``."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import lakefs
import pytest

from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET, _create_admin, lakemount_cmd


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEMOUNT_")}
    env["LAKEMOUNT_HOME"] = str(tmp_path / "home")
    return env


def test_lakemount_api_alone(tmp_path: Path) -> None:
    env = _env(tmp_path)
    _create_admin(env)
    proc = subprocess.Popen(lakemount_cmd("api", "--listen", "127.0.0.1:0", "--workers", "1"), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.search(r"listening on (http://\S+)/api/v1 \(1 workers\)", line)
        assert m, line
        deadline = time.monotonic() + 60
        while True:
            try:
                assert urllib.request.urlopen(m.group(1) + "/api/v1/healthcheck", timeout=5).status == 204
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.1)
        client = lakefs.Client(host=m.group(1), username=ADMIN_KEY, password=ADMIN_SECRET)
        repo = lakefs.Repository("alone", client=client).create(storage_namespace=f"local://{tmp_path}/home/data/ns")
        repo.branch("main").object("x").upload(b"x")
        assert repo.branch("main").commit("x").get_commit().message == "x"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def test_bad_listen_address_is_one_line(tmp_path: Path) -> None:
    res = subprocess.run(lakemount_cmd("api", "--listen", "nonsense"), env=_env(tmp_path), capture_output=True, text=True,
                         timeout=120)
    assert res.returncode != 0
    assert "host:port" in res.stderr and "Traceback" not in res.stderr


def test_up_runs_the_api(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from lakemount.api import service
    from lakemount.app import App
    from lakemount.config import load

    env = _env(tmp_path)
    env["LAKEMOUNT_API_LISTEN_ADDRESS"] = "127.0.0.1:0"
    _create_admin(env)
    app: Any = App(load(None, env=env))
    service.start_for_up(app)
    try:
        out = capsys.readouterr().out
        m = re.search(r"REST API: (http://\S+)/api/v1", out)
        assert m, out
        assert f"web UI: {m.group(1)}/" in out  # up prints where the web UI is
        deadline = time.monotonic() + 60
        client = lakefs.Client(host=m.group(1), username=ADMIN_KEY, password=ADMIN_SECRET)
        while True:
            try:
                lakefs.Repository("upped", client=client).create(storage_namespace=f"local://{tmp_path}/home/data/ns")
                break
            except Exception:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        # The API and the in-process catalog (what the mount uses) are one.
        assert app.catalog.repository("upped").default_branch == "main"
    finally:
        service.stop_for_up(app)
        app.release_connections()


def test_serve_without_the_api(tmp_path: Path) -> None:
    env = _env(tmp_path)
    proc = subprocess.Popen(lakemount_cmd("serve", "--listen", "127.0.0.1:0", "--workers", "1", "--no-api"), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        assert proc.stdout is not None
        assert "S3 gateway listening on" in proc.stdout.readline()
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=30)
        assert "API" not in rest
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
