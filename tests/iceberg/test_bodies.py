"""The catalog's request bodies are bounded as the API's are (issue 42 item 1): a body past ``MAX_BODY`` gets a 413
in the protocol's shape, at once when its length is declared, and what 40 such requests leave in the API worker stays
small.

The server runs with one API worker, so the worker the requests reach is the one whose memory is read (its
resident set, ``VmRSS`` in ``/proc/<pid>/status``); the worker is found by the connection it accepted, not by guessing
among the server's processes.
"""

from __future__ import annotations

import json
import os
import select
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from lakemount.iceberg.service import MAX_BODY
from tests.api.conftest import Served, running
from tests.iceberg.test_protocol import BASIC

DECLARED = 100 << 20  # what the report sent: Content-Length 104857600
CONNECTIONS = 40
# What an attacker's client sends at most while it waits for the answer: past the limit by more than the kernel's
# socket buffers and the server's read-ahead (``serving/asgi.py`` ``AHEAD_BYTES``) hold, so a server that reads up to
# the limit before answering does reach it.
SENT_AT_MOST = 4 * MAX_BODY
# What 40 refused requests may add to the worker.  With the fix no byte of their bodies is read: what uvicorn takes
# off each socket before the answer (its 64 KiB high-water mark), the answers and the threads' bookkeeping, a few MiB
# in all.  Before it, each connection had its 16 MiB read (640 MiB for 40; the report saw 650 MB per worker), so any
# bound under one refused body tells the two apart whatever the allocator keeps.
GROWTH_BOUND = MAX_BODY


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with running(tmp_path_factory.mktemp("iceberg-bodies"), env={"LAKEMOUNT_API_WORKERS": "1"}) as s:
        yield s
        log = s.gateway.log()
    assert "unexpected error serving" not in log, log[-5000:]


def _address(lake: Served) -> tuple[str, int]:
    u = urlsplit(lake.api)
    assert u.hostname is not None and u.port is not None
    return u.hostname, u.port


def _head(path: str, length: int | None) -> bytes:
    framing = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    return (f"POST {path} HTTP/1.1\r\nHost: lake\r\nAuthorization: {BASIC}\r\nContent-Type: application/json\r\n"
            f"{framing}\r\n\r\n").encode()


