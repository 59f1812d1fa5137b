"""The REST API as one of the services of ``lakemount up`` (see ``cli/services.py``).

Started after the gateway, which creates the first admin user and prints its
keys; the same keys work here (basic auth, or ``/auth/login`` for a token).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from lakemount.serving.workers import UpService

if TYPE_CHECKING:
    from lakemount.api.server import ApiServer as ApiServerType
    from lakemount.app import App


def _make(app: App) -> tuple[ApiServerType, Callable[[], None]]:
    """The REST API server for ``lakemount up`` (not started) and what prints its URLs once it is."""
    from lakemount.api.server import ApiServer, settings_from_config

    server = ApiServer(app.config, settings_from_config(app.config))

    def announce() -> None:
        click.echo(f"REST API: {server.url}/api/v1 ({server.settings.workers} workers; lakeFS clients: host={server.url})")
        click.echo(f"web UI: {server.url}/ (log in with an access key)")

    return server, announce


start_for_up, wait_for_up, stop_for_up = UpService(_make).functions()
