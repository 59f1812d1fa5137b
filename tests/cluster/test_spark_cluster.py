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
import os
from collections.abc import Iterator

import pytest

from tests.cluster.harness import PYTHON, REPO_ROOT, Cluster, Host, available, cluster, remove_stale

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
def spark_lake() -> Iterator[tuple[Cluster, str]]:
    why = available()
    if why is not None:
        pytest.fail(f"cluster tests cannot run here: {why}") if os.environ.get("CI") else pytest.skip(why)
    remove_stale()
    with cluster(["db", "s3", "master", "w1", "w2", "client"], deadline=1200, mounts=["w1", "w2", "client"]) as c:
        c["client"].lakemount("repo", "create", "lakefs://repo")
        c["client"].lakemount("branch", "create", "lakefs://repo/etl", "--source", "lakefs://repo/main")
        yield c, c.start_spark(c["master"], [c["w1"], c["w2"]])


def digests(h: Host, root: str) -> dict[str, str]:
    return json.loads(h.run(PYTHON, "-c", LIST, root, timeout=120).stdout)


def test_spark_job_through_the_mounts_is_committed_and_read_identical_everywhere(spark_lake: tuple[Cluster, str]) -> None:
    c, master = spark_lake
    client = c["client"]
    log = f"{client.home}/driver.log"
    p = client.spawn(PYTHON, str(REPO_ROOT / "tests/cluster/spark_job.py"), master, "file:///lake/repo/etl/out",
                     "--commit", "/lake/repo/etl", "--merge-into", "/lake/repo/main", "--driver-host", client.ip,
                     env=c.spark_env(client), log=log)
    assert p.wait(timeout=min(900, c.left())) == 0, open(log, errors="replace").read()[-4000:]
    result = json.loads(open(log).read().strip().splitlines()[-1])
    assert result["rows"] == 20_000 and result["bad"] == 0, result
    assert sorted(result["executor_hosts"]) == sorted([c["w1"].ip, c["w2"].ip]), result
    commit = result["commit"]
    want = digests(client, f"/lake/repo/{commit}/out")
    parts = [k for k in want if k.endswith(".parquet")]
    assert len(parts) >= 4 and "_SUCCESS" in want and not any("_temporary" in k for k in want), sorted(want)
    assert {k.split("/")[0] for k in parts} == {f"part={i}" for i in range(4)}
    for name in ("w1", "w2", "client"):
        assert digests(c[name], f"/lake/repo/{commit}/out") == want, name
        assert digests(c[name], "/lake/repo/main/out") == want, name
    print(f"\nSpark job through the mounts: {result['seconds']:.1f}s (write {result['write_seconds']:.1f}s)")
