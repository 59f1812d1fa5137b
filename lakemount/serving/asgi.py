"""A front end as a raw ASGI application: the one place that knows the server framework.

Each request is handed to the synchronous core (the S3 gateway's or the REST
API's handler) in a thread pool (the
catalog, the ref store and the block store are blocking APIs: a queue of
requests and ``call_soon_threadsafe`` back, ``_Handlers``).  The body is
read on demand: nothing is received before the core first asks, so a request
refused by authentication never makes the client send its body (``Expect:
100-continue``), except a body of at most ``SMALL_BODY`` that the client sends
without asking (no ``Expect``, a Content-Length): that one is received on the
loop before the core runs (stop 57); from then on a pump on the event loop stays up to
``AHEAD_BYTES`` ahead of the worker, in pieces of at least ``PULL_BYTES`` (one
thread hand-off per MiB, not per socket read).  Response bodies are pulled
from the core's iterator in the same pool and written with back-pressure; a
local object (``MappedChunks``) is instead sent as views of its memory map
from the loop, with the pool faulting pages in a window ahead.  A client that
disconnects stops the transfer.  With a metrics registry, each request is
recorded once, when its response is complete or abandoned: the operation the
core named, the status, body bytes both ways and the time since it arrived.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

from lakemount.catalog.model import HEADER_CONTROL, HEADER_NAME
from lakemount.serving.bodies import MappedChunks
from lakemount.serving.http import BodyTimeout, ClientDisconnected, Request, Response
from lakemount.serving.metrics import Registry

log = logging.getLogger("lakemount.serving")

PULL_BYTES: Final = 1 << 20
AHEAD_BYTES: Final = 8 << 20
SEND_CHUNK: Final = 1 << 20
FAULT_WINDOW: Final = 8 << 20
BODY_IDLE_TIMEOUT: Final = 120.0

Scope = dict[str, Any]
Receive = Callable[[], Any]
Send = Callable[[dict[str, Any]], Any]


class _AsgiBody:
    """A blocking body reader for a worker thread, fed by the event loop.

    The first ``read`` starts a pump on the loop that keeps receiving while
    the worker hashes and writes what it already has, up to ``AHEAD_BYTES``
    ahead of it; so the socket is read while the worker computes, not in turn
    with it (a 64 MiB PUT went from about 255 to 350 MB/s here).  Pieces are at
    least ``PULL_BYTES`` (one thread hand-off per MiB, not per socket read).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, receive: Receive, idle_timeout: float) -> None:
        self._loop = loop
        self._receive = receive
        self._idle = idle_timeout
        self._pieces: queue.SimpleQueue[bytes | BaseException] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._ahead = 0  # bytes received and not yet taken by read()
        self._space = asyncio.Event()
        self._space.set()
        self._full = False  # the pump found no room (``_space`` cleared) and no read has woken it since
        self._started = False
        self._task: asyncio.Task[None] | None = None
        self._eof = False
        self._done = False  # the whole body was received
        self._stopped = False  # the core is done with the body: the pump takes nothing more
        self.disconnected = False
        self.received = 0  # body bytes received so far

    async def _run_pump(self) -> None:
        self._task = asyncio.current_task()
        try:
            while not self._done and not self._stopped:
                piece = await self._gather()
                with self._lock:
                    self._ahead += len(piece)
                    if self._ahead >= AHEAD_BYTES:
                        self._space.clear()
                        self._full = True
                self._pieces.put(piece)
                if self._stopped:
                    break
                await self._space.wait()
            self._pieces.put(b"")
        except TimeoutError:
            self._pieces.put(BodyTimeout(f"no request body received for {self._idle:g} s"))
        except asyncio.CancelledError:
            self._pieces.put(ClientDisconnected())
            raise
        except Exception as exc:  # noqa: BLE001 - handed to the reader, which raises it in the core
            self._pieces.put(exc)

    async def _gather(self) -> bytes:
        parts: list[bytes] = []
        size = 0
        while size < PULL_BYTES and not self._stopped:
            msg = await asyncio.wait_for(self._receive(), self._idle)
            if msg["type"] == "http.disconnect":
                self.disconnected = True
                raise ClientDisconnected
            piece = msg.get("body", b"")
            if piece:
                parts.append(piece)
                size += len(piece)
                self.received += len(piece)
            if not msg.get("more_body", False):
                self._done = True
                break
        return b"".join(parts)

    def read(self) -> bytes:
        if self._eof:
            return b""
        if not self._started:
            self._started = True
            self._loop.call_soon_threadsafe(self._loop.create_task, self._run_pump())
        item = self._pieces.get()
        if isinstance(item, BaseException):
            self._eof = True
            raise item
        if not item:
            self._eof = True
            return b""
        with self._lock:
            self._ahead -= len(item)
            # Only a pump that stopped for room waits to be woken (one wake-up of the loop a read cost otherwise).
            wake = self._full and self._ahead < AHEAD_BYTES
            if wake:
                self._full = False
        if wake:
            self._loop.call_soon_threadsafe(self._space.set)
        return item

    async def receive_all(self) -> None:
        """Receive the whole (small) body now, on the loop: ``read`` then only takes it (what it would
        raise, a disconnect or the idle timeout, it raises then)."""
        self._started = True
        try:
            await self._run_pump()
        finally:
            self._task = None  # the pump ran as the request's own task: ``stop`` has nothing to end

    async def stop(self) -> None:
        """End the pump (the core is done with the body): only the caller receives from now on.

        The flag, not the cancellation, is what ends it: ``asyncio.wait_for``
        (Python 3.11) drops a cancellation that lands as the message it awaits
        arrives, and a pump that missed it went on receiving a client's
        oversized body until its read-ahead was full, then waited for room
        forever, and this method with it: the 413 was never sent and the
        connection never closed (issue 42).  Every step of the pump checks the
        flag before it awaits again, and the room it may be waiting for is
        given, so it ends whichever await the cancellation finds it in.
        """
        self._stopped = True
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            self._space.set()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    @property
    def consumed(self) -> bool:
        return self._done


