"""Fixtures of the audit trail's tests: an in-process gateway and API over one fresh home."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakemount.api.handler import ApiService
from lakemount.app import App
from lakemount.config import load
from lakemount.gateway.handler import S3Gateway
from lakemount.gateway.settings import from_config
from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET, _create_admin


def basic(key: str, secret: str) -> tuple[str, str]:
    return ("authorization", "Basic " + base64.b64encode(f"{key}:{secret}".encode()).decode())


class Lake:
    """One home: an App, its API service, its gateway, the admin's API credentials."""

    def __init__(self, home: Path, **env: str) -> None:
        self.env = {"LAKEMOUNT_HOME": str(home), **env}
        _create_admin(self.env)
        self.app = App(load(None, env=self.env))
        self.app.start()  # as a server's worker does: the audit flusher runs (App.close, below, stops it)
        self.api = ApiService(self.app)
        self.gw = S3Gateway(self.app, from_config(self.app.config))
        self.auth = basic(ADMIN_KEY, ADMIN_SECRET)

    def user(self, name: str, *policies: str) -> tuple[str, str]:
        """A user with ``policies``; returns (access key, secret)."""
        store = self.app.auth
        store.create_user(name)
        for p in policies:
            store.attach_policy(name, p)
        c = store.create_credentials(name)
        return c.access_key_id, c.secret_access_key

    def records(self, repo: str, **where: object) -> list:  # type: ignore[type-arg]
        from lakemount.audit.table import Filter

        assert self.app.audit is not None
        self.app.audit.flush()
        return list(self.app.catalog.audit_records(repo, Filter(repo=repo, **where)))  # type: ignore[arg-type]


@pytest.fixture
def lake(tmp_path: Path) -> Iterator[Lake]:
    lk = Lake(tmp_path / "home")
    yield lk
    lk.app.close()
