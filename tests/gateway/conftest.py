"""Default fixtures of the gateway server tests: a gateway, a client, a fresh bucket per test.

One gateway serves every module of the package that needs nothing of its own (per test process: with workers, per
worker that takes such a module): each test makes its own bucket (``bucket``, a unique name), so the modules do not
meet, and a start (the admin, ``lakemount serve`` and its 2 workers) cost ~6 s of CPU. A module that looks at the
gateway's whole home or at its users (``OWN_GATEWAY``) gets one of its own, as does a module that defines ``gw``
(other settings, another client's needs).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .server_fixture import Gateway, start_gateway

# test_server_bad_input: no landing file anywhere under the home (another module's aborted upload would be one);
# test_server_auth: the users and policies it makes, and the policy cache's time-to-live it waits out.
OWN_GATEWAY = frozenset({"test_server_bad_input", "test_server_auth"})


@pytest.fixture(scope="package")
def shared_gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    g = start_gateway(tmp_path_factory.mktemp("gw-shared"))
    yield g
    g.stop()


@pytest.fixture(scope="module")
def gw(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    name = request.module.__name__.rsplit(".", 1)[-1]
    if name not in OWN_GATEWAY:
        yield request.getfixturevalue("shared_gw")
        return
    g = start_gateway(tmp_path_factory.mktemp("gw-" + name))
    yield g
    g.stop()


@pytest.fixture(scope="module")
def s3(gw: Gateway) -> Any:
    return gw.client()


@pytest.fixture
def bucket(gw: Gateway, s3: Any) -> str:
    return gw.bucket(s3)
