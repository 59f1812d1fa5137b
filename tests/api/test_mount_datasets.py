"""A partitioned Parquet dataset written through the mount reads back through lakefs-spec (issue 23 item 6).

``pyarrow.parquet.write_to_dataset(..., partition_cols=["p"])`` makes one
directory per partition; the mount's directory markers (``p=0/``) used to stay
beside the files, and ``pandas.read_parquet("lakefs://...")`` then failed with
FileNotFoundError on them.  A ``lakemount serve`` (API) and a FUSE mount share
one home here; both are stopped even on failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.api.conftest import Served, running
from tests.fuse.mounting import HAVE_FUSE, start, stop
from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET

pytestmark = [pytest.mark.fuse, pytest.mark.slow, pytest.mark.skipif(not HAVE_FUSE, reason="needs /dev/fuse and fusermount3")]


@pytest.fixture(scope="module")
def served_and_mounted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Path]]:
    tmp = tmp_path_factory.mktemp("ds")
    with running(tmp) as served:
        mountpoint = tmp / "lake"
        m = start(str(served.home), str(mountpoint), env=served.gateway.env)
        try:
            yield served, mountpoint
        finally:
            stop(m)


def test_item6_partitioned_parquet_written_through_the_mount_reads_through_lakefs_spec(
    served_and_mounted: tuple[Served, Path],
) -> None:
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    served, mnt = served_and_mounted
    repo = served.repo(prefix="ds")
    rid = str(repo.id)
    table = pa.table({"p": [0, 0, 1, 2, 2], "v": [1.0, 2.0, 3.0, 4.0, 5.0]})
    pq.write_to_dataset(table, root_path=str(mnt / rid / "main" / "tables" / "ds"), partition_cols=["p"])
    listed = [o.path for o in repo.branch("main").objects(prefix="tables/")]
    assert listed and all(not p.endswith("/") for p in listed), listed  # no marker beside the files
    assert sorted({p.split("/")[2] for p in listed}) == ["p=0", "p=1", "p=2"]
    opts = {"host": served.api, "username": ADMIN_KEY, "password": ADMIN_SECRET}
    df = pd.read_parquet(f"lakefs://{rid}/main/tables/ds", storage_options=opts)
    assert sorted(df["v"].tolist()) == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert sorted(df["p"].astype(int).tolist()) == [0, 0, 1, 2, 2]
    # Emptied, a partition's directory still persists (its marker comes back).
    part = mnt / rid / "main" / "tables" / "ds" / "p=1"
    for name in os.listdir(part):
        os.remove(part / name)
    assert os.path.isdir(part) and os.listdir(part) == []
    assert [o.path for o in repo.branch("main").objects(prefix="tables/ds/p=1")] == ["tables/ds/p=1/"]