SMALL_BODY: Final = 64 << 10  # a body this small that the client sends at once is received before the core runs


def _small_body_sent(scope: Scope) -> bool:
    """Whether the request announces a body of at most ``SMALL_BODY`` bytes and sends it without waiting
    for a ``100 Continue`` (which only the core's first read may cause, once it has accepted the request)."""
    length = None
    for name, value in scope["headers"]:
        if name == b"content-length":
            length = value
        elif name == b"expect" or name == b"transfer-encoding":
            return False
    return length is not None and length.isdigit() and 0 < int(length) <= SMALL_BODY


class _Handlers:
    """Threads running the core's handler for the event loop: a request costs one queue put and one
    ``call_soon_threadsafe``.

    ``run_in_executor`` wraps each call in a ``concurrent.futures.Future`` (a condition variable made,
    locked and notified) chained to an asyncio future through callbacks: ~30 us of CPU a round trip
    here against ~10 us this way (stop 57; a small S3 request costs ~800 us in all).  At most
    ``threads`` run at once, more requests wait in the queue, as in a ``ThreadPoolExecutor``; a
    request whose awaiting task was cancelled before a thread took it is not run.
    """

    def __init__(self, threads: int, name: str) -> None:
        self._max = threads
        self._name = name
        self._jobs: queue.SimpleQueue[tuple[asyncio.AbstractEventLoop, asyncio.Future[Any], Callable[[Any], Any], Any] | None] = (
            queue.SimpleQueue()
        )
        self._lock = threading.Lock()
        self._idle = 0  # threads waiting for a job, less the jobs handed to them and not yet taken
        self._threads = 0

    def run(self, loop: asyncio.AbstractEventLoop, fn: Callable[[Any], Any], arg: Any) -> asyncio.Future[Any]:
        """``fn(arg)`` on one of the threads; the future (of ``loop``) gets its result or exception."""
        fut: asyncio.Future[Any] = loop.create_future()
        with self._lock:
            spawn = self._idle == 0 and self._threads < self._max
            if spawn:
                self._threads += 1
            elif self._idle:
                self._idle -= 1
        self._jobs.put((loop, fut, fn, arg))
        if spawn:
            threading.Thread(target=self._work, name=f"{self._name}_{self._threads - 1}", daemon=True).start()
        return fut

    def stop(self) -> None:
        """End the threads once the jobs queued before are done."""
        with self._lock:
            threads, self._threads, self._idle = self._threads, 0, 0
        for _ in range(threads):
            self._jobs.put(None)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            loop, fut, fn, arg = job
            job = None
            if not fut.cancelled():  # read from this thread: at worst a cancelled request is still served
                try:
                    result, error = fn(arg), None
                except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task, as run_in_executor does
                    result, error = None, exc
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
                    loop.call_soon_threadsafe(_settle, fut, result, error)
                result = error = None
            fut = None  # type: ignore[assignment]
            with self._lock:
                self._idle += 1


