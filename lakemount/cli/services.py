"""Running the long-lived services (mount, S3 gateway, REST API) that ``up`` brings up.

Each service is optional: a service whose module is not part of this install
is reported and skipped.
"""

from __future__ import annotations

import importlib.util

import click

from lakemount.app import App


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
        # Inside the try: a service that fails to start (a port in use) stops those already
        # started, so `up` never exits leaving a mount or a gateway behind.
        for r in runners:
            r.start_for_up(app)  # type: ignore[attr-defined]
        for r in runners:
            r.wait_for_up(app)  # type: ignore[attr-defined]
    finally:
        for r in reversed(runners):
            r.stop_for_up(app)  # type: ignore[attr-defined]
