"""Fixtures for the block adapter tests: one moto S3 server (in this process) per session."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from lakemount.graveler.ports import BlockAdapter
from tests.moto_server import moto_s3

BUCKET = "lakemount-test"
CREDENTIALS = {"access_key_id": "testing", "secret_access_key": "testing", "region": "us-east-1"}


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """URL of a moto S3 server (in this process, on a free port) holding bucket BUCKET."""
    with moto_s3(BUCKET) as endpoint:
        yield endpoint


@pytest.fixture(scope="session")
def s3_adapter(s3_endpoint: str) -> BlockAdapter:
    """One S3Adapter on the moto server, shared like a real deployment shares its client."""
    from lakemount.block.s3 import S3Adapter

    return S3Adapter(
        endpoint_url=s3_endpoint,
        region=CREDENTIALS["region"],
        access_key_id=CREDENTIALS["access_key_id"],
        secret_access_key=CREDENTIALS["secret_access_key"],
    )


@pytest.fixture(scope="session")
def s3_bucket(s3_endpoint: str) -> str:
    """Name of the bucket that exists on the moto server."""
    return BUCKET


@pytest.fixture(scope="session")
def s3_options(s3_endpoint: str) -> dict[str, Any]:
    """S3Adapter keyword arguments for the moto server."""
    return {"endpoint_url": s3_endpoint, **CREDENTIALS}
