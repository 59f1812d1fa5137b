"""The composition root's lifecycle: front ends' handlers start no thread; ``App.start`` and ``App.close`` do (issue 39).

The audit log's flusher used to start in ``ApiService.__init__`` and ``S3Gateway.__init__`` (STYLE 8: no thread
started in a constructor); now a long-running process starts it with ``App.start`` and ``App.close`` stops it.
"""

from __future__ import annotations

import threading
from pathlib import Path

from lakemount.api.handler import ApiService
from lakemount.app import App
from lakemount.audit.log import FLUSHER
from lakemount.config import load
from lakemount.gateway.handler import S3Gateway
from lakemount.gateway.settings import from_config


def flushers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == FLUSHER]


def test_handlers_start_nothing_the_app_starts_and_stops_the_flusher(tmp_path: Path) -> None:
    before = flushers()
    app = App(load(None, env={"LAKEMOUNT_HOME": str(tmp_path / "home")}))
    try:
        assert app.audit is not None, "the audit trail is on by default"
        ApiService(app)
        S3Gateway(app, from_config(app.config))
        assert flushers() == before, "a handler's constructor started the audit flusher"
        app.start()
        app.start()  # idempotent: still one flusher
        started = [t for t in flushers() if t not in before]
        assert len(started) == 1 and started[0].is_alive(), f"App.start started {len(started)} flushers"
    finally:
        app.close()
    started[0].join(timeout=30)
    assert not started[0].is_alive(), "App.close left the audit flusher running"
