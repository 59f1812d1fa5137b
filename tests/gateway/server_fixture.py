"""A real ``lakemount serve`` for the gateway's end-to-end tests, and clients for it.

``start_gateway`` makes a fresh ``LAKEMOUNT_HOME`` with an Admin user, starts
the gateway on a free port (``--listen 127.0.0.1:0``, the address read from its
first line of output) and waits until it answers; ``Gateway.stop`` ends it
(SIGTERM, then SIGKILL).  Test modules use it through a module-scoped fixture
(one server per module: starting worker processes costs a second or two; the REST API is left out
unless asked for, ``api=True``) and
give each test its own bucket.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
from botocore.config import Config as BotoConfig
from botocore.exceptions import ClientError

ADMIN_KEY = "AKIAGATEWAYTESTADMIN"
ADMIN_SECRET = "gatewaytestadminsecret0000000000000000000"
_counter = itertools.count()


def lakemount_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "lakemount.cli.main", *args]


@dataclass
class Gateway:
    url: str
    home: Path
    env: dict[str, str]
    proc: subprocess.Popen[str]
    log_path: Path
    _apps: list[Any] = field(default_factory=list)

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def client(
        self,
        key: str = ADMIN_KEY,
        secret: str = ADMIN_SECRET,
        *,
        signature: str = "s3v4",
        verify: str | None = None,
        **config: Any,
    ) -> Any:
        cfg = BotoConfig(
            signature_version=signature,
            s3={"addressing_style": config.pop("addressing_style", "path")},
            retries={"max_attempts": 1},
            **config,
        )
        return boto3.client(
            "s3",
            endpoint_url=self.url,
            aws_access_key_id=key,
            aws_secret_access_key=secret,
            region_name="us-east-1",
            config=cfg,
            verify=verify,
        )

    def cli(self, *args: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess[str]:
        """``lakemount ARGS`` on this gateway's home, in this process (tests/cli/running.py), in its environment."""
        from tests.cli.running import lakemount

        env: dict[str, str | None] = {name: None for name in os.environ if name not in self.env}
        res = lakemount(None, *args, stdin=input, env={**env, **self.env})
        if check and res.returncode != 0:
            raise AssertionError(f"lakemount {' '.join(args)} failed ({res.returncode}): {res.stderr}")
        return res

    def cli_json(self, *args: str) -> Any:
        return json.loads(self.cli(*args, "--json").stdout)

    def user(self, user_id: str, *policies: str) -> tuple[str, str]:
        """Create a user with policies attached; returns (access key id, secret).

        In process, on the same stores (``test_server_auth`` covers the CLI verbs).
        Retried on "database is locked": the auth store's read-then-write
        transactions start deferred, so on SQLite they can lose to a gateway
        worker that is creating its tables at that moment.
        """
        from sqlalchemy.exc import OperationalError

        store = self.app().auth
        for attempt in range(10):
            try:
                if user_id not in {u.id for u in store.list_users()}:
                    store.create_user(user_id)
                attached = store.list_user_policies(user_id)
                for p in policies:
                    if p not in attached:
                        store.attach_policy(user_id, p)
                creds = store.create_credentials(user_id)
                return creds.access_key_id, creds.secret_access_key
            except OperationalError:
                if attempt == 9:
                    raise
                time.sleep(0.2)
        raise AssertionError("unreachable")

    def app(self) -> Any:
        """An in-process ``App`` on the same stores (what the mount and the CLI use)."""
        from lakemount.app import App
        from lakemount.config import load

        app = App(load(None, env=self.env))
        self._apps.append(app)
        return app

    def bucket(self, s3: Any = None, prefix: str = "b") -> str:
        """A new, empty bucket with a unique name."""
        name = f"{prefix}{os.getpid() % 1000:03d}-{next(_counter):04d}"
        (s3 or self.client()).create_bucket(Bucket=name)
        return name

    def log(self) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")
        return ""

    def stop(self) -> None:
        for app in self._apps:
            with contextlib.suppress(Exception):
                app.release_connections()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def _create_admin(env: dict[str, str]) -> None:
    from lakemount.app import App
    from lakemount.config import load

    app = App(load(None, env=env))
    app.auth.create_user("admin")
    app.auth.attach_policy("admin", "Admin")
    app.auth.create_credentials("admin", ADMIN_KEY, ADMIN_SECRET)
    app.release_connections()


