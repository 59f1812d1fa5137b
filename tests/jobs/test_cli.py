"""The gc, import and export verbs through the command line (in this process, sharing its Spark session)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from lakemount.app import App
from lakemount.cli.group import EXIT_CODES, cli
from lakemount.config import load
from lakemount.errors import InvalidArgument, NotFound, PreconditionFailed, category_of

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def run(home: Path, *args: str, error: type[Exception] | None = None) -> Any:
    """Invoke the CLI in-process; lakemount errors surface as the exception ``main()`` would print."""
    env = {"LAKEMOUNT_HOME": str(home), "LAKEMOUNT_CACHE_DISK_BYTES": "0",
           "LAKEMOUNT_BLOCKSTORE_LOCAL_IMPORT_ROOTS": str(home.parent)}  # imports read beside the home
    res = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=True)
    if error is None:
        assert res.exit_code == 0, (args, res.output, res.exception)
    else:
        assert isinstance(res.exception, error), (args, res.output, res.exception)
        assert EXIT_CODES[category_of(res.exception)] != 0
    return res


def test_gc_import_export_verbs(tmp_path: Path, spark: Any) -> None:
    home = tmp_path / "home"
    app = App(load(env={"LAKEMOUNT_HOME": str(home), "LAKEMOUNT_CACHE_DISK_BYTES": "0"}))
    app.catalog.create_repository("cli")
    src = tmp_path / "src"
    (src / "x").mkdir(parents=True)
    (src / "x" / "a.csv").write_bytes(b"1,2\n")
    (src / "b.csv").write_bytes(b"3,4\n")
    out = json.loads(run(home, "import", "--from", str(src), "--to", "lakefs://cli/main/raw", "--commit", "-m", "raw", "--json").output)
    assert out["objects"] == 2 and out["commit"]["message"] == "raw"
    text = run(home, "import", "--from", str(src), "--to", "lakefs://cli/main/raw").output
    assert "staged 0, unchanged 2" in text
    run(home, "import", "--from", str(src), "--to", "lakefs://cli/main/raw", "-m", "no commit flag", error=InvalidArgument)
    run(home, "import", "--from", str(tmp_path / "missing"), "--to", "lakefs://cli/main/raw", error=NotFound)

    exp = json.loads(run(home, "export", "lakefs://cli/main/raw", "--to", str(tmp_path / "out"), "--json").output)
    assert exp["files"] == 2 and (tmp_path / "out" / "x" / "a.csv").read_bytes() == b"1,2\n"
    run(home, "export", "lakefs://cli/main/raw", "--to", str(tmp_path / "out"), error=PreconditionFailed)

    run(home, "gc", "run", "lakefs://cli", error=PreconditionFailed)
    run(home, "gc", "set-config", "lakefs://cli", "--default-retention-days", "0", error=InvalidArgument)
    run(home, "gc", "set-config", "lakefs://cli", "--default-retention-days", "7", "--branch", "main=30")
    rules = json.loads(run(home, "gc", "get-config", "lakefs://cli", "--json").output)
    assert rules == {"default_retention_days": 7, "branches": [{"branch_id": "main", "retention_days": 30}]}
    app.catalog.put("cli", "main", "tmp.txt", b"dropped")
    app.graveler.reset("cli", "main")
    time.sleep(1.2)
    dry = json.loads(run(home, "gc", "run", "lakefs://cli", "--dry-run", "--min-age", "0", "--json").output)
    assert dry["dry_run"] and dry["trashed"]["data_objects"] == 1
    text = run(home, "gc", "run", "lakefs://cli", "--mark-only", "--min-age", "0").output
    assert "--sweep" in text and "garbage at mark: 1 data objects" in text
    mark_id = text.split("--sweep ")[1].split()[0]
    text = run(home, "gc", "run", "lakefs://cli", "--sweep", mark_id).output
    assert "Trashed: 1 data objects" in text and "Purged: 0 data objects" in text
    run(home, "gc", "run", "lakefs://nope", error=NotFound)
    run(home, "gc", "delete-config", "lakefs://cli")
    run(home, "gc", "get-config", "lakefs://cli", error=NotFound)
