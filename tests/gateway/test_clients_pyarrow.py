"""pyarrow's S3FileSystem (the AWS C++ SDK) writing and reading a partitioned parquet dataset.

On the package's gateway (``gw``, tests/gateway/conftest.py): each test makes a bucket of its own.
"""

from __future__ import annotations

import pytest

from .server_fixture import ADMIN_KEY, ADMIN_SECRET, Gateway

pa = pytest.importorskip("pyarrow")
ds = pytest.importorskip("pyarrow.dataset")
pafs = pytest.importorskip("pyarrow.fs")


def filesystem(gw: Gateway) -> object:
    return pafs.S3FileSystem(
        access_key=ADMIN_KEY,
        secret_key=ADMIN_SECRET,
        endpoint_override=gw.url.removeprefix("http://"),
        scheme="http",
        region="us-east-1",
        allow_bucket_creation=True,
    )


def test_partitioned_parquet_dataset(gw: Gateway) -> None:
    fs = filesystem(gw)
    bucket = gw.bucket()
    n = 30_000
    table = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "year": pa.array([2020 + i % 4 for i in range(n)], pa.int32()),
            "country": pa.array(["pt", "de", "jp"][i % 3] for i in range(n)),
            "amount": pa.array([i * 0.5 for i in range(n)]),
        }
    )
    base = f"{bucket}/main/warehouse/sales"
    ds.write_dataset(
        table,
        base,
        format="parquet",
        filesystem=fs,
        partitioning=ds.partitioning(pa.schema([("year", pa.int32()), ("country", pa.string())]), flavor="hive"),
        max_rows_per_file=1000,
        max_rows_per_group=1000,
        existing_data_behavior="overwrite_or_ignore",
    )
    infos = fs.get_file_info(pafs.FileSelector(base, recursive=True))
    files = sorted(i.path for i in infos if i.type == pafs.FileType.File)
    assert any("/year=2021/country=de/" in f for f in files) and len(files) >= 12
    dirs = {i.path for i in infos if i.type == pafs.FileType.Directory}
    assert f"{base}/year=2020" in dirs

    back = ds.dataset(base, format="parquet", filesystem=fs, partitioning="hive").to_table()
    assert back.num_rows == n
    assert sorted(back.column("id").to_pylist()) == list(range(n))
    only = ds.dataset(base, format="parquet", filesystem=fs, partitioning="hive").to_table(
        filter=(ds.field("year") == 2022) & (ds.field("country") == "jp")
    )
    assert only.num_rows == sum(1 for i in range(n) if 2020 + i % 4 == 2022 and i % 3 == 2)
    # The same files, seen through the catalog (as the mount sees them).
    listed = [it.path for it in gw.app().catalog.list(bucket, "main", "warehouse/sales/year=2020/")]
    assert listed and all(p.endswith(".parquet") or p.endswith("/") for p in listed)


def test_filesystem_operations(gw: Gateway) -> None:
    fs = filesystem(gw)
    bucket = gw.bucket()
    root = f"{bucket}/main/fsops"
    fs.create_dir(f"{root}/empty-dir")
    with fs.open_output_stream(f"{root}/file.txt") as f:
        f.write(b"x" * 100_000)
    assert fs.get_file_info(f"{root}/empty-dir").type == pafs.FileType.Directory
    assert fs.get_file_info(f"{root}/file.txt").size == 100_000
    fs.move(f"{root}/file.txt", f"{root}/moved.txt")
    assert fs.get_file_info(f"{root}/file.txt").type == pafs.FileType.NotFound
    with fs.open_input_stream(f"{root}/moved.txt") as f:
        assert f.read() == b"x" * 100_000
    with fs.open_input_file(f"{root}/moved.txt") as f:
        f.seek(99_990)
        assert f.read() == b"x" * 10
    fs.delete_dir(root)
    assert fs.get_file_info(root).type == pafs.FileType.NotFound
