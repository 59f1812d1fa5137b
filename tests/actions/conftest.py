"""Fixtures of the hook tests: a catalog with a seeded repository, a local webhook server, action files."""

from __future__ import annotations

import http.server
import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lakemount.app import App
from lakemount.catalog.catalog import Catalog
from lakemount.config import load

R = "hooked"


def seeded_catalog(home: Path, **env: str) -> Catalog:
    """The catalog of ``home`` (configured by ``env``, ``LAKEMOUNT_*`` variables) whose repository R has one commit."""
    c = App(load(env={"LAKEMOUNT_HOME": str(home), "LAKEMOUNT_CACHE_DISK_BYTES": "0", **env})).catalog
    c.create_repository(R)
    c.put(R, "main", "seed.txt", b"seed")
    c.commit(R, "main", "seed")
    return c


@pytest.fixture
def cat(tmp_path: Path) -> Catalog:
    return seeded_catalog(tmp_path / "home")


def policy_cat(tmp_path: Path, **env: str) -> Catalog:
    """A second catalog, beside ``cat``'s, configured by ``env``."""
    return seeded_catalog(tmp_path / "home2", **env)


def action(cat: Catalog, branch: str, name: str, text: str) -> None:
    cat.put(R, branch, f"_lakefs_actions/{name}.yaml", text.encode())


class Hooked(http.server.ThreadingHTTPServer):
    daemon_threads = True


@pytest.fixture
def webhook() -> Iterator[dict[str, Any]]:
    """A local HTTP server; ``state['mode']`` picks its behaviour, ``state['events']`` collects what it got."""
    # "hang" and "trickle" go on until ``release`` is set (teardown) or two minutes pass: a client that
    # returned before proves its own timeout ended the exchange; ``hung_up`` is set when the server sees
    # the client close its end while it still hangs or trickles.
    state: dict[str, Any] = {"mode": "ok", "events": [], "release": threading.Event(), "hung_up": threading.Event(), "sent": 0}

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            state["events"].append({"path": self.path, "headers": dict(self.headers), "body": json.loads(body)})
            mode = state["mode"]
            release: threading.Event = state["release"]
            if mode == "hang":
                deadline = time.monotonic() + 120
                while not release.is_set() and time.monotonic() < deadline:
                    readable, _, _ = select.select([self.connection], [], [], 0.05)
                    if readable and not self.connection.recv(1, socket.MSG_PEEK):
                        state["hung_up"].set()
                        return
                return
            if mode == "trickle":  # an answer a byte at a time, each well within the socket timeout: 120 s of it
                self.send_response(200)
                self.send_header("Content-Length", "600")
                self.end_headers()
                for _ in range(600):
                    try:
                        self.wfile.write(b"x")
                        self.wfile.flush()
                    except OSError:
                        state["hung_up"].set()
                        return
                    state["sent"] += 1
                    if release.wait(0.2):
                        return
                return
            if mode == "garbage":
                self.wfile.write(b"\x00\xffNOT HTTP AT ALL\r\n\r\n")
                return
            status, text = (200, b"fine") if mode == "ok" else (422, b"bad \x1b[31mdata\x00 in tables/x\n" + b"y" * 2000)
            self.send_response(status)
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)

    server = Hooked(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state["url"] = f"http://127.0.0.1:{server.server_address[1]}/hook"
    try:
        yield state
    finally:
        state["release"].set()
        server.shutdown()
        server.server_close()


def webhook_action(url: str, events: str = "pre-commit", timeout: str = "2s") -> str:
    return f"""
name: hook it
on:
  {events}:
    branches: [main, "feat-*"]
hooks:
  - id: notify
    type: webhook
    properties:
      url: {url}
      timeout: {timeout}
      query_params: {{check: all}}
      headers: {{X-Team: data}}
"""
