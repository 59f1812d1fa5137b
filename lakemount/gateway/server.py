"""Running the S3 gateway: one listening socket, several worker processes.

``GatewayServer`` binds the configured address and starts ``workers``
processes that share the socket (the kernel hands each connection to one of
them).  Each worker is a stateless client of the shared stores: it builds its
own ``App`` and serves the raw ASGI application of ``serving/asgi.py`` with uvicorn on
httptools and uvloop -- the stack chosen by measurement (see
``benchmarks/gateway_stack.py``: it served the most small requests per second
when the work runs in a thread pool, and large bodies as fast as the
alternatives).  A worker that dies is restarted; ``stop`` lets workers finish
the requests in flight.

``lakemount serve`` runs a ``GatewayServer`` in the foreground; ``lakemount
up`` runs one beside the mount through :mod:`lakemount.gateway.service`
(which imports this module, never the other way round).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
from dataclasses import replace
from typing import Any

from lakemount.config import Config
from lakemount.gateway.settings import GatewaySettings
from lakemount.serving import metrics, workers
from lakemount.serving.workers import (
    RESTART_BACKOFF,
    STOP_GRACE,
    WorkerPool,
    bind,
    exit_cleanly_on_sigterm,
    settle_worker_heap,
)

log = logging.getLogger("lakemount.gateway")

__all__ = ["RESTART_BACKOFF", "STOP_GRACE", "GatewayServer", "bind", "build_asgi", "serve_forever"]


def build_asgi(config: Config, settings: GatewaySettings) -> Any:
    """The ASGI application of one worker over a fresh ``App``."""
    from lakemount.app import App
    from lakemount.gateway.handler import S3Gateway
    from lakemount.serving.asgi import AsgiApp

    app = App(config)
    gateway = S3Gateway(app, settings)
    app.start()  # the audit flusher (its writer loaded before the worker settles its heap); stopped at exit
    gateway.start()  # the change notices' listener (PostgreSQL)
    registry = metrics.registry("s3") if config.api.metrics else None
    return AsgiApp(gateway.handle, threads=settings.threads, thread_name="lm-gw", metrics=registry)


def prepare_stores(config: Config) -> None:
    """Create every table the workers need, once, before they start (they would race)."""
    from lakemount.app import App

    app = App(config)
    # Each store creates its tables when it is built.
    app.auth  # noqa: B018
    app.bucket_store  # noqa: B018
    app.multipart_store  # noqa: B018
    app.release_connections()


def _configure_logging(config: Config) -> None:
    level = config.logging.level.upper()
    logging.basicConfig(
        level=getattr(logging, level, logging.INFO),
        format=f"%(asctime)s gateway[{os.getpid()}] %(levelname)s %(message)s",
    )


def _protocol_class() -> type:
    """uvicorn's httptools protocol, except that bytes after a complete request wait for its answer.

    uvicorn answers unparsable bytes at once with a bare ``400`` and closes the
    connection.  When they follow a request whose body is complete and which
    is still being served (a client that sent more body than its
    Content-Length said), that plain 400 overtook the S3 answer the request
    deserves (BadDigest, say).  Here the request is answered and then the
    connection closed; a parse error anywhere else is uvicorn's as before.  A request head
    larger than 1 MiB is refused (``serving/protocol.py``).
    """
    from lakemount.serving.protocol import limited_protocol

    class Protocol(limited_protocol()):  # type: ignore[misc]
        def send_400_response(self, msg: str) -> None:
            cycle = getattr(self, "cycle", None)
            if cycle is not None and not cycle.response_complete and not cycle.more_body and not cycle.disconnected:
                cycle.keep_alive = False  # uvicorn closes the transport once this response is sent
                self.flow.pause_reading()
                return
            super().send_400_response(msg)

    return Protocol


def _worker(config: Config, settings: GatewaySettings, sock: socket.socket) -> None:
    """A worker process: serve ``sock`` until SIGTERM."""
    import uvicorn

    # Ctrl-C reaches the whole process group; the supervisor stops workers
    # with SIGTERM, so a worker ignores SIGINT instead of dying mid-request.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    exit_cleanly_on_sigterm()

    _configure_logging(config)
    app = build_asgi(config, settings)
    settle_worker_heap()
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            http=_protocol_class(),
            loop="uvloop",
            lifespan="off",
            access_log=False,
            log_config=None,
            log_level="warning",
            server_header=False,
            ssl_certfile=settings.tls_cert_file or None,
            ssl_keyfile=settings.tls_key_file or None,
            timeout_keep_alive=75,
            timeout_graceful_shutdown=int(STOP_GRACE) - 2,
        )
    )
    with metrics.publishing(config.home, app.metrics):
        server.run(sockets=[sock])


class GatewayServer(WorkerPool):
    """The gateway's supervisor: a socket and ``settings.workers`` worker processes."""

    def __init__(self, config: Config, settings: GatewaySettings) -> None:
        super().__init__("gateway", _worker, log=log, thread_name="lm-gw-supervisor")
        self.config = config
        self.settings = settings

    @property
    def address(self) -> tuple[str, int]:
        assert self.sock is not None
        host, port = self.sock.getsockname()[:2]
        return host, port

    @property
    def url(self) -> str:
        host, port = self.address
        return f"{self.settings.scheme}://{'[' + host + ']' if ':' in host else host}:{port}"

    def start(self) -> None:
        """Bind and start the workers; returns at once (connections queue until a worker accepts)."""
        prepare_stores(self.config)
        self.sock = bind(self.settings.host, self.settings.port, "gateways.s3.listen_address")
        # Workers see the port actually bound (port 0 resolved), for their own logs.
        self.settings = replace(self.settings, port=self.address[1])
        metrics.clear_stale(self.config.home, "s3")
        self.start_workers(self.settings.workers, (self.config, self.settings, self.sock))


def serve_forever(config: Config, settings: GatewaySettings, *, announce: Any = print,
                  server: GatewayServer | None = None) -> None:
    """Run the gateway in the foreground until SIGINT or SIGTERM (``server``: one made, perhaps started, already)."""
    _configure_logging(config)
    server = server or GatewayServer(config, settings)
    flat = ", flat buckets" if settings.flat else ""
    workers.serve_forever(
        server,
        lambda: f"lakemount S3 gateway listening on {server.url} ({settings.workers} workers{flat})",
        announce=announce,
    )