def _settle(fut: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if fut.cancelled():
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(result)


class AsgiApp:
    """ASGI 3 application serving ``handler`` (a blocking ``Request -> Response``)."""

    def __init__(
        self,
        handler: Callable[[Request], Response],
        *,
        threads: int = 32,
        body_idle_timeout: float = BODY_IDLE_TIMEOUT,
        on_startup: Callable[[], None] | None = None,
        thread_name: str = "lm-http",
        metrics: Registry | None = None,
    ) -> None:
        self.handler = handler
        self.metrics = metrics
        self.executor = ThreadPoolExecutor(threads, thread_name_prefix=thread_name)  # bodies, closes, start-up
        self._handlers = _Handlers(threads, thread_name)
        self.body_idle_timeout = body_idle_timeout
        self.on_startup = on_startup

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            if self.metrics is None:
                await self._http(scope, receive, send)
            else:
                await self._http_measured(self.metrics, scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                if self.on_startup is not None:
                    await asyncio.get_running_loop().run_in_executor(self.executor, self.on_startup)
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                self.executor.shutdown(wait=False, cancel_futures=True)
                self._handlers.stop()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _http_measured(self, metrics: Registry, scope: Scope, receive: Receive, send: Send) -> None:
        start = time.perf_counter()
        sent = 0
        outcome: list[Any] = []  # the response and the request body, once known

        async def counting_send(msg: dict[str, Any]) -> None:
            nonlocal sent
            if msg["type"] == "http.response.body":
                sent += len(msg.get("body", b""))
            await send(msg)

        metrics.started()
        try:
            await self._http(scope, receive, counting_send, outcome)
        finally:
            if outcome:
                response, body = outcome
                name, status, received = response.operation or "unknown", response.status, body.received
            else:  # the core raised (it should answer every failure itself)
                name, status, received = "unknown", 500, 0
            metrics.finished(name, status, received, sent, time.perf_counter() - start)

    async def _http(self, scope: Scope, receive: Receive, send: Send, outcome: list[Any] | None = None) -> None:
        loop = asyncio.get_running_loop()
        raw_path: bytes = scope.get("raw_path") or scope["path"].encode("utf-8")
        body = _AsgiBody(loop, receive, self.body_idle_timeout)
        client = scope.get("client")
        request = Request(
            scope["method"],
            raw_path.decode("utf-8", "surrogateescape"),
            scope.get("query_string", b"").decode("utf-8", "surrogateescape"),
            tuple((k.decode("latin-1").lower(), v.decode("utf-8", "surrogateescape")) for k, v in scope["headers"]),
            body,
            f"{client[0]}:{client[1]}" if client else "",
        )
        if _small_body_sent(scope):
            # The client sends it whatever the answer (it asked for no 100 Continue), and it is small: received here,
            # the core's reads take it with no hand-off to the loop and back (S3A's DeleteObjects, stop 57).
            await body.receive_all()
        response = await self._handlers.run(loop, self.handler, request)
        if outcome is not None:
            outcome += (response, body)
        await body.stop()
        try:
            await self._send(loop, scope, response, body, receive, send)
        finally:
            if response.close is not None:
                await loop.run_in_executor(self.executor, response.close)

    async def _send(
        self,
        loop: asyncio.AbstractEventLoop,
        scope: Scope,
        response: Response,
        body: _AsgiBody,
        receive: Receive,
        send: Send,
    ) -> None:
        # A header whose name is not an HTTP header name is left out.
        headers = [(k.lower().encode("latin-1"), _header_bytes(v)) for k, v in response.headers if HEADER_NAME.fullmatch(k)]
        sized = isinstance(response.body, bytes | bytearray) or response.length is not None
        if sized and not any(k == b"content-length" for k, _ in headers):
            headers.append((b"content-length", str(response.content_length()).encode()))
        if not body.consumed and not body.disconnected and scope["method"] not in ("GET", "HEAD", "DELETE"):
            # The body was not read (an early error): ask the client not to reuse
            # the connection rather than reading what it still sends.
            headers.append((b"connection", b"close"))
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        content = response.body
        if scope["method"] == "HEAD":
            await send({"type": "http.response.body", "body": b""})
            return
        if isinstance(content, bytes | bytearray):
            await send({"type": "http.response.body", "body": bytes(content)})
            return
        gone = asyncio.Event()
        # The core is done with the request body: whatever receive() yields now
        # is either leftover body (dropped) or the client going away.
        watcher = loop.create_task(_watch_disconnect(receive, gone))
        try:
            if isinstance(content, MappedChunks):
                await self._stream_mapped(loop, content, gone, send)
            else:
                await self._stream(loop, iter(content), gone, send)
        finally:
            watcher.cancel()

    async def _stream(
        self, loop: asyncio.AbstractEventLoop, chunks: Iterator[bytes | memoryview], gone: asyncio.Event, send: Send
    ) -> None:
        while not gone.is_set():
            try:
                chunk = await loop.run_in_executor(self.executor, next, chunks, None)
            except Exception:  # noqa: BLE001 - headers are out: all we can do is cut the response short
                log.exception("error while streaming a response body")
                raise
            if chunk is None:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            await send({"type": "http.response.body", "body": chunk, "more_body": True})

    async def _stream_mapped(
        self, loop: asyncio.AbstractEventLoop, body: MappedChunks, gone: asyncio.Event, send: Send
    ) -> None:
        # Views of the page cache go to the socket from the loop (one copy, in
        # the kernel); the pool faults the next window in while this one is sent.
        def fault(lo: int) -> int:
            hi = min(lo + FAULT_WINDOW, body.end)
            body.fault(lo, hi)
            return hi

        lo = body.start
        ahead = loop.run_in_executor(self.executor, fault, lo)
        while lo < body.end:
            hi = await ahead
            if hi < body.end:
                ahead = loop.run_in_executor(self.executor, fault, hi)
            for pos in range(lo, hi, SEND_CHUNK):
                if gone.is_set():
                    return
                await send({"type": "http.response.body", "body": body.view[pos : min(pos + SEND_CHUNK, hi)], "more_body": True})
            lo = hi
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _header_bytes(value: str) -> bytes:
    # Latin-1 where it fits (what HTTP clients decode header values as), else
    # the UTF-8 bytes the value arrived as.  Control characters (CR, LF, NUL...)
    # become spaces: a value from a user (stored metadata, a response-* override)
    # can neither split the response nor make the server refuse to send it (a 500).
    # Nearly every value is printable, which str checks in C: only others are scanned.
    if not value.isprintable():
        value = HEADER_CONTROL.sub(" ", value)
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogateescape")


async def _watch_disconnect(receive: Receive, gone: asyncio.Event) -> None:
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            gone.set()
            return
