"""docs/ICEBERG.md's examples, one after another, on the ``demo`` repository ``lakemount up`` makes (issue 38 item 8).

A reader runs them in order on what ``scripts/up.sh`` created: pyiceberg's, the
commit and tag after it, Spark's, DuckDB's, the audit query.  They collided: the
tag ``v1`` exists in ``demo``, Spark's ``CREATE NAMESPACE`` found the namespace
pyiceberg had made (``SCHEMA_ALREADY_EXISTS``), and DuckDB's attached a
repository ``sales`` that ``demo``'s reader does not have.  :func:`run_in_order`
runs them so, on a fresh home: ``tests/test_docs.py`` every one but Spark's (no
JVM: the day-to-day tier keeps it), ``tests/iceberg/test_spark.py`` all of them,
Spark's through a mount: the suite's one run of that example.
"""

from __future__ import annotations

import json
import os
import pathlib
import shlex
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

from tests.api.conftest import Served, running
from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "ICEBERG.md"
PYICEBERG_ROWS = "[{'id': 1, 'name': 'a', 'score': None}, {'id': 2, 'name': 'b', 'score': None}]"
# What stands in the list of what ran for Spark's example when the caller runs no Spark.
SPARK_LEFT = "spark (tests/iceberg/test_spark.py runs it)"


@dataclass(frozen=True, slots=True)
class Lake:
    """The home ``lakemount up`` made, its ``lakemount serve`` and the environment the examples read."""

    home: pathlib.Path
    served: Served
    env: dict[str, str]


# The Spark example's runner: (its source, the lake) -> nothing; it asserts what it needs.
SparkRunner = Callable[[str, Lake], None]


def run_in_order(tmp_path: pathlib.Path, spark: SparkRunner | None) -> list[str]:
    """Run docs/ICEBERG.md's examples in order on a home ``lakemount up --no-services`` made; what ran, in order.

    ``spark`` None leaves Spark's example to ``tests/iceberg/test_spark.py`` (``SPARK_LEFT`` in the list).
    Asserts each example's success and what the page says it prints.
    """
    from tests.test_docs import SHELL_LANGUAGES, fenced_blocks, lakemount_commands

    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAKEMOUNT_", "LAKE_", "AWS_"))}
    env.update(LAKEMOUNT_HOME=str(home), PYTHONPATH=str(ROOT))

    def cli(*argv: str) -> str:
        done = subprocess.run([sys.executable, "-m", "lakemount.cli.main", *argv], env=env, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, f"lakemount {shlex.join(argv)}: {done.stderr[-2000:]}"
        return done.stdout

    cli("up", "--no-services")  # what scripts/up.sh runs once it has installed lakemount
    ran: list[str] = []
    with running(tmp_path) as served:
        env.update(LAKE_API=served.api, LAKE_S3=served.gateway.url, AWS_ACCESS_KEY_ID=ADMIN_KEY,
                   AWS_SECRET_ACCESS_KEY=ADMIN_SECRET)
        lake = Lake(home, served, env)
        for language, body in fenced_blocks(DOC.read_text()):
            if language == "python" and "pyiceberg" in body:
                script = tmp_path / "pyiceberg_example.py"
                script.write_text(body)
                done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                                      timeout=300)
                assert done.returncode == 0, done.stderr[-3000:]
                assert done.stdout.strip() == PYICEBERG_ROWS
                ran.append("pyiceberg")
            elif language == "python" and "pyspark" in body:
                if spark is None:
                    ran.append(SPARK_LEFT)
                else:
                    spark(body, lake)
                    ran.append("spark")
            elif language == "sql" and "TYPE ICEBERG" in body:
                assert duckdb_rows(body, served) == [(1, "a", None), (2, "b", None)]
                ran.append("duckdb")
            elif language in SHELL_LANGUAGES and lakemount_commands(body):
                for argv in lakemount_commands(body):
                    cli(*argv)
                    ran.append(argv[0])
        # The tag keeps the table as it was when it was made.
        stat = json.loads(cli("fs", "stat", "lakefs://demo/events-v1/db/events/_iceberg_table.json", "--json"))
        assert stat["path"] == "db/events/_iceberg_table.json", stat
    return ran


def duckdb_rows(sql: str, served: Served) -> list[tuple[object, ...]]:
    """The DuckDB example run with the page's placeholders filled in (keys, the gateway's and the API's
    addresses), its extensions installed offline from their PyPI wheels as the page says; its last rows."""
    import glob

    import duckdb

    filled = (sql.replace("<access key id>", ADMIN_KEY).replace("<secret>", ADMIN_SECRET)
              .replace("'127.0.0.1:8000'", f"'{served.gateway.url.removeprefix('http://')}'")
              .replace("http://127.0.0.1:8001", served.api))
    con = duckdb.connect()
    try:
        for name in ("httpfs", "avro", "iceberg"):
            package = __import__(f"duckdb_extension_{name}")
            found = glob.glob(os.path.join(os.path.dirname(package.__file__), "extensions", "*",
                                           f"{name}.duckdb_extension"))
            assert len(found) == 1, found
            con.execute(f"INSTALL '{found[0]}'")
            con.execute(f"LOAD {name}")
        rows: list[tuple[object, ...]] = []
        for statement in (part.strip() for part in filled.split(";")):
            if statement:
                rows = con.execute(statement).fetchall()
        return rows
    finally:
        con.close()
