"""docs/ICEBERG.md's Spark example runs as written: PySpark 3.5 with Iceberg's runtime on the REST catalog.

The example runs in ``.venv-spark35`` (``scripts/install_spark_iceberg.sh``), a
Spark of its own as the S3A test has, after the page's examples before it on the
``demo`` of a home ``lakemount up`` made (``tests/iceberg_examples.py``), against
that home's ``lakemount serve`` and a mount of it: it creates a branch, a table on
it and inserts through ``SparkCatalog`` with ``type=rest``, its files written
through the mount, then commits and merges the branch with the lakeFS API and
reads ``main``.  The test then checks what landed in the lake, through the
catalog and not through Spark.
"""

from __future__ import annotations

import base64
import json
import os
import pathlib
import re
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator

import pytest

from tests.api.conftest import Served
from tests.fuse.mounting import Mount, mounted_points, needs_fuse, start, stop
from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET

pytestmark = [*needs_fuse, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(600)]

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "ICEBERG.md"
VENV = pathlib.Path(os.environ.get("SPARK_ICEBERG_VENV", ROOT / ".venv-spark35"))
if not VENV.is_absolute():
    VENV = ROOT / VENV
JARS = ("iceberg-spark-runtime-3.5_2.12-1.10.2.jar", "iceberg-shaded-jackson-2.18.8.jar", "iceberg-shaded-httpclient5.jar")


@pytest.fixture(scope="module")
def spark_python() -> pathlib.Path:
    py = VENV / "bin" / "python"
    if not py.exists() or not all((VENV / "jars" / j).exists() for j in JARS):
        pytest.skip(f"no Spark Iceberg venv at {VENV}: run scripts/install_spark_iceberg.sh")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no java on PATH (Debian: openjdk-17-jre-headless)")
    return py


@pytest.fixture
def mount(lake: Served, tmp_path: pathlib.Path) -> Iterator[Mount]:
    m = start(str(lake.home), str(tmp_path / "mnt"))
    try:
        yield m
    finally:
        try:
            stop(m)
        finally:
            print(f"--- log of {m.mountpoint} ---\n{m.log()}")
        assert not [p for p in mounted_points() if p.startswith(str(tmp_path))]


def spark_block() -> str:
    blocks = [b for b in re.findall(r"^```python\n(.*?)^```", DOC.read_text(), flags=re.S | re.M) if "pyspark" in b]
    assert len(blocks) == 1, "docs/ICEBERG.md shows one Spark example"
    return blocks[0]


