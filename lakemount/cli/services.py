"""Running the long-lived services (mount, S3 gateway, REST API) that ``up`` brings up.

Each service is optional: a service whose module is not part of this install
is reported and skipped.

SIGINT and SIGTERM both stop every service ``up`` started, then ``up`` dies of
that same signal, so whoever waits on it (a shell, a supervisor) sees how it
ended.  Both are handled explicitly: a job a shell starts in the background
inherits SIGINT ignored (and Python then installs no handler of its own), and
SIGTERM's default action would end ``up`` alone, leaving the mount, the worker
processes, their ports and the FUSE mount behind.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import sys
from collections.abc import Iterator
from types import FrameType

import click

from lakemount.app import App

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stopped(KeyboardInterrupt):
    """A stop signal reached ``up``; raised out of whatever it was waiting on."""

    def __init__(self, signum: int) -> None:
        super().__init__()
        self.signum = signum


def available(module: str) -> bool:
    """Whether ``module`` can be imported (its package installed), without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def run_services(app: App) -> None:
    """Run every available service in the foreground until interrupted."""
    services = []
    if available("lakemount.fuse.service"):
        services.append("lakemount.fuse.service")
    if available("lakemount.gateway.service"):
        services.append("lakemount.gateway.service")
    if available("lakemount.api.service"):
        services.append("lakemount.api.service")
    if not services:
        click.echo("(this build has no mount or gateway service yet: the CLI is the interface)")
        return
    import importlib

    runners = [importlib.import_module(m) for m in services]
    try:
        with _stop_signals_raise():
            try:
                # Inside the try: a service that fails to start (a port in use) stops those already
                # started, so `up` never exits leaving a mount or a gateway behind.
                for r in runners:
                    r.start_for_up(app)  # type: ignore[attr-defined]
                for r in runners:
                    r.wait_for_up(app)  # type: ignore[attr-defined]
            finally:
                for r in reversed(runners):
                    r.stop_for_up(app)  # type: ignore[attr-defined]
    except Stopped as stopped:
        click.echo(f"{signal.Signals(stopped.signum).name}: stopped every service", err=True)
        _die_of(stopped.signum)


@contextlib.contextmanager
def _stop_signals_raise() -> Iterator[None]:
    """While inside, SIGINT and SIGTERM raise ``Stopped`` in the main thread, whatever their inherited disposition."""

    def raise_stopped(signum: int, _frame: FrameType | None) -> None:
        # Ignored from here on: a second signal must not cut the stopping short (a mount half saved).
        for each in STOP_SIGNALS:
            signal.signal(each, signal.SIG_IGN)
        raise Stopped(signum)

    previous = {signum: signal.signal(signum, raise_stopped) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _die_of(signum: int) -> None:
    """End this process by ``signum`` with its default action, so the exit status says which signal it was."""
    sys.stdout.flush()
    sys.stderr.flush()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    # Delivered at once to this very thread; reached only if the signal is blocked.
    sys.exit(128 + signum)