def _answer(raw: bytes) -> tuple[int, dict[str, str], bytes] | None:
    """(status, headers, body) of a complete response in ``raw``, or None while it is incomplete."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    if not sep:
        return None
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    if len(body) < int(headers.get("content-length", "0")):
        return None
    return int(lines[0].split()[1]), headers, body


def _oversized(lake: Served, *, body_bytes: int, chunked: bool = False, timeout: float = 60.0) -> tuple[int, dict[str, str], bytes, int]:
    """Send one createNamespace with a body too large (declared ``DECLARED`` bytes, or chunked), sending at most
    ``body_bytes`` of it while reading: (status, headers, body) of the answer and the body bytes the server took."""
    sock = socket.create_connection(_address(lake), timeout=timeout)
    sock.setblocking(False)
    out = _head("/iceberg/api/v1/namespaces", None if chunked else DECLARED)
    piece = b"x" * (1 << 16)
    if chunked:
        piece = b"%x\r\n%s\r\n" % (len(piece), piece)
    sent_body = 0
    raw = b""
    deadline = time.monotonic() + timeout
    try:
        while (answer := _answer(raw)) is None:
            assert time.monotonic() < deadline, f"no answer within {timeout} s (got {raw[:200]!r}, sent {sent_body} body bytes)"
            if not out and sent_body < body_bytes:
                out = piece
            readable, writable, _ = select.select([sock], [sock] if out else [], [], 0.5)
            if readable:
                try:
                    data = sock.recv(1 << 16)
                except ConnectionResetError:
                    data = b""
                assert data, f"connection closed without a complete answer: {raw[:200]!r}"
                raw += data
            if writable and out:
                try:
                    n = sock.send(out)
                except (BrokenPipeError, ConnectionResetError):
                    out = b""  # the server closed its side: what it answered is still to be read
                    continue
                if out is piece:
                    sent_body += n
                out = out[n:]
        return (*answer, sent_body)
    finally:
        sock.close()


def test_a_declared_oversized_body_is_refused_at_once_in_the_protocols_shape(lake: Served) -> None:
    # Nothing of the body is sent: the answer can only come from the declared length.
    status, headers, body, _ = _oversized(lake, body_bytes=0, timeout=30)
    assert status == 413, body
    assert headers.get("connection") == "close", headers
    error = json.loads(body)
    assert error == {"error": {"message": f"request body larger than {MAX_BODY} bytes", "type": "BadRequestException",
                               "code": 413}}
    # oauth/tokens reads its form by the same rule.
    sock = socket.create_connection(_address(lake), timeout=30)
    try:
        sock.sendall(_head("/iceberg/api/v1/oauth/tokens", DECLARED))
        raw = b""
        while _answer(raw) is None:
            data = sock.recv(1 << 16)
            assert data, raw
            raw += data
    finally:
        sock.close()
    answer = _answer(raw)
    assert answer is not None and answer[0] == 413 and answer[1].get("connection") == "close", raw[:300]


def test_a_chunked_body_past_the_limit_stops_and_is_refused(lake: Served) -> None:
    status, headers, body, sent = _oversized(lake, body_bytes=SENT_AT_MOST, chunked=True)
    assert status == 413 and json.loads(body)["error"]["code"] == 413, body
    assert headers.get("connection") == "close", headers
    assert sent < SENT_AT_MOST, "the server answered only once the client stopped sending"


def _server_socket_inode(port: int, client_port: int) -> str:
    """The inode of the server's end of the loopback connection from ``client_port`` to ``port``."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, remote, inode = fields[1], fields[2], fields[9]
            if int(local.rsplit(":", 1)[1], 16) == port and int(remote.rsplit(":", 1)[1], 16) == client_port:
                return inode
    raise AssertionError(f"no server socket for the connection from port {client_port}")


def _worker_of(lake: Served) -> int:
    """The pid of the API worker that accepts a connection (the only one: ``LAKEMOUNT_API_WORKERS=1``)."""
    host, port = _address(lake)
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(b"GET /api/v1/healthcheck HTTP/1.1\r\nHost: lake\r\n\r\n")
        assert sock.recv(1 << 16).startswith(b"HTTP/1.1 "), "the API did not answer"
        target = f"socket:[{_server_socket_inode(port, sock.getsockname()[1])}]"
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
                if any(os.readlink(f"/proc/{pid}/fd/{fd}") == target for fd in fds):
                    return int(pid)
            except OSError:
                continue  # another user's process, or one that ended
    raise AssertionError("no process holds the API's end of the connection")


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) << 10
    raise AssertionError(f"no VmRSS for {pid}")


def test_forty_oversized_bodies_leave_the_workers_memory_within_a_bound(lake: Served) -> None:
    worker = _worker_of(lake)
    assert worker != lake.gateway.proc.pid
    # Warm up: the first requests of a worker import and build what it keeps (the catalog service, its thread pool).
    for _ in range(3):
        assert _oversized(lake, body_bytes=1 << 20)[0] == 413
    before = _rss(worker)
    answers: list[int] = []
    failures: list[BaseException] = []

    def one() -> None:
        try:
            answers.append(_oversized(lake, body_bytes=SENT_AT_MOST, timeout=120)[0])
        except BaseException as e:  # noqa: BLE001 - re-raised below
            failures.append(e)

    threads = [threading.Thread(target=one) for _ in range(CONNECTIONS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise failures[0]
    assert answers == [413] * CONNECTIONS
    assert _worker_of(lake) == worker, "the worker was restarted: its memory says nothing"
    after = _rss(worker)
    assert after - before < GROWTH_BOUND, (
        f"the API worker grew by {(after - before) >> 20} MiB over {CONNECTIONS} refused bodies "
        f"({before >> 20} -> {after >> 20} MiB), more than one {MAX_BODY >> 20} MiB body")