def start_gateway(
    tmp: Path,
    *,
    workers: int = 2,
    extra_args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    ca_file: str | None = None,
    api: bool = False,
) -> Gateway:
    """A running ``lakemount serve`` on a fresh home under ``tmp``, without its REST API unless ``api``.

    The gateway's tests talk S3 only: the API's workers (one per CPU) would double a start's CPU (~2.2 s of
    CPU with ``--no-api``, ~4.6 s without, docs/TESTING.md). With ``api`` the API's announcement is the next line
    of ``proc.stdout``, for the caller to read.
    """
    home = tmp / "home"
    home.mkdir(parents=True, exist_ok=True)
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEMOUNT_")}
    full_env.update(LAKEMOUNT_HOME=str(home), **(env or {}))
    _create_admin(full_env)
    log_path = tmp / "gateway.log"
    log = open(log_path, "w")  # noqa: SIM115 - owned by the process for its lifetime
    proc = subprocess.Popen(
        lakemount_cmd("serve", "--listen", "127.0.0.1:0", "--workers", str(workers), *extra_args,
                      *(() if api else ("--no-api",))),
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "listening on" not in line:
        proc.kill()
        raise AssertionError(f"gateway did not start: {line!r} {log_path.read_text()}")
    url = line.split("listening on ", 1)[1].split()[0]
    gw = Gateway(url, home, full_env, proc, log_path)
    deadline = time.monotonic() + 60
    context = ssl.create_default_context(cafile=ca_file) if ca_file else None
    while True:
        try:
            urllib.request.urlopen(url + "/", timeout=5, context=context)
        except urllib.error.HTTPError:
            break  # an S3 error (AccessDenied): a worker is serving
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                gw.stop()
                raise AssertionError(f"gateway never answered: {gw.log()}") from None
            time.sleep(0.1)
    return gw


@contextlib.contextmanager
def running_gateway(tmp: Path, **kwargs: Any) -> Iterator[Gateway]:
    gw = start_gateway(tmp, **kwargs)
    try:
        yield gw
    finally:
        gw.stop()


def signed_headers(
    method: str, url: str, headers: dict[str, str], payload: str, *, when: datetime | None = None,
    key: str = ADMIN_KEY, secret: str = ADMIN_SECRET,
) -> dict[str, str]:
    """Headers of a SigV4 request signed by hand: any payload mode, any signing time.

    (botocore always hashes the payload itself and signs with the current time.)
    """
    from lakemount.gateway.sig.canonical import canonical_query, canonical_request, uri_encode_path
    from lakemount.gateway.sig.v4 import sign, signing_key, string_to_sign

    split = urlsplit(url)
    amz_date = (when or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    all_headers = {"host": split.netloc, "x-amz-date": amz_date, "x-amz-content-sha256": payload}
    all_headers.update({k.lower(): v for k, v in headers.items()})
    signed = sorted(all_headers)
    query = canonical_query(split.query)
    creq = canonical_request(method, uri_encode_path(split.path), query, {k: [v] for k, v in all_headers.items()}, signed, payload)
    scope = f"{amz_date[:8]}/us-east-1/s3/aws4_request"
    signature = sign(signing_key(secret, amz_date[:8], "us-east-1"), string_to_sign(amz_date, scope, creq))
    all_headers["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={key}/{scope}, SignedHeaders={';'.join(signed)}, Signature={signature}"
    )
    return all_headers


def code(exc: pytest.ExceptionInfo[ClientError]) -> str:
    """The S3 error code a boto3 call failed with."""
    return str(exc.value.response["Error"]["Code"])
