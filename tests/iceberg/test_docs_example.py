"""docs/ICEBERG.md's pyiceberg example runs as written against a live server (in a fresh interpreter)."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

from tests.api.conftest import Served
from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET

pytest.importorskip("pyiceberg")

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "ICEBERG.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def test_the_pyiceberg_example_in_the_docs_runs_as_written(lake: Served, tmp_path: pathlib.Path) -> None:
    blocks = [b for b in python_blocks(DOC.read_text()) if "pyiceberg" in b]
    assert len(blocks) == 1, "docs/ICEBERG.md shows one pyiceberg example"
    repo = lake.repo()
    script = tmp_path / "example.py"
    script.write_text(blocks[0])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAKE", "AWS_"))}
    env.update(LAKE_API=lake.api, LAKE_S3=lake.gateway.url, LAKE_REPO=repo.id,
               AWS_ACCESS_KEY_ID=ADMIN_KEY, AWS_SECRET_ACCESS_KEY=ADMIN_SECRET)
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[{'id': 1, 'name': 'a', 'score': None}, {'id': 2, 'name': 'b', 'score': None}]"
    assert "db/events/_iceberg_table.json" in {o.path for o in repo.branch("main").objects(prefix="db/events/")}
