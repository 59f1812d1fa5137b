"""Running the cluster's Spark ETL job (tests/cluster/spark_job.py) two ways, for the tests and cluster_bench.

``through_mounts``: Spark from the main venv's PySpark; executors on w1 and w2
write ``file:///lake/repo/<branch>/out`` through their own mounts.
``through_gateways``: Spark 3.2.4 from ``.venv-spark32`` (hadoop-aws); each
worker's S3A endpoint is ``http://gateway:8000``, which resolves to gw1 on w1
and to gw2 on w2 (a per-host /etc/hosts), so the two gateways share the job.
Both commit with ``echo msg > /lake/repo/<branch>/.lakefs/commit`` on the
driver's host (``client``, which has a mount) and return the job's JSON summary.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tests.cluster.harness import PYTHON, REPO_ROOT, Cluster

SPARK32 = REPO_ROOT / ".venv-spark32"
if not (SPARK32 / "bin" / "python").exists():  # worktrees share the lead checkout's venvs
    SPARK32 = Path("/work/main/.venv-spark32")
SPARK32_PYTHON = str(SPARK32 / "bin" / "python")
JOB = str(REPO_ROOT / "tests/cluster/spark_job.py")


def spark32_missing() -> str | None:
    if not os.path.exists(SPARK32_PYTHON) or not (SPARK32 / "jars" / "hadoop-aws-3.3.1.jar").exists():
        return f"{SPARK32} with hadoop-aws missing: run scripts/install_spark_s3a.sh"
    return None


def _run(c: Cluster, argv: list[str], python: str, log: str) -> dict[str, Any]:
    client = c["client"]
    p = client.spawn(python, JOB, *argv, env=c.spark_env(client, python), log=log)
    code = p.wait(timeout=min(900, c.left()))
    text = Path(log).read_text(errors="replace")
    if code != 0:
        raise AssertionError(f"Spark job failed ({code}): {text[-4000:]}")
    return json.loads(text.strip().splitlines()[-1])


def through_mounts(c: Cluster, branch: str, *, merge_into: str = "") -> dict[str, Any]:
    url = c.start_spark(c["master"], [c["w1"], c["w2"]])
    try:
        argv = [url, f"file:///lake/repo/{branch}/out", "--commit", f"/lake/repo/{branch}", "--driver-host", c["client"].ip]
        if merge_into:
            argv += ["--merge-into", f"/lake/repo/{merge_into}"]
        return _run(c, argv, PYTHON, f"{c['client'].home}/driver-mounts.log")
    finally:
        c.stop_spark()


def through_gateways(c: Cluster, branch: str, key: str, secret: str) -> dict[str, Any]:
    for host, gw in (("w1", "gw1"), ("w2", "gw2"), ("client", "gw1")):
        c.map_name(c[host], "gateway", c[gw].ip)
    url = c.start_spark(c["master"], [c["w1"], c["w2"]], spark_python=SPARK32_PYTHON)
    try:
        argv = [url, f"s3a://repo/{branch}/out", "--commit", f"/lake/repo/{branch}", "--driver-host", c["client"].ip,
                "--s3a", f"http://gateway:8000,{key},{secret}", "--jars", str(SPARK32 / "jars")]
        return _run(c, argv, SPARK32_PYTHON, f"{c['client'].home}/driver-s3a.log")
    finally:
        c.stop_spark()


def setup(c: Cluster, *branches: str) -> tuple[str, str]:
    """The repository, ``branches`` off main, an Admin user; gateways on gw1 and gw2. Returns (key, secret)."""
    client = c["client"]
    client.lakemount("repo", "create", "lakefs://repo")
    for b in branches:
        client.lakemount("branch", "create", f"lakefs://repo/{b}", "--source", "lakefs://repo/main")
    client.lakemount("auth", "users", "create", "--id", "etl")
    client.lakemount("auth", "users", "policies", "attach", "--id", "etl", "--policy", "Admin")
    cred = json.loads(client.lakemount("auth", "users", "credentials", "create", "--id", "etl", "--json").stdout)
    c.start_gateway(c["gw1"])
    c.start_gateway(c["gw2"])
    return cred["access_key_id"], cred["secret_access_key"]
