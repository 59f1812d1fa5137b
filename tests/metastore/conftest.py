"""Ref store fixtures: ``ref_url``, an empty ref store on SQLite and on PostgreSQL.

The PostgreSQL cluster (``pg_cluster``, ``pg_url``: a fresh database per test) is the run's one
cluster of tests/postgres.py; its names stay importable from here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.postgres import PG_BIN, PgCluster, _run_as

__all__ = ["PG_BIN", "PgCluster", "_run_as"]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def ref_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The SQLAlchemy URL of an empty ref store, once per backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/refs.db"
    return request.getfixturevalue("pg_url")
