"""Spark through the mount: a partitioned parquet write to a branch path, a commit by control file, a read by commit id.

Spark (the venv's PySpark, ``local[2]``) writes with Hadoop's default
FileOutputCommitter, which writes task output under ``_temporary/`` and then
renames whole directories into place: each rename is one staging transaction
on the branch.  The test commits with ``echo msg > .lakefs/commit``, reads the
new commit id from ``.lakefs/head``, and Spark reads the table back from
``<repo>/<commit-id>/`` (read-only, immutable), checking every row.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from collections.abc import Iterator

import pytest

from lakemount.app import App
from tests.fuse.conftest import REPO
from tests.fuse.mounting import Mount, mounted_points, needs_fuse, start, stop

pytestmark = [*needs_fuse, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(300)]

# Spark 4 on Java 17 needs these opened (the same list Spark's own launcher uses).
JAVA17_OPENS = [
    "java.base/java.lang",
    "java.base/java.lang.invoke",
    "java.base/java.lang.reflect",
    "java.base/java.io",
    "java.base/java.net",
    "java.base/java.nio",
    "java.base/java.util",
    "java.base/java.util.concurrent",
    "java.base/java.util.concurrent.atomic",
    "java.base/sun.nio.ch",
    "java.base/sun.nio.cs",
    "java.base/sun.security.action",
    "java.base/sun.util.calendar",
]
JAVA_OPTS = " ".join(f"--add-opens={m}=ALL-UNNAMED" for m in JAVA17_OPENS) + (
    " -Djava.net.preferIPv4Stack=true -XX:+UseSerialGC -XX:TieredStopAtLevel=1"
)

CATEGORIES = ["alpha", "beta", "gamma delta", "ünï"]  # a space and non-ASCII in partition values
N_ROWS = 2000


def rows() -> list[tuple[int, str, str, int, float]]:
    """The table: (id, category, name, qty, price), deterministic."""
    return [
        (i, CATEGORIES[i % len(CATEGORIES)], f"item-{i:05d}", (i * 7) % 13, round(i * 1.25, 2)) for i in range(N_ROWS)
    ]


def have_java() -> bool:
    return shutil.which("java") is not None or bool(os.environ.get("JAVA_HOME"))


@pytest.fixture
def spark(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    sql = pytest.importorskip("pyspark.sql", reason="PySpark is not installed")
    if not have_java():
        pytest.skip("Spark needs a Java runtime (java on PATH or JAVA_HOME)")
    # The launcher looks the hostname up before any setting applies; on loopback
    # it starts also where that name resolves nowhere (containers, chroots).
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    session = (
        sql.SparkSession.builder.master("local[2]")
        .appName("lakemount-fuse")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.extraJavaOptions", JAVA_OPTS)
        .config("spark.executor.extraJavaOptions", JAVA_OPTS)
        .config("spark.sql.sources.partitionOverwriteMode", "static")
        .getOrCreate()
    )
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture
def mount(home: str, tmp_path: os.PathLike[str]) -> Iterator[Mount]:
    base = os.fspath(tmp_path)
    m = start(home, os.path.join(base, "mnt"))
    try:
        yield m
    finally:
        try:
            stop(m)
        finally:
            print(f"--- log of {m.mountpoint} ---\n{m.log()}")
        assert not [p for p in mounted_points() if p.startswith(base)]


def test_spark_writes_a_branch_and_reads_the_commit(app: App, mount: Mount, spark: object) -> None:
    from pyspark.sql import SparkSession

    assert isinstance(spark, SparkSession)
    branch = f"{mount.mountpoint}/{REPO}/main"
    table = "tables/events"
    df = spark.createDataFrame(rows(), "id INT, category STRING, name STRING, qty INT, price DOUBLE")
    df.repartition(3).write.partitionBy("category").mode("overwrite").parquet(f"file://{branch}/{table}")

    # the committer's scratch space is gone, the success marker and one directory per category are there
    listing = sorted(os.listdir(f"{branch}/{table}"))
    assert "_temporary" not in listing and "_SUCCESS" in listing
    assert sorted(n for n in listing if n.startswith("category=")) == sorted(f"category={c}" for c in CATEGORIES)
    staged = [item.path for item in app.catalog.list(REPO, "main", f"{table}/")]
    assert not [p for p in staged if "_temporary" in p]
    assert sum(p.endswith(".parquet") for p in staged) >= len(CATEGORIES)

    subprocess.run(["sh", "-c", f'echo "spark events" > "{branch}/.lakefs/commit"'], check=True, timeout=60)
    with open(f"{branch}/.lakefs/head") as f:
        commit_id = f.read().strip()
    assert commit_id == app.graveler.get_branch(REPO, "main").commit_id
    assert app.graveler.commit_of(REPO, "main").message == "spark events"

    back = spark.read.parquet(f"file://{mount.mountpoint}/{REPO}/{commit_id}/{table}")
    got = sorted((r.id, r.category, r.name, r.qty, r.price) for r in back.collect())
    assert got == sorted(rows())

    # the commit is immutable: writing under it is refused
    with pytest.raises(OSError) as info:
        open(f"{mount.mountpoint}/{REPO}/{commit_id}/{table}/x", "w").close()
    assert info.value.errno == errno.EROFS
