"""A live ``lakemount serve`` (gateway and REST API) for the API's end-to-end tests, and clients for it.

``running`` makes a fresh ``LAKEMOUNT_HOME`` with an Admin user, runs
``lakemount serve --listen 127.0.0.1:0`` (the API then also takes a free
port), reads both addresses from its output and waits until the API answers;
the server is stopped even when a test fails.  ``served`` (module scope) is one
such server shared by the package's modules (one per test process), or the
module's own for those in ``OWN_SERVER``.  ``lakefs_client`` is the real
``lakefs`` SDK's client on it; each test makes its own repository.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET, Gateway, _create_admin, lakemount_cmd

_counter = itertools.count()


@dataclass
class Served:
    api: str  # http://host:port (no /api/v1)
    gateway: Gateway

    @property
    def home(self) -> Path:
        return self.gateway.home

    def client(self, key: str = ADMIN_KEY, secret: str = ADMIN_SECRET) -> Any:
        import lakefs

        return lakefs.Client(host=self.api, username=key, password=secret)

    def repo_name(self, prefix: str = "r") -> str:
        return f"{prefix}{os.getpid() % 1000:03d}-{next(_counter):04d}"

    def repo(self, client: Any = None, prefix: str = "r") -> Any:
        import lakefs

        name = self.repo_name(prefix)
        ns = f"local://{self.home}/data/ns/{name}"  # under the default namespace root
        return lakefs.Repository(name, client=client or self.client()).create(storage_namespace=ns)


def start(tmp: Path, *, gateway_workers: int = 1, env: dict[str, str] | None = None) -> Served:
    """A running ``lakemount serve`` on a fresh home under ``tmp``; ``env`` adds ``LAKEMOUNT_*`` settings."""
    home = tmp / "home"
    home.mkdir(parents=True, exist_ok=True)
    extra = env or {}
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEMOUNT_")}
    env.update(extra, LAKEMOUNT_HOME=str(home))
    _create_admin(env)
    log_path = tmp / "serve.log"
    log = open(log_path, "w")  # noqa: SIM115 - owned by the process for its lifetime
    proc = subprocess.Popen(
        lakemount_cmd("serve", "--listen", "127.0.0.1:0", "--workers", str(gateway_workers)),
        env=env, stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True,
    )
    assert proc.stdout is not None
    gw_line = proc.stdout.readline()
    api_line = proc.stdout.readline()
    gw = Gateway(gw_line.split("listening on ", 1)[1].split()[0] if "listening on" in gw_line else "", home, env, proc, log_path)
    if "API listening on" not in api_line:
        gw.stop()
        raise AssertionError(f"serve did not start the API: {gw_line!r} {api_line!r} {gw.log()}")
    api = api_line.split("listening on ", 1)[1].split()[0].removesuffix("/api/v1")
    served = Served(api, gw)
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(api + "/api/v1/healthcheck", timeout=5)
            break
        except (urllib.error.HTTPError, OSError):
            if time.monotonic() > deadline or proc.poll() is not None:
                gw.stop()
                raise AssertionError(f"API never answered: {gw.log()}") from None
            time.sleep(0.1)
    return served


def stop(served: Served) -> None:
    served.gateway.stop()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(served.gateway.proc.pid, signal.SIGKILL)


@contextlib.contextmanager
def running(tmp: Path, **kwargs: Any) -> Iterator[Served]:
    served = start(tmp, **kwargs)
    try:
        yield served
    finally:
        stop(served)


# test_http: the API workers' metrics snapshots and the landing files under the home, which another module's
# requests would move; test_schemathesis: it makes users, groups and repositories of any name it likes.
OWN_SERVER = frozenset({"test_http", "test_schemathesis"})


@contextlib.contextmanager
def checked(tmp: Path, **kwargs: Any) -> Iterator[Served]:
    """``running``, and after the server stops its log holds no unexpected error (each is answered 500 and logged)."""
    with running(tmp, **kwargs) as s:
        yield s
        log = s.gateway.log()
    assert "unexpected error serving" not in log, log[-5000:]


@pytest.fixture(scope="package")
def shared_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with checked(tmp_path_factory.mktemp("api-shared")) as s:
        yield s


@pytest.fixture(scope="module")
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The package's server (one per test process: a start is ~5 s of CPU) unless the module is in ``OWN_SERVER``.

    The modules sharing it do not meet: each test makes its own repository (``Served.repo_name`` numbers them in
    the process), and the users and groups the modules make have names no other module uses.
    """
    name = request.module.__name__.rsplit(".", 1)[-1]
    if name not in OWN_SERVER:
        yield request.getfixturevalue("shared_served")
        return
    with checked(tmp_path_factory.mktemp("api-" + name)) as s:
        yield s


@pytest.fixture
def client(served: Served) -> Any:
    return served.client()


@pytest.fixture
def repo(served: Served, client: Any) -> Any:
    return served.repo(client)
