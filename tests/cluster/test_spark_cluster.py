"""The Spark job a user runs: executors on w1 and w2 write through their own mounts, the driver commits.

A standalone Spark cluster from PySpark's own jars (master on ``master``,
workers on ``w1`` and ``w2``, driver on ``client``) writes a partitioned Parquet
dataset to ``file:///lake/repo/etl/out`` with the default FileOutputCommitter:
task files are written on the executors' hosts and renamed by the job commit
on the driver's.  The driver commits ``etl`` through its control file and
merges it into ``main``; then every host reads the committed files
byte-identical.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.cluster import etl
from tests.cluster.harness import PYTHON, Cluster, Host, available, cluster, remove_stale
from tests.skip_policy import under_ci

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.spark, pytest.mark.fuse, pytest.mark.postgres]

LIST = r"""
import hashlib, json, os, sys
root = sys.argv[1]
out = {}
for d, _, files in os.walk(root):
    for f in files:
        p = os.path.join(d, f)
        with open(p, "rb") as fh:
            out[os.path.relpath(p, root)] = hashlib.sha256(fh.read()).hexdigest()
print(json.dumps(out, sort_keys=True))
"""


@pytest.fixture(scope="module")
def spark_lake() -> Iterator[tuple[Cluster, str, str]]:
    why = available() or etl.spark32_missing()
    if why is not None:
        pytest.fail(f"cluster tests cannot run here: {why}") if under_ci() else pytest.skip(why)
    remove_stale()
    hosts = ["db", "s3", "master", "w1", "w2", "gw1", "gw2", "client"]
    with cluster(hosts, deadline=1500, mounts=["w1", "w2", "client"]) as c:
        key, secret = etl.setup(c, "etl", "etl3")
        yield c, key, secret


def digests(h: Host, root: str) -> dict[str, str]:
    return json.loads(h.run(PYTHON, "-c", LIST, root, timeout=120).stdout)


def check_everywhere(c: Cluster, result: dict[str, object], *, merged: bool) -> None:
    assert result["rows"] == 20_000 and result["bad"] == 0, result
    assert sorted(result["executor_hosts"]) == sorted([c["w1"].ip, c["w2"].ip]), result  # type: ignore[arg-type]
    commit = result["commit"]
    want = digests(c["client"], f"/lake/repo/{commit}/out")
    parts = [k for k in want if k.endswith(".parquet")]
    assert len(parts) >= 4 and "_SUCCESS" in want and not any("_temporary" in k for k in want), sorted(want)
    assert {k.split("/")[0] for k in parts} == {f"part={i}" for i in range(4)}
    for name in ("w1", "w2", "client"):
        assert digests(c[name], f"/lake/repo/{commit}/out") == want, name
        if merged:
            assert digests(c[name], "/lake/repo/main/out") == want, name


def test_spark_job_through_the_mounts_is_committed_and_read_identical_everywhere(spark_lake: tuple[Cluster, str, str]) -> None:
    c, _key, _secret = spark_lake
    result = etl.through_mounts(c, "etl", merge_into="main")
    check_everywhere(c, result, merged=True)
    print(f"\nSpark job through the mounts: {result['seconds']:.1f}s (write {result['write_seconds']:.1f}s)")


def test_the_same_job_through_s3a_on_two_gateways(spark_lake: tuple[Cluster, str, str]) -> None:
    c, key, secret = spark_lake
    result = etl.through_gateways(c, "etl3", key, secret)
    check_everywhere(c, result, merged=False)
    print(f"\nSpark job through S3A on gw1+gw2: {result['seconds']:.1f}s (write {result['write_seconds']:.1f}s)")
