"""The servers' HTTP protocol, driven in-process over a recording transport: a small response is one write."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import uvicorn
from uvicorn.server import ServerState

from lakemount.serving.protocol import HOLD_BYTES, limited_protocol


class Wire:
    """A transport that records what the protocol writes, and when it closes."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[bytes]]] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.calls.append(("write", [bytes(data)]))

    def writelines(self, items: Any) -> None:
        self.calls.append(("writelines", [bytes(x) for x in items]))

    def close(self) -> None:
        self.calls.append(("close", []))
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 8000) if name in ("sockname", "peername") else default

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    @property
    def writes(self) -> list[str]:
        """How the bytes went out, call by call (closing aside)."""
        return [kind for kind, _ in self.calls if kind != "close"]

    @property
    def sent(self) -> bytes:
        return b"".join(b"".join(parts) for _, parts in self.calls)


def exchange(request: bytes, body: bytes, headers: list[tuple[bytes, bytes]] = ()) -> Wire:  # type: ignore[assignment]
    """One request through the protocol to an app answering ``body``; the wire once everything settled."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", str(len(body)).encode()), *headers]})
        await send({"type": "http.response.body", "body": body if scope["method"] != "HEAD" else b""})

    async def run() -> Wire:
        config = uvicorn.Config(app, http=limited_protocol(), lifespan="off", access_log=False, log_config=None)
        config.load()
        protocol = limited_protocol()(config=config, server_state=ServerState(), app_state={})
        wire = Wire()
        protocol.connection_made(wire)  # type: ignore[arg-type]
        protocol.data_received(request)
        for _ in range(20):  # the app's task, then the turn's end
            await asyncio.sleep(0)
        protocol.connection_lost(None)
        return wire

    return asyncio.run(run())


@pytest.mark.parametrize("size", [4096, HOLD_BYTES * 4])
def test_a_responses_head_and_body_go_out_in_one_write(size: int) -> None:
    body = bytes(range(256)) * (size // 256)
    wire = exchange(b"GET /b/main/k HTTP/1.1\r\nhost: x\r\n\r\n", body)
    assert wire.writes == ["writelines"], wire.calls
    head, sent = wire.calls[0][1]
    assert head.startswith(b"HTTP/1.1 200 OK\r\n") and head.endswith(b"\r\n\r\n") and sent == body


def test_a_head_without_body_goes_out_by_the_end_of_the_turn() -> None:
    wire = exchange(b"HEAD /b/main/k HTTP/1.1\r\nhost: x\r\n\r\n", b"x" * 10)
    assert wire.writes == ["write"], wire.calls
    assert wire.sent.startswith(b"HTTP/1.1 200 OK\r\n") and b"content-length: 10\r\n" in wire.sent


def test_what_is_held_goes_out_before_the_connection_closes() -> None:
    wire = exchange(b"HEAD /b/main/k HTTP/1.1\r\nhost: x\r\n\r\n", b"", [(b"connection", b"close")])
    assert [kind for kind, _ in wire.calls][:2] == ["write", "close"], wire.calls
    assert b"connection: close\r\n" in wire.sent
