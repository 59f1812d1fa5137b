"""A live ``lakemount serve`` for the Iceberg catalog's tests, and pyiceberg catalogs on it.

``lake`` (module scope) is the API tests' server (``tests/api/conftest.py``), one
shared by the package's modules (one per test process) but for those in ``OWN_LAKE``;
``iceberg_catalog(lake, ...)`` is an unmodified pyiceberg ``RestCatalog`` that
gets its token from ``oauth/tokens`` with an access key and reads and writes
data through the S3 gateway, as a user configures it from docs/ICEBERG.md.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from tests.api.conftest import Served, checked
from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET

_names = itertools.count()


# test_spark: its JVM's S3A client writes through the gateway; it runs in the spark tier only, apart, as before.
OWN_LAKE = frozenset({"test_spark"})


@pytest.fixture(scope="package")
def shared_lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with checked(tmp_path_factory.mktemp("iceberg-shared")) as s:
        yield s


@pytest.fixture(scope="module")
def lake(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The package's server (one per test process) unless the module is in ``OWN_LAKE``: each test has a repository
    of its own (``repo``, or ``lake.repo()``), and the users the modules make have names no other module uses."""
    name = request.module.__name__.rsplit(".", 1)[-1]
    if name not in OWN_LAKE:
        yield request.getfixturevalue("shared_lake")
        return
    with checked(tmp_path_factory.mktemp("iceberg-" + name)) as s:
        yield s


def iceberg_catalog(lake: Served, key: str = ADMIN_KEY, secret: str = ADMIN_SECRET, *, uri: str | None = None) -> Any:
    """A pyiceberg REST catalog on ``lake`` (``uri``: another address form, e.g. a ``relative_to`` one)."""
    from pyiceberg.catalog.rest import RestCatalog

    uri = uri or f"{lake.api}/iceberg/api"
    return RestCatalog(
        f"lake{next(_names)}",
        uri=uri,
        credential=f"{key}:{secret}",
        **{"oauth2-server-uri": f"{uri}/v1/oauth/tokens"},
        **{"s3.endpoint": lake.gateway.url, "s3.access-key-id": key, "s3.secret-access-key": secret,
           "s3.region": "us-east-1"},
    )


@pytest.fixture
def catalog(lake: Served) -> Any:
    return iceberg_catalog(lake)


@pytest.fixture
def repo(lake: Served) -> Any:
    """A fresh repository on ``lake`` (the lakeFS SDK's object, ``repo.id`` its name)."""
    return lake.repo()
