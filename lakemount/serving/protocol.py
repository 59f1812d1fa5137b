"""uvicorn's httptools protocol with a bound on a request's head, writing a small response at once.

httptools hands a header to uvicorn only once it is complete and keeps
concatenating its pieces until then, so without a bound one connection
sending a header that never ends grows the worker's memory without limit
(a 64 MiB header was accepted and answered).  Here the bytes received while a
request's head is incomplete are counted; past ``MAX_HEAD_BYTES`` (1 MiB, Go's
``http.DefaultMaxHeaderBytes``, what lakeFS serves with) the connection gets a
``431`` and is closed.

uvicorn writes a response's status line and headers, then its body: for a
small GET that is two ``send`` calls, two packets and two wake-ups of the
client.  The connection's transport is wrapped (:class:`JoinedWrites`) so that
the head waits for the body written in the same turn of the event loop, and
both go out in one ``writev``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_HEAD_BYTES: Final = 1 << 20
_REFUSAL: Final = b"request line and headers larger than 1048576 bytes\n"
HOLD_BYTES: Final = 16 << 10  # a write this small (a response head) may wait for the next one


class JoinedWrites:
    """A transport whose small write waits for the next write of the same turn of the event loop.

    Held, it goes out with that write in one ``writelines`` (uvloop: one
    ``writev``); a write that nothing follows goes out at the end of the turn
    (``call_soon``), or before the transport closes, so nothing is ever held
    longer than the code that wrote it runs.  Everything else is the
    wrapped transport's.
    """

    __slots__ = ("_held", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | memoryview | None = None

    def write(self, data: bytes | memoryview) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._transport.writelines((held, data))
        elif len(data) <= HOLD_BYTES:
            self._held = data
            self._loop.call_soon(self._flush)
        else:
            self._transport.write(data)

    def writelines(self, items: Iterable[bytes | memoryview]) -> None:
        self._flush()
        self._transport.writelines(items)

    def _flush(self) -> None:
        held = self._held
        if held is not None:
            self._held = None
            if not self._transport.is_closing():  # a connection lost meanwhile takes nothing more
                self._transport.write(held)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def limited_protocol() -> type[HttpToolsProtocol]:
    """``HttpToolsProtocol`` refusing a request head larger than ``MAX_HEAD_BYTES`` with 431."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class LimitedProtocol(HttpToolsProtocol):
        _head_bytes = 0
        _in_head = True
        _refused = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(JoinedWrites(transport, self.loop))  # type: ignore[arg-type]

        def data_received(self, data: bytes) -> None:
            if self._refused:
                return
            if self._in_head:
                self._head_bytes += len(data)
                if self._head_bytes > MAX_HEAD_BYTES:
                    self._refused = True
                    self.transport.write(
                        b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; charset=utf-8\r\n"
                        b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(_REFUSAL), _REFUSAL)
                    )
                    self.transport.close()
                    return
            super().data_received(data)

        def on_headers_complete(self) -> None:
            self._in_head = False
            self._head_bytes = 0
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._in_head = True

    return LimitedProtocol
