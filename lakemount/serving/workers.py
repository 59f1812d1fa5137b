"""Serving a front end from worker processes: the supervisor the S3 gateway and the REST API share.

Both front ends run the same way: :func:`bind` opens one listening socket,
:class:`WorkerPool` spawns ``workers`` processes that inherit it (the kernel
hands each connection to one of them), restarts a worker that dies with a
growing backoff (``RESTART_BACKOFF``) and, on ``stop``, lets workers finish the
requests in flight for up to ``STOP_GRACE`` seconds.  :func:`serve_forever`
runs such a server in the foreground until SIGINT or SIGTERM, and
:class:`UpService` runs one as a service of ``lakemount up``.  What a worker
serves (its target function and arguments) is the front end's business
(``gateway/server.py``, ``api/server.py``); this module imports neither.
"""

from __future__ import annotations

import gc
import logging
import multiprocessing
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from typing import Any, Final, Protocol

STOP_GRACE: Final = 15.0
RESTART_BACKOFF: Final = (0.5, 1.0, 2.0, 5.0, 10.0)
# A request that builds a 1,000-entry listing holds a few thousand container
# objects at once; at CPython's default (700) every such request ran several
# young collections and, every hundred or so, a full one over the worker's
# caches.  api_bench measured 0.8 ms of a 2.1 ms listing in the collector.
# Requests free what they build by reference counting; cycles are rare and
# still collected, only less often.
GC_YOUNG_THRESHOLD: Final = 50_000


def bind(host: str, port: int, key: str = "") -> socket.socket:
    """A listening socket on ``host:port`` (port 0: any free port), inheritable by worker processes.

    Raises ``OSError`` when the address cannot be bound; its ``strerror`` names
    the address and ``key``, the configuration key that chose it (a port in use
    otherwise reads as a bare "Address already in use").
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        where = f" ({key})" if key else ""
        raise OSError(exc.errno, f"cannot listen on {address}{where}: {exc.strerror or exc}") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def settle_worker_heap() -> None:
    """Call in a worker once its long-lived state is built: what exists now is
    never collected (``gc.freeze``), and young collections wait for
    ``GC_YOUNG_THRESHOLD`` net allocations instead of 700."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, older, oldest)


def exit_cleanly_on_sigterm() -> None:
    """Call in a worker: the supervisor's SIGTERM ends it through ``SystemExit``, so exit handlers run.

    uvicorn catches SIGTERM, shuts down, then raises the signal again under the
    handler it found; with the default one the process died on the spot and
    its exit handlers (the audit trail's last flush, ``audit/log.py``) never ran.
    """

    def on_term(_sig: int, _frame: Any) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_term)


class WorkerPool:
    """A supervisor of worker processes that all serve one inherited socket.

    ``name`` names the processes (``lakemount-<name>-<i>``) and the log lines;
    ``target(*args)`` is what each worker runs (``spawn`` context, so it and
    its arguments must pickle).  Subclasses bind ``sock`` and call
    :meth:`start_workers`; ``wait`` and ``stop`` are public.
    """

    def __init__(self, name: str, target: Callable[..., None], *, log: logging.Logger, thread_name: str) -> None:
        self.sock: socket.socket | None = None
        self._name = name
        self._target = target
        self._log = log
        self._thread_name = thread_name
        self._args: tuple[Any, ...] = ()
        self._procs: list[BaseProcess] = []
        self._stopping = threading.Event()
        self._monitor: threading.Thread | None = None
        self._ctx = multiprocessing.get_context("spawn")

    def start_workers(self, count: int, args: tuple[Any, ...]) -> None:
        """Spawn ``count`` workers running ``target(*args)`` and the thread that restarts dead ones."""
        self._args = args
        # One at a time into the list ``stop`` reads: a stop signal raised while spawning still ends those started.
        for i in range(count):
            self._procs.append(self._spawn(i))
        self._monitor = threading.Thread(target=self._watch, name=self._thread_name, daemon=True)
        self._monitor.start()

    def _spawn(self, index: int) -> BaseProcess:
        proc = self._ctx.Process(
            target=self._target, args=self._args, name=f"lakemount-{self._name}-{index}", daemon=True
        )
        proc.start()
        return proc

    def _watch(self) -> None:
        failures = [0] * len(self._procs)
        while not self._stopping.wait(0.5):
            for i, proc in enumerate(self._procs):
                if proc.is_alive() or self._stopping.is_set():
                    continue
                self._log.warning("%s worker %s exited with %s; restarting", self._name, proc.pid, proc.exitcode)
                time.sleep(RESTART_BACKOFF[min(failures[i], len(RESTART_BACKOFF) - 1)])
                failures[i] += 1
                if not self._stopping.is_set():
                    self._procs[i] = self._spawn(i)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until ``stop`` (True) or the timeout (False)."""
        return self._stopping.wait(timeout)

    def stop(self) -> None:
        """Stop accepting, let workers finish in-flight requests, then end them (idempotent)."""
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


class Server(Protocol):
    """What :func:`serve_forever` and :class:`UpService` need of a server."""

    def start(self) -> None: ...

    def wait(self, timeout: float | None = None) -> bool: ...

    def stop(self) -> None: ...


def serve_forever(server: Server, announce_line: Callable[[], str], *, announce: Any = print) -> None:
    """Start ``server``, ``announce(announce_line())``, and serve until SIGINT or SIGTERM, then stop it.

    ``announce_line`` is called after ``start`` (so it may read the bound URL); a server whose ``sock`` is
    bound already was started by the caller (``lakemount serve`` binds the gateway before the API).
    Errors of ``start`` (a port that cannot be bound: ``OSError``) propagate.
    """
    if getattr(server, "sock", None) is None:
        server.start()
    stop = threading.Event()

    def on_signal(_sig: int, _frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    announce(announce_line())
    try:
        while not stop.wait(0.5):
            pass
    finally:
        server.stop()


class UpService:
    """A server as one of the services of ``lakemount up`` (see ``cli/services.py``), one server per ``App``.

    ``make(app)`` creates the server (not yet started) and the function that prints its addresses; the
    front end's ``service`` module exports :meth:`functions` as its ``start_for_up``, ``wait_for_up`` and
    ``stop_for_up``.
    """

    def __init__(self, make: Callable[[Any], tuple[Server, Callable[[], None]]]) -> None:
        self._make = make
        self._servers: dict[int, Server] = {}

    def functions(self) -> tuple[Callable[[Any], None], Callable[..., None], Callable[[Any], None]]:
        """``start_for_up``, ``wait_for_up`` and ``stop_for_up``, for a ``service`` module to export."""
        return self.start_for_up, self.wait_for_up, self.stop_for_up

    def start_for_up(self, app: Any) -> None:
        """Start the server for ``app`` and print its addresses; errors of ``start`` (bad settings, a port that
        cannot be bound) propagate.

        The server is known to :meth:`stop_for_up` before it starts: a stop signal that lands while it starts
        or prints (``up`` raises out of whatever it runs) still stops the workers already spawned.
        """
        server, announce = self._make(app)
        self._servers[id(app)] = server
        server.start()
        announce()

    def wait_for_up(self, app: Any, poll: float = 0.5) -> None:
        """Block until the server of ``app`` is stopped (returns at once if none; Ctrl-C raises out of here)."""
        server = self._servers.get(id(app))
        while server is not None and not server.wait(poll):
            pass

    def stop_for_up(self, app: Any) -> None:
        """Stop and forget the server of ``app`` (no-op if none was started)."""
        server = self._servers.pop(id(app), None)
        if server is not None:
            server.stop()
