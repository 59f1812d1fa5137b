"""Fixtures of the Spark job tests: one local[2] session and one moto S3 server per test session.

Apps are built from a configuration (never from the environment) so that the
executors, which open their own app from it, see the same stores.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lakemount.app import App
from lakemount.config import Config, load
from tests.moto_server import moto_s3

CREDENTIALS = {"access_key_id": "testing", "secret_access_key": "testing", "region": "us-east-1"}


def make_config(home: Path, s3_endpoint: str | None = None) -> Config:
    # The tests import from directories beside the home: the roots a local import may read.
    env = {"LAKEMOUNT_HOME": str(home), "LAKEMOUNT_CACHE_DISK_BYTES": "0",
           "LAKEMOUNT_BLOCKSTORE_LOCAL_IMPORT_ROOTS": str(home.parent)}
    if s3_endpoint:
        env.update(
            LAKEMOUNT_BLOCKSTORE_S3_ENDPOINT=s3_endpoint,
            LAKEMOUNT_BLOCKSTORE_S3_REGION=CREDENTIALS["region"],
            LAKEMOUNT_BLOCKSTORE_S3_ACCESS_KEY_ID=CREDENTIALS["access_key_id"],
            LAKEMOUNT_BLOCKSTORE_S3_SECRET_ACCESS_KEY=CREDENTIALS["secret_access_key"],
        )
    return load(env=env)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from lakemount.jobs.session import get_spark, stop_spark

    session = get_spark("local[2]")
    yield session
    stop_spark()


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A moto S3 server in this process, with a fast bucket listing (see moto_listing.py)."""
    from tests.jobs import moto_listing

    moto_listing.install()
    with moto_s3() as endpoint:
        yield endpoint


@pytest.fixture
def s3(s3_endpoint: str) -> Any:
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        aws_access_key_id=CREDENTIALS["access_key_id"],
        aws_secret_access_key=CREDENTIALS["secret_access_key"],
        region_name=CREDENTIALS["region"],
    )


@pytest.fixture
def app(tmp_path: Path, s3_endpoint: str) -> App:
    """An app on a fresh home (SQLite + local block store) that can also reach the moto server."""
    return App(make_config(tmp_path / "home", s3_endpoint))


def moto_backend() -> Any:
    """moto's in-process S3 backend (the server thread serves the same one)."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    return s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
