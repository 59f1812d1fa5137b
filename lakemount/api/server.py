"""Running the API: one listening socket, several worker processes, as the gateway runs.

``ApiServer`` binds ``api.listen_address`` and starts ``workers`` processes
sharing the socket; each builds its own ``App`` and serves
:class:`~lakemount.api.handler.ApiService` through the gateway's raw ASGI
adapter (thread pool for the blocking catalog, streamed bodies) on uvicorn
with httptools and uvloop.  A worker that dies is restarted; ``stop`` lets
workers finish the requests in flight.  ``lakemount api`` runs one in the
foreground, ``lakemount serve`` and ``lakemount up`` run one beside the
gateway.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, replace
from multiprocessing.process import BaseProcess
from typing import Any, Final

from lakemount.config import Config
from lakemount.errors import InvalidArgument

log = logging.getLogger("lakemount.api")

STOP_GRACE: Final = 15.0
RESTART_BACKOFF: Final = (0.5, 1.0, 2.0, 5.0, 10.0)
DEFAULT_WORKERS_CAP: Final = 4
SWITCH_INTERVAL: Final = 0.0005


@dataclass(frozen=True, slots=True)
class ApiSettings:
    """Where and how the REST API serves: bind address, port, worker processes and threads per worker."""
    host: str = "127.0.0.1"
    port: int = 8001
    workers: int = 2
    threads: int = 32

    @property
    def url(self) -> str:
        return f"http://{'[' + self.host + ']' if ':' in self.host else self.host}:{self.port}"


def settings_from_config(config: Config, *, listen_address: str | None = None, workers: int | None = None) -> ApiSettings:
    """``api.listen_address`` (or ``listen_address``) and the worker count (0 or none: one per CPU, at most 4)."""
    text = listen_address or config.api.listen_address
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise InvalidArgument(f"api.listen_address must look like host:port, got {text!r}")
    if workers is None:
        workers = config.api.workers
    if workers < 0:
        raise InvalidArgument("workers must be 0 (one per CPU) or more")
    if workers == 0:
        workers = max(1, min(os.cpu_count() or 1, DEFAULT_WORKERS_CAP))
    return ApiSettings(host.strip("[]") or "0.0.0.0", int(port), workers)


def build_asgi(config: Config, settings: ApiSettings) -> Any:
    """The ASGI application of one worker over a fresh ``App``."""
    from lakemount.api.handler import ApiService
    from lakemount.app import App
    from lakemount.gateway.asgi import AsgiApp

    service = ApiService(App(config))
    return AsgiApp(service.handle, threads=settings.threads)


def _configure_logging(config: Config) -> None:
    level = config.logging.level.upper()
    logging.basicConfig(level=getattr(logging, level, logging.INFO),
                        format=f"%(asctime)s api[{os.getpid()}] %(levelname)s %(message)s")


def _worker(config: Config, settings: ApiSettings, sock: socket.socket) -> None:
    import uvicorn

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A listing holds the GIL for milliseconds; with the default 5 ms switch
    # interval, a stat waiting behind it waited that long.  In api_bench (8
    # clients, loaded 2-core machine) 0.5 ms took the 1,000-entry listing's p99
    # from 260-450 ms to 95-155 ms.
    sys.setswitchinterval(SWITCH_INTERVAL)
    _configure_logging(config)
    app = build_asgi(config, settings)
    server = uvicorn.Server(uvicorn.Config(
        app, http="httptools", loop="uvloop", lifespan="off", access_log=False, log_config=None,
        log_level="warning", server_header=False, timeout_keep_alive=75,
        timeout_graceful_shutdown=int(STOP_GRACE) - 2,
    ))
    server.run(sockets=[sock])


def prepare_stores(config: Config) -> None:
    """Create the auth tables and the server key once, before workers race to."""
    from lakemount.api.handler import server_key
    from lakemount.app import App

    app = App(config)
    app.auth  # noqa: B018 - builds the auth tables
    server_key(app)
    app.refs.engine.dispose()


class ApiServer:
    """The API's supervisor: a socket and ``settings.workers`` worker processes."""

    def __init__(self, config: Config, settings: ApiSettings) -> None:
        self.config = config
        self.settings = settings
        self.sock: socket.socket | None = None
        self._procs: list[BaseProcess] = []
        self._stopping = threading.Event()
        self._ctx = multiprocessing.get_context("spawn")

    @property
    def url(self) -> str:
        return self.settings.url

    def start(self) -> None:
        """Bind and start the workers; returns at once (connections queue until a worker accepts)."""
        from lakemount.gateway.server import bind

        prepare_stores(self.config)
        self.sock = bind(self.settings.host, self.settings.port)
        self.settings = replace(self.settings, port=self.sock.getsockname()[1])
        self._procs = [self._spawn(i) for i in range(self.settings.workers)]
        threading.Thread(target=self._watch, name="lm-api-supervisor", daemon=True).start()

    def _spawn(self, index: int) -> BaseProcess:
        proc = self._ctx.Process(target=_worker, args=(self.config, self.settings, self.sock),
                                 name=f"lakemount-api-{index}", daemon=True)
        proc.start()
        return proc

    def _watch(self) -> None:
        failures = [0] * len(self._procs)
        while not self._stopping.wait(0.5):
            for i, proc in enumerate(self._procs):
                if proc.is_alive() or self._stopping.is_set():
                    continue
                log.warning("api worker %s exited with %s; restarting", proc.pid, proc.exitcode)
                time.sleep(RESTART_BACKOFF[min(failures[i], len(RESTART_BACKOFF) - 1)])
                failures[i] += 1
                if not self._stopping.is_set():
                    self._procs[i] = self._spawn(i)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until ``stop`` (True) or the timeout (False)."""
        return self._stopping.wait(timeout)

    def stop(self) -> None:
        """Stop accepting, let workers finish in-flight requests, then end them."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        for proc in self._procs:
            if proc.pid is not None and proc.is_alive():
                os.kill(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE
        for proc in self._procs:
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join(2)
        if self.sock is not None:
            self.sock.close()


def serve_forever(config: Config, settings: ApiSettings, *, announce: Any = print) -> None:
    """Run the API in the foreground until SIGINT or SIGTERM."""
    _configure_logging(config)
    server = ApiServer(config, settings)
    server.start()
    stop = threading.Event()

    def on_signal(_sig: int, _frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    announce(f"lakemount API listening on {server.url}/api/v1 ({settings.workers} workers); web UI: {server.url}/")
    try:
        while not stop.wait(0.5):
            pass
    finally:
        server.stop()
