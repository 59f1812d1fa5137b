"""Default fixtures of the gateway server tests: one gateway per test module, a client, a fresh bucket."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .server_fixture import Gateway, start_gateway


@pytest.fixture(scope="module")
def gw(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    g = start_gateway(tmp_path_factory.mktemp("gw-" + request.module.__name__.rsplit(".", 1)[-1]))
    yield g
    g.stop()


@pytest.fixture(scope="module")
def s3(gw: Gateway) -> Any:
    return gw.client()


@pytest.fixture
def bucket(gw: Gateway, s3: Any) -> str:
    return gw.bucket(s3)
