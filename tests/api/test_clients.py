"""lakefs-spec (fsspec) with pandas and pyarrow on ``lakefs://``, and one catalog under the API, the gateway and the CLI."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from lakefs_spec import LakeFSFileSystem

from tests.api.conftest import Served
from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET


@pytest.fixture
def fs(served: Served) -> LakeFSFileSystem:
    return LakeFSFileSystem(host=served.api, username=ADMIN_KEY, password=ADMIN_SECRET)


def options(served: Served) -> dict[str, str]:
    return {"host": served.api, "username": ADMIN_KEY, "password": ADMIN_SECRET}


def test_pandas_parquet_round_trip(served: Served, repo: Any) -> None:
    df = pd.DataFrame({"id": range(1000), "name": [f"n{i}" for i in range(1000)], "x": [i * 0.5 for i in range(1000)]})
    url = f"lakefs://{repo.id}/main/tables/t.parquet"
    df.to_parquet(url, storage_options=options(served), index=False)
    back = pd.read_parquet(url, storage_options=options(served))
    pd.testing.assert_frame_equal(back, df)
    df.to_csv(f"lakefs://{repo.id}/main/tables/t.csv", storage_options=options(served), index=False)
    assert pd.read_csv(f"lakefs://{repo.id}/main/tables/t.csv", storage_options=options(served)).shape == (1000, 3)
    repo.branch("main").commit("tables")
    old = pd.read_parquet(f"lakefs://{repo.id}/main/tables/t.parquet", storage_options=options(served))
    pd.testing.assert_frame_equal(old, df)


def test_pyarrow_dataset_over_partitions(served: Served, repo: Any, fs: LakeFSFileSystem) -> None:
    for day in ("2026-01-01", "2026-01-02", "2026-01-03"):
        table = pa.table({"v": list(range(100)), "day": [day] * 100})
        with fs.open(f"{repo.id}/main/events/day={day}/part-0.parquet", "wb") as f:
            pq.write_table(table.drop(["day"]), f)
    dataset = ds.dataset(f"{repo.id}/main/events", filesystem=fs, format="parquet", partitioning="hive")
    table = dataset.to_table()
    assert table.num_rows == 300
    assert sorted(set(table.column("day").to_pylist())) == ["2026-01-01", "2026-01-02", "2026-01-03"]
    assert dataset.to_table(filter=ds.field("day") == "2026-01-02").num_rows == 100
    assert sorted(p.rstrip("/") for p in fs.ls(f"{repo.id}/main/events", detail=False)) == [
        f"{repo.id}/main/events/day=2026-01-01", f"{repo.id}/main/events/day=2026-01-02", f"{repo.id}/main/events/day=2026-01-03",
    ]
    assert fs.info(f"{repo.id}/main/events/day=2026-01-01/part-0.parquet")["size"] > 0


def test_fsspec_transaction_and_file_ops(served: Served, repo: Any, fs: LakeFSFileSystem) -> None:
    fs.pipe(f"{repo.id}/main/a.txt", b"a")
    repo.branch("main").commit("a")
    with fs.transaction(repo.id, "main") as tx:
        fs.pipe(f"{repo.id}/{tx.branch.id}/b.txt", b"b")
        fs.rm(f"{repo.id}/{tx.branch.id}/a.txt")
        tx.commit(message="swap a for b")
    assert fs.cat(f"{repo.id}/main/b.txt") == b"b"
    assert not fs.exists(f"{repo.id}/main/a.txt")
    assert fs.exists(f"{repo.id}/main~1/a.txt")
    assert {b.id for b in repo.branches()} == {"main"}
    fs.touch(f"{repo.id}/main/empty")
    assert fs.cat(f"{repo.id}/main/empty") == b""
    with fs.open(f"{repo.id}/main/b.txt", "rb") as f:
        assert f.read() == b"b"


def test_one_catalog_under_api_gateway_and_cli(served: Served, repo: Any) -> None:
    gw = served.gateway
    main = repo.branch("main")
    main.object("from-api.txt").upload(b"api bytes")
    commit = main.commit("through the API").id
    # The catalog (what the mount and the CLI use) sees the commit at once...
    app = gw.app()
    assert app.catalog.get_branch(repo.id, "main").commit_id == commit
    entry = app.catalog.stat(repo.id, "main", "from-api.txt")
    assert app.catalog.read(app.catalog.repository(repo.id), entry) == b"api bytes"
    # ...and so does the gateway.
    s3 = gw.client()
    assert s3.get_object(Bucket=repo.id, Key=f"{commit}/from-api.txt")["Body"].read() == b"api bytes"
    # The other way: a write through the gateway and a commit through the CLI show up in the API.
    s3.put_object(Bucket=repo.id, Key="main/from-gateway.txt", Body=b"gateway bytes")
    assert main.object("from-gateway.txt").reader().read() == b"gateway bytes"
    gw.cli("commit", f"lakefs://{repo.id}/main", "-m", "through the CLI")
    head = main.get_commit()
    assert head.message == "through the CLI"
    assert [c.message for c in main.log(max_amount=2)] == ["through the CLI", "through the API"]
    assert list(main.uncommitted()) == []
    # What only the mount makes (a directory, a symbolic link) reads as an empty object, as through the gateway.
    from lakemount.catalog.catalog import Entry

    app.catalog.put_entry(repo.id, "main", "link", Entry("", 4, "", 0, "", (), 0o120777, 0, 0, "from-api.txt"))
    app.catalog.put_entry(repo.id, "main", "dir/", Entry("", 0, "", 0, "", (), 0o40755))
    assert main.object("link").reader().read() == b""
    assert main.object("dir/").reader().read() == b""
    assert {o.path for o in main.objects()} >= {"link", "dir/"}
