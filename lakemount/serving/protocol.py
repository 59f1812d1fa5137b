"""uvicorn's httptools protocol with a bound on a request's head (request line and headers).

httptools hands a header to uvicorn only once it is complete and keeps
concatenating its pieces until then, so without a bound one connection
sending a header that never ends grows the worker's memory without limit
(a 64 MiB header was accepted and answered).  Here the bytes received while a
request's head is incomplete are counted; past ``MAX_HEAD_BYTES`` (1 MiB, Go's
``http.DefaultMaxHeaderBytes``, what lakeFS serves with) the connection gets a
``431`` and is closed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_HEAD_BYTES: Final = 1 << 20
_REFUSAL: Final = b"request line and headers larger than 1048576 bytes\n"


def limited_protocol() -> type[HttpToolsProtocol]:
    """``HttpToolsProtocol`` refusing a request head larger than ``MAX_HEAD_BYTES`` with 431."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class LimitedProtocol(HttpToolsProtocol):
        _head_bytes = 0
        _in_head = True
        _refused = False

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