def test_the_spark_example_in_the_docs_runs_as_written(spark_python: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """The page's examples in order on the ``demo`` of ``lakemount up`` (issue 38 item 8: Spark's found the
    namespace pyiceberg's had made), Spark's through a mount of that home; the suite's one run of it."""
    import lakefs

    from tests.iceberg_examples import Lake, run_in_order

    def spark(body: str, lake: Lake) -> None:
        m = start(str(lake.home), str(tmp_path / "mnt"))
        try:
            script = tmp_path / "spark_example.py"
            script.write_text(body)
            keep = ("PATH", "HOME", "JAVA_HOME", "LANG", "TMPDIR")
            env = {k: v for k, v in os.environ.items() if k in keep}
            env.update(LAKE_API=lake.env["LAKE_API"], LAKE_MOUNT=m.mountpoint, AWS_ACCESS_KEY_ID=ADMIN_KEY,
                       AWS_SECRET_ACCESS_KEY=ADMIN_SECRET, ICEBERG_JARS=str(VENV / "jars"), SPARK_LOCAL_IP="127.0.0.1",
                       PYSPARK_PYTHON=str(spark_python))
            done = subprocess.run([str(spark_python), str(script)], env=env, capture_output=True, text=True,
                                  timeout=540, cwd=tmp_path)
        finally:
            try:
                stop(m)
            finally:
                print(f"--- log of {m.mountpoint} ---\n{m.log()}")
            assert not [p for p in mounted_points() if p.startswith(str(tmp_path))]
        errors = [ln for ln in done.stderr.splitlines() if re.search(r"(Exception|Error)\b", ln) and not ln.startswith("\tat ")]
        assert done.returncode == 0, "\n".join(errors[:20]) or done.stderr[-3000:]
        rows = "[Row(id=1, name='a'), Row(id=2, name='b')]"
        assert done.stdout.splitlines() == [rows, rows]  # the branch, then main after the merge

        # What Spark wrote went through the mount into the branch, and the merge brought it to main.
        repo = lakefs.Repository("demo", client=lake.served.client())
        feat = {o.path for o in repo.branch("feat").objects(prefix="db/clicks/")}
        main = {o.path for o in repo.branch("main").objects(prefix="db/clicks/")}
        assert "db/clicks/_iceberg_table.json" in main
        data = {p for p in feat if p.startswith("db/clicks/data/") and p.endswith(".parquet")}
        manifests = {p for p in feat if p.startswith("db/clicks/metadata/") and p.endswith(".avro")}
        assert data and manifests and data | manifests <= main
        assert not [p for p in feat if p.endswith(".crc")], "Hadoop's checksum files were written into the lake"
        assert not list(repo.branch("main").uncommitted())
        assert "db/events/_iceberg_table.json" in {o.path for o in repo.branch("main").objects(prefix="db/")}

    assert run_in_order(tmp_path, spark) == ["pyiceberg", "commit", "tag", "spark", "duckdb", "audit"]


def test_spark_reads_a_v1_table_and_writes_and_reads_a_v3_table(
    lake: Served, mount: Mount, spark_python: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    import pyarrow as pa

    from tests.iceberg.conftest import iceberg_catalog
    from tests.iceberg.test_pyiceberg import SCHEMA

    repo = lake.repo()
    catalog = iceberg_catalog(lake)
    catalog.create_namespace((repo.id, "main", "db"))
    old = catalog.create_table((repo.id, "main", "db", "old"), schema=SCHEMA, properties={"format-version": "1"})
    old.append(pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["a", "b"]}))
    # The doc example's session, then SQL of this test's own.
    block = spark_block()
    session = block[: block.index(".getOrCreate()\n)") + len(".getOrCreate()\n)")] + "\n"
    script = tmp_path / "v1v3.py"
    script.write_text(session + "\n".join([
        'print(spark.sql(f"SELECT * FROM lake.`{repo}`.main.db.old ORDER BY id").collect())',
        'spark.sql(f"CREATE TABLE lake.`{repo}`.main.db.new (id BIGINT, name STRING) USING iceberg '
        "TBLPROPERTIES ('format-version'='3')\")",
        'spark.sql(f"INSERT INTO lake.`{repo}`.main.db.new VALUES (3, \'c\'), (4, \'d\')")',
        'print(spark.sql(f"SELECT * FROM lake.`{repo}`.main.db.new ORDER BY id").collect())',
        "spark.stop()",
    ]) + "\n")
    keep = ("PATH", "HOME", "JAVA_HOME", "LANG", "TMPDIR")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(LAKE_API=lake.api, LAKE_MOUNT=mount.mountpoint, LAKE_REPO=repo.id, AWS_ACCESS_KEY_ID=ADMIN_KEY,
               AWS_SECRET_ACCESS_KEY=ADMIN_SECRET, ICEBERG_JARS=str(VENV / "jars"), SPARK_LOCAL_IP="127.0.0.1",
               PYSPARK_PYTHON=str(spark_python))
    done = subprocess.run([str(spark_python), str(script)], env=env, capture_output=True, text=True, timeout=540,
                          cwd=tmp_path)
    errors = [ln for ln in done.stderr.splitlines() if re.search(r"(Exception|Error)\b", ln) and not ln.startswith("\tat ")]
    assert done.returncode == 0, "\n".join(errors[:20]) or done.stderr[-3000:]
    assert done.stdout.splitlines() == ["[Row(id=1, name='a'), Row(id=2, name='b')]",
                                        "[Row(id=3, name='c'), Row(id=4, name='d')]"]
    # Spark's v3 commit carried row lineage, which the catalog kept: two rows from id 0.
    request = urllib.request.Request(f"{lake.api}/iceberg/api/v1/namespaces/{repo.id}%1Fmain%1Fdb/tables/new")
    request.add_header("Authorization", "Basic " + base64.b64encode(f"{ADMIN_KEY}:{ADMIN_SECRET}".encode()).decode())
    with urllib.request.urlopen(request) as r:
        meta = json.loads(r.read())["metadata"]
    assert meta["format-version"] == 3 and meta["next-row-id"] == 2
    assert [(s["first-row-id"], s["added-rows"]) for s in meta["snapshots"]] == [(0, 2)]
