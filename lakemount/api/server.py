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
import os
import signal
import socket
import sys
from dataclasses import dataclass, replace
from typing import Any, Final

from lakemount.config import Config
from lakemount.errors import InvalidArgument
from lakemount.serving import metrics, workers
from lakemount.serving.workers import STOP_GRACE, WorkerPool, bind, exit_cleanly_on_sigterm, settle_worker_heap

log = logging.getLogger("lakemount.api")

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
    from lakemount.serving.asgi import AsgiApp

    app = App(config)
    service = ApiService(app)
    app.start()  # the audit flusher (its writer loaded before the worker settles its heap); stopped at exit
    registry = metrics.registry("api") if config.api.metrics else None
    return AsgiApp(service.handle, threads=settings.threads, thread_name="lm-api", metrics=registry)


def _configure_logging(config: Config) -> None:
    level = config.logging.level.upper()
    logging.basicConfig(level=getattr(logging, level, logging.INFO),
                        format=f"%(asctime)s api[{os.getpid()}] %(levelname)s %(message)s")


def _worker(config: Config, settings: ApiSettings, sock: socket.socket) -> None:
    import uvicorn

    from lakemount.serving.protocol import limited_protocol

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    exit_cleanly_on_sigterm()
    # A listing holds the GIL for milliseconds; with the default 5 ms switch
    # interval, a stat waiting behind it waited that long.  In api_bench (8
    # clients, loaded 2-core machine) 0.5 ms took the 1,000-entry listing's p99
    # from 260-450 ms to 95-155 ms.
    sys.setswitchinterval(SWITCH_INTERVAL)
    _configure_logging(config)
    app = build_asgi(config, settings)
    settle_worker_heap()
    server = uvicorn.Server(uvicorn.Config(
        app, http=limited_protocol(), loop="uvloop", lifespan="off", access_log=False, log_config=None,
        log_level="warning", server_header=False, timeout_keep_alive=75,
        timeout_graceful_shutdown=int(STOP_GRACE) - 2,
    ))
    with metrics.publishing(config.home, app.metrics):
        server.run(sockets=[sock])


def prepare_stores(config: Config) -> None:
    """Create the auth tables and the server key once, before workers race to."""
    from lakemount.api.handler import server_key
    from lakemount.app import App

    app = App(config)
    app.auth  # noqa: B018 - builds the auth tables
    server_key(app)
    app.release_connections()


class ApiServer(WorkerPool):
    """The API's supervisor: a socket and ``settings.workers`` worker processes."""

    def __init__(self, config: Config, settings: ApiSettings) -> None:
        super().__init__("api", _worker, log=log, thread_name="lm-api-supervisor")
        self.config = config
        self.settings = settings

    @property
    def url(self) -> str:
        return self.settings.url

    def start(self) -> None:
        """Bind and start the workers; returns at once (connections queue until a worker accepts)."""
        prepare_stores(self.config)
        self.sock = bind(self.settings.host, self.settings.port, "api.listen_address")
        self.settings = replace(self.settings, port=self.sock.getsockname()[1])
        metrics.clear_stale(self.config.home, "api")
        self.start_workers(self.settings.workers, (self.config, self.settings, self.sock))


def serve_forever(config: Config, settings: ApiSettings, *, announce: Any = print) -> None:
    """Run the API in the foreground until SIGINT or SIGTERM."""
    _configure_logging(config)
    server = ApiServer(config, settings)
    workers.serve_forever(
        server,
        lambda: f"lakemount API listening on {server.url}/api/v1 ({settings.workers} workers); web UI: {server.url}/",
        announce=announce,
    )
