"""The HTTP request and response the front ends handle, independent of any server framework.

The S3 gateway's core and the REST API's handler are synchronous: each runs in
a worker thread and reads the request body through :class:`Body`, a blocking
reader the server adapter (``asgi.py``) feeds.  A :class:`Response` carries its
body as bytes or as an iterator of chunks the adapter pulls in the same thread
pool, so a 5 GiB GET never sits in memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import unquote_plus


class Refused(Exception):
    """A response a server gives instead of a result: an HTTP status, a one-line message and extra headers.

    The API's ``ApiError`` is one; the Iceberg catalog's gate (``iceberg/host.py``) catches it by this name, so
    it reshapes the API's refusals without importing the API."""

    def __init__(self, status: int, message: str, headers: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers


class ClientDisconnected(Exception):
    """The client went away before the request body was complete."""


class BodyTimeout(Exception):
    """The client stopped sending the request body for longer than the server waits."""


class BodyTooLarge(Exception):
    """A request body past the bound its route takes: declared by ``Content-Length``, or counted as it arrived."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"request body larger than {limit} bytes")
        self.limit = limit


class Body(Protocol):
    """A request body, read in pieces by a worker thread."""

    def read(self) -> bytes:
        """The next piece of the raw body; ``b""`` at its end.

        Raises ``ClientDisconnected`` when the client closes the connection
        early and ``BodyTimeout`` when it stops sending.
        """


class BytesBody:
    """A body already in memory (tests, and the in-process client)."""

    def __init__(self, data: bytes = b"", piece: int = 1 << 20) -> None:
        self._data = memoryview(data)
        self._piece = piece

    def read(self) -> bytes:
        out = bytes(self._data[: self._piece])
        self._data = self._data[self._piece :]
        return out


def _decode_query(raw_query: str) -> dict[str, str]:
    """Query parameters decoded as S3 and lakeFS decode them (``+`` is a space); first value wins."""
    out: dict[str, str] = {}
    for part in raw_query.split("&"):
        if not part:
            continue
        name, _, value = part.partition("=")
        k = unquote_plus(name, errors="surrogateescape")
        if k not in out:
            out[k] = unquote_plus(value, errors="surrogateescape")
    return out


@dataclass(slots=True)
class Request:
    """One HTTP request as a front end sees it.

    ``raw_path`` and ``raw_query`` are exactly as sent on the request line
    (still percent-encoded; signatures are computed over them); ``headers`` are
    the received (name, value) pairs with names in lower case.
    """

    method: str
    raw_path: str
    raw_query: str
    headers: tuple[tuple[str, str], ...]
    body: Body = field(default_factory=BytesBody)
    client: str = ""
    _hmap: dict[str, str] | None = None
    _query: dict[str, str] | None = None

    def header(self, name: str, default: str | None = None) -> str | None:
        """The first value of header ``name`` (lower case)."""
        if self._hmap is None:
            hm: dict[str, str] = {}
            for k, v in self.headers:
                hm.setdefault(k, v)
            self._hmap = hm
        return self._hmap.get(name, default)

    @property
    def query(self) -> dict[str, str]:
        """Decoded query parameters (first value of each name)."""
        if self._query is None:
            self._query = _decode_query(self.raw_query)
        return self._query


@dataclass(slots=True)
class Response:
    """Status, headers and body of a response.

    ``body`` is bytes, or an iterable of bytes-like chunks whose total is ``length`` bytes
    (then ``Content-Length`` is ``length``).  ``close`` is called once the body
    was sent or abandoned.  ``operation`` names what the front end did (an S3
    operation name, an API operationId) for the request metrics; a label, so
    never a path or a key.
    """

    status: int = 200
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes | Iterable[bytes | memoryview] = b""
    length: int | None = None
    close: Callable[[], None] | None = None
    operation: str = ""

    def header(self, name: str) -> str | None:
        lname = name.lower()
        for k, v in self.headers:
            if k.lower() == lname:
                return v
        return None

    def content_length(self) -> int:
        if isinstance(self.body, bytes | bytearray):
            return len(self.body)
        return self.length or 0


def read_bounded(request: Request, limit: int) -> bytes:
    """The whole body of ``request``, which a route takes up to ``limit`` bytes: the one rule for bounded bodies.

    A declared ``Content-Length`` over ``limit`` raises ``BodyTooLarge`` before a
    byte of the body is read, so the answer goes out at once (and, the body left
    unread, the ASGI adapter closes the connection); a body without one
    (chunked) raises it as soon as what arrived passes ``limit``, so at most
    ``limit`` bytes and one piece are ever held.  Raises ``ClientDisconnected``
    and ``BodyTimeout`` as ``Body.read`` does.
    """
    declared = request.header("content-length")
    if declared is not None and declared.strip().isdigit() and int(declared) > limit:
        raise BodyTooLarge(limit)
    parts: list[bytes] = []
    size = 0
    while piece := request.body.read():
        size += len(piece)
        if size > limit:
            raise BodyTooLarge(limit)
        parts.append(piece)
    return b"".join(parts)
