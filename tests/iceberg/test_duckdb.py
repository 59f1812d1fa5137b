"""DuckDB's iceberg extension, offline from its PyPI wheel, attaches the per-ref address and reads a branch's table."""

from __future__ import annotations

import glob
import os
from typing import Any

import pyarrow as pa
import pytest

from tests.api.conftest import Served
from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET

duckdb = pytest.importorskip("duckdb")
EXTENSIONS = ("httpfs", "avro", "iceberg")


def extension_file(name: str) -> str:
    module = pytest.importorskip(f"duckdb_extension_{name}")
    found = glob.glob(os.path.join(os.path.dirname(module.__file__), "extensions", "*", f"{name}.duckdb_extension"))
    assert len(found) == 1, found
    return found[0]


def attached(lake: Served, repo: str, ref: str) -> Any:
    con = duckdb.connect()
    for name in EXTENSIONS:
        con.execute(f"INSTALL '{extension_file(name)}'")
        con.execute(f"LOAD {name}")
    address = f"{lake.api}/iceberg/relative_to/{repo}.{ref}/api"
    con.execute(f"CREATE SECRET lake_s3 (TYPE S3, KEY_ID '{ADMIN_KEY}', SECRET '{ADMIN_SECRET}', "
                f"ENDPOINT '{lake.gateway.url.removeprefix('http://')}', URL_STYLE 'path', USE_SSL false, REGION 'us-east-1')")
    con.execute(f"CREATE SECRET lake_iceberg (TYPE ICEBERG, CLIENT_ID '{ADMIN_KEY}', CLIENT_SECRET '{ADMIN_SECRET}', "
                f"OAUTH2_SERVER_URI '{address}/v1/oauth/tokens')")
    con.execute(f"ATTACH '' AS lake (TYPE ICEBERG, ENDPOINT '{address}', SECRET lake_iceberg)")
    return con


def test_duckdb_reads_a_branchs_table_and_a_tag_as_it_was(lake: Served, catalog: Any, repo: Any) -> None:
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    feat = repo.branch("feat").create(source_reference="main")
    catalog.create_namespace((repo.id, "feat", "db"))
    table = catalog.create_table((repo.id, "feat", "db", "events"), schema=Schema(
        NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType(), required=False)))
    table.append(pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["a", "b"]}))
    feat.commit(message="events")
    repo.tag("before").create("feat")
    table.append(pa.table({"id": pa.array([3], pa.int64()), "name": ["c"]}))

    con = attached(lake, repo.id, "feat")
    assert con.execute("SELECT id, name FROM lake.db.events ORDER BY id").fetchall() == [(1, "a"), (2, "b"), (3, "c")]
    tagged = attached(lake, repo.id, "before")
    assert tagged.execute("SELECT id FROM lake.db.events ORDER BY id").fetchall() == [(1,), (2,)]
