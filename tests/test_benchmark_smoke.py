"""Smoke runs of the staging benchmarks (issue 26): they run to the end and print what docs/SCALE.md quotes.

Small sizes only: these show the scripts work, not the figures.  ``benchmarks/scale_bench.py`` needs
a cluster of namespaces (minutes) and has no test here; ``--quick`` is its smoke run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.metastore.conftest import PG_BIN

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


def test_staging_read_bench_reads_over_l1_files_and_commits_on_both_backends() -> None:
    if not (PG_BIN / "initdb").exists():
        pytest.skip(f"PostgreSQL server binaries not found in {PG_BIN}")
    out = subprocess.run(
        [sys.executable, "benchmarks/staging_read_bench.py", "--entries", "2000", "--files", "8", "--stats", "50",
         "--lists", "3", "--commit-entries", "3000"],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    for backend in ("sql", "lsm"):
        line = next(ln for ln in text.splitlines() if ln.startswith(f"  {backend}: staged 2,000"))
        assert re.search(r"stat warm p50 [\d.]+ ms p99 [\d.]+ ms", line), line
        assert re.search(r"commit of 3,000 [\d.]+s = [\d,]+ entries/s", line), line
    # the 8 changes stay 8 L1 files while they are read (no compaction folds them)
    assert "8 L1 files" in text, text
    assert "ratio lsm/sql: stat p99" in text, text
