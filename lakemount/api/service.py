"""The REST API as one of the services of ``lakemount up`` (see ``cli/services.py``).

Started after the gateway, which creates the first admin user and prints its
keys; the same keys work here (basic auth, or ``/auth/login`` for a token).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from lakemount.api.server import ApiServer
    from lakemount.app import App

_servers: dict[int, ApiServer] = {}


def start_for_up(app: App) -> None:
    """Start the REST API server for ``lakemount up`` and print its URLs."""
    from lakemount.api.server import ApiServer, settings_from_config

    server = ApiServer(app.config, settings_from_config(app.config))
    server.start()
    _servers[id(app)] = server
    click.echo(f"REST API: {server.url}/api/v1 ({server.settings.workers} workers; lakeFS clients: host={server.url})")
    click.echo(f"web UI: {server.url}/ (log in with an access key)")


def wait_for_up(app: App, poll: float = 0.5) -> None:
    """Block until the API is stopped (Ctrl-C raises out of here)."""
    server = _servers.get(id(app))
    while server is not None and not server.wait(poll):
        pass


def stop_for_up(app: App) -> None:
    """Stop the REST API server ``start_for_up`` started for ``app``, if any."""
    server: Any = _servers.pop(id(app), None)
    if server is not None:
        server.stop()
