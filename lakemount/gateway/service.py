"""The gateway as one of the services of ``lakemount up`` (see ``cli/services.py``).

``start_for_up`` starts a ``GatewayServer`` beside the mount.  On the first
``up`` (no user in the auth store yet) it creates the user ``admin`` with the
Admin role and prints its access key and secret once: they are not stored in
clear anywhere, so that is the only time they are shown.  The same first run
creates the default groups ``Admins``, ``Developers`` and ``Viewers`` (see
``auth.policies.DEFAULT_GROUPS``) and makes ``admin`` a member of ``Admins``;
``admin`` also keeps Admin attached directly, so that editing the groups
cannot lock the only administrator out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from lakemount.serving.workers import UpService

if TYPE_CHECKING:
    from lakemount.app import App
    from lakemount.gateway.server import GatewayServer as GatewayServerType

ADMIN_USER = "admin"


def ensure_admin(app: App) -> tuple[str, str] | None:
    """Create the first admin user and the default groups if there is no user at all; returns its new (key id, secret)."""
    from lakemount.auth.model import MembershipAlreadyExists, UserAlreadyExists
    from lakemount.auth.policies import ADMIN, DEFAULT_GROUPS

    store = app.auth
    if store.list_users(limit=1):
        return None
    try:
        store.create_user(ADMIN_USER)
    except UserAlreadyExists:
        return None  # another process won the race and printed the keys
    store.attach_policy(ADMIN_USER, ADMIN)
    store.create_default_groups()
    admins = next(g for g, p in DEFAULT_GROUPS.items() if p == ADMIN)
    try:
        store.add_member(admins, ADMIN_USER)
    except MembershipAlreadyExists:
        pass
    creds = store.create_credentials(ADMIN_USER)
    return creds.access_key_id, creds.secret_access_key


def _make(app: App) -> tuple[GatewayServerType, Callable[[], None]]:
    """The gateway for ``lakemount up`` (not started), creating the admin user on first run, and what prints
    its address (and the admin's keys, once) when it serves.

    Raises ``InvalidArgument`` for bad gateway settings; a port that cannot be bound raises ``OSError`` from ``start``.
    """
    from lakemount.gateway.server import GatewayServer
    from lakemount.gateway.settings import from_config

    settings = from_config(app.config)
    created = ensure_admin(app)
    server = GatewayServer(app.config, settings)

    def announce() -> None:
        click.echo(f"S3 gateway: {server.url} ({settings.workers} workers)")
        if created is not None:
            key_id, secret = created
            click.echo("Created user 'admin' (Admin role). Its credentials are shown this once; keep them:")
            click.echo(f"  access_key_id:     {key_id}")
            click.echo(f"  secret_access_key: {secret}")
            click.echo(f"  e.g. AWS_ACCESS_KEY_ID={key_id} AWS_SECRET_ACCESS_KEY=... aws --endpoint-url {server.url} s3 ls")

    return server, announce


start_for_up, wait_for_up, stop_for_up = UpService(_make).functions()
