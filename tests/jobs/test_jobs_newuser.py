"""What a platform engineer new to lakemount tripped over in import and export: skipped symlinks, S3 errors, Ctrl-C."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from lakemount.app import App
from lakemount.errors import Unavailable
from lakemount.jobs.export import export_objects
from lakemount.jobs.importer import import_objects
from lakemount.jobs.session import Interrupted
from tests.jobs.conftest import make_config

pytestmark = [pytest.mark.spark]


def test_symlinks_anywhere_in_the_source_are_reported_as_skipped(app: App, spark: Any, tmp_path: Path) -> None:
    # Planning lists the top level (and descends into sub/): symlinks there were dropped without being counted.
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "a").write_bytes(b"a")
    (src / "empty").write_bytes(b"")
    (src / "top-link").symlink_to("empty")
    (src / "sub" / "link").symlink_to("a")
    (src / "sub" / "dangling").symlink_to("/nonexistent")
    app.catalog.create_repository("links")
    report = import_objects(app, str(src), "links", "main", show_progress=False)
    assert (report["objects"], report["skipped"]) == (2, 3)
    assert app.catalog.stat("links", "main", "empty").size == 0


def test_export_to_an_unreachable_s3_store_is_unavailable_not_an_internal_error(spark: Any, tmp_path: Path) -> None:
    app = App(make_config(tmp_path / "home", "http://127.0.0.1:9"))  # nothing listens on port 9
    app.catalog.create_repository("unreach")
    app.catalog.put("unreach", "main", "a", b"a")
    app.graveler.commit("unreach", "main", "a")
    with pytest.raises(Unavailable, match="cannot list s3://bucket/out/"):
        export_objects(app, "unreach", "main", "", "s3://bucket/out/", show_progress=False)


def _interrupt_when_a_job_runs(sc: Any) -> threading.Thread:
    def run() -> None:
        deadline = time.monotonic() + 60
        while not sc.statusTracker().getActiveJobsIds() and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGINT)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_ctrl_c_mid_import_and_export_cancels_commits_nothing_and_a_rerun_finishes(
    app: App, spark: Any, tmp_path: Path
) -> None:
    src = tmp_path / "src"
    for d in range(12):
        (src / f"d{d:02d}").mkdir(parents=True)
        for i in range(500):
            (src / f"d{d:02d}" / f"f{i:03d}").write_bytes(f"{d}/{i}".encode())
    app.catalog.create_repository("int")
    head = app.catalog.commit_of("int", "main").id
    before = signal.getsignal(signal.SIGINT)  # default, or PySpark's if an earlier test made a context in this thread
    thread = _interrupt_when_a_job_runs(spark.sparkContext)
    with pytest.raises(Interrupted, match="nothing committed.*run the same import again"):
        import_objects(app, str(src), "int", "main", "in/", commit=True, show_progress=False)
    thread.join()
    assert app.catalog.commit_of("int", "main").id == head
    done = import_objects(app, str(src), "int", "main", "in/", commit=True, show_progress=False)
    assert done["objects"] == 6000 and done["commit"] is not None

    out = tmp_path / "out"
    thread = _interrupt_when_a_job_runs(spark.sparkContext)
    with pytest.raises(Interrupted, match="no _lakemount_export/manifest.json.*--overwrite"):
        export_objects(app, "int", "main", "in/", str(out), show_progress=False)
    thread.join()
    assert not (out / "_lakemount_export" / "manifest.json").exists()
    again = export_objects(app, "int", "main", "in/", str(out), overwrite=True, show_progress=False)
    assert again["files"] == 6000 and (out / "_lakemount_export" / "manifest.json").exists()
    # The process's SIGINT handling is back to what it was.
    assert signal.getsignal(signal.SIGINT) is before


def test_cli_prints_what_an_interrupted_job_left_as_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import lakemount.cli.import_ as cli_import
    from lakemount.cli.main import main

    def interrupted(*_a: object, **_k: object) -> None:
        raise Interrupted("import interrupted, nothing committed; run the same import again")

    monkeypatch.setenv("LAKEMOUNT_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(cli_import, "import_objects", interrupted)
    with pytest.raises(SystemExit) as exit_:
        main(["import", "--from", str(tmp_path), "--to", "lakefs://repo/main/"])
    assert exit_.value.code == 130
    err = capsys.readouterr().err
    assert "error: import interrupted, nothing committed; run the same import again" in err
    assert "aborted" not in err and "Traceback" not in err
