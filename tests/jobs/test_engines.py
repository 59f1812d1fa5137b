"""The jobs' two engines: the same plan and tasks on Spark and in-process give the same results; auto picks by size.

Also: a Spark job's stderr carries errors, not the JVM's and PySpark's start-up warnings.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lakemount.app import App
from lakemount.block.layout import is_data_key, is_table_key
from lakemount.errors import InvalidArgument
from lakemount.jobs import export, gc, importer, session
from lakemount.jobs.export import MANIFEST_DIR, export_objects
from lakemount.jobs.gc import run_gc
from lakemount.jobs.importer import import_objects
from lakemount.jobs.inprocess import LocalContext, job_context
from lakemount.jobs.retention import GcRules, store_rules
from lakemount.jobs.session import Interrupted, interruptible, translated
from tests.jobs.scenario import build_gc_scenario
from tests.jobs.test_export import manifest, populate
from tests.jobs.test_gc import check_reads, swept_keys

pytestmark = [pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]
# What either engine may differ in: which ran, how long it took, and the ids and times of a GC run.
VOLATILE = {"engine", "timings", "objects_per_second", "mark_id", "mark_start", "cutoff", "sweep_id"}


def comparable(report: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in report.items() if k not in VOLATILE}
    if out.get("commit"):
        out["commit"] = {k: v for k, v in out["commit"].items() if k != "id"}
    return out


def listing(app: App, repo: str, ref: str, prefix: str) -> list[tuple[str, Any]]:
    return [(it.path, it.entry) for it in app.catalog.list(repo, ref, prefix)]


def make_source(root: Path) -> None:
    for d in range(3):
        for i in range(4):
            p = root / f"d{d}" / "sub" / f"f{i}.csv" if i % 2 else root / f"d{d}" / f"f{i}.csv"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(f"{d},{i}\n".encode() * (i + 1))
    (root / "top.txt").write_bytes(b"top")
    (root / "empty").write_bytes(b"")
    (root / "link").symlink_to(root / "top.txt")  # skipped by both


def test_import_gives_the_same_result_in_process_and_on_spark(app: App, spark: Any, tmp_path: Path, s3: Any) -> None:
    src = tmp_path / "src"
    make_source(src)
    s3.create_bucket(Bucket="engines")
    for i in range(7):
        s3.put_object(Bucket="engines", Key=f"in/p{i % 3}/o{i}.bin", Body=b"s3 " * i)
    s3.put_object(Bucket="engines", Key="in/dir/", Body=b"")
    app.catalog.create_repository("imp")
    app.catalog.put("imp", "main", "in/stale.txt", b"replaced by the import")
    app.catalog.put("imp", "main", "in/top.txt", b"changed by the import")
    app.catalog.put("imp", "main", "keep.txt", b"outside the prefix")
    app.graveler.commit("imp", "main", "before")
    for name in ("spark", "inproc", "spark-s3", "inproc-s3"):
        app.graveler.create_branch("imp", name, "main")

    runs = {}
    for branch, engine, source in (
        ("spark", "spark", str(src)), ("inproc", "in-process", str(src)),
        ("spark-s3", "spark", "s3://engines/in/"), ("inproc-s3", "in-process", "s3://engines/in/"),
    ):
        report = import_objects(app, source, "imp", branch, "in", commit=True, message="imported", engine=engine)
        assert report["engine"] == engine
        runs[branch] = report
        report = import_objects(app, source, "imp", branch, "in", engine=engine)  # again: nothing changes
        assert report["unchanged"] == report["objects"] and report["staged"] == report["removed"] == 0
        runs[branch + "/again"] = report

    assert runs["spark"]["objects"] == 14 and runs["spark"]["skipped"] == 1 and runs["spark"]["removed"] == 1
    assert runs["spark-s3"]["objects"] == 8
    for spark_branch, local_branch in (("spark", "inproc"), ("spark-s3", "inproc-s3")):
        for suffix in ("", "/again"):
            a, b = runs[spark_branch + suffix], runs[local_branch + suffix]
            assert comparable(a) == comparable(b) | {"destination": a["destination"]}
        assert listing(app, "imp", spark_branch, "") == listing(app, "imp", local_branch, "")


def test_gc_gives_the_same_result_in_process_and_on_spark(app: App, spark: Any) -> None:
    m, retained = build_gc_scenario(app)
    ns = app.catalog.repository("lake").storage_namespace
    store_rules(app.adapter, ns, GcRules(14, (("dev", 7), ("main", 30))))
    time.sleep(1.2)  # min-age 0 still spares objects modified in the last second

    on_spark = run_gc(app, "lake", dry_run=True, min_age=0, engine="spark")
    in_process = run_gc(app, "lake", dry_run=True, min_age=0, engine="in-process")
    assert (on_spark["engine"], in_process["engine"]) == ("spark", "in-process")
    assert on_spark["trashed"]["data_objects"] > 20 and on_spark["trashed"]["tables"] > 0
    assert comparable(in_process) == comparable(on_spark)
    assert swept_keys(app, ns, in_process) == swept_keys(app, ns, on_spark)

    real = run_gc(app, "lake", min_age=0, engine="in-process")
    assert swept_keys(app, ns, real) == swept_keys(app, ns, on_spark)
    assert real["trashed"] == on_spark["trashed"]
    check_reads(m, retained)


def local_tree(root: Path) -> dict[str, tuple[Any, ...]]:
    """What an export left in ``root`` (its manifest aside): path -> (kind, bytes or target, mode, mtime)."""
    out: dict[str, tuple[Any, ...]] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel.split("/")[0] == MANIFEST_DIR:
            continue
        st = path.lstat()
        if path.is_symlink():
            out[rel] = ("link", os.readlink(path))
        elif path.is_dir():
            out[rel] = ("dir",)
        else:
            out[rel] = ("file", path.read_bytes(), st.st_mode & 0o7777, st.st_mtime_ns)
    return out


def s3_tree(s3: Any, bucket: str, prefix: str) -> dict[str, bytes]:
    keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            for o in page.get("Contents", [])]
    return {k[len(prefix):]: s3.get_object(Bucket=bucket, Key=k)["Body"].read()
            for k in keys if not k[len(prefix):].startswith(MANIFEST_DIR + "/")}


def test_export_gives_the_same_result_in_process_and_on_spark(app: App, spark: Any, tmp_path: Path, s3: Any) -> None:
    objects = populate(app, "exp", n=150)
    s3.create_bucket(Bucket="exports")
    reports, trees, records = {}, {}, {}
    for engine in ("spark", "in-process"):
        target = tmp_path / engine
        reports[engine] = export_objects(app, "exp", "main", "data", str(target), engine=engine)
        trees[engine] = local_tree(target)
        records[engine] = manifest(lambda p, t=target: (t / p).read_bytes(), reports[engine]["parts"])  # type: ignore[misc]
        s3_report = export_objects(app, "exp", "main", "data", f"s3://exports/{engine}/", engine=engine)
        reports[engine + "-s3"] = s3_report
        trees[engine + "-s3"] = s3_tree(s3, "exports", f"{engine}/")
        records[engine + "-s3"] = manifest(
            lambda p, e=engine: s3.get_object(Bucket="exports", Key=f"{e}/{p}")["Body"].read(), s3_report["parts"])
        assert reports[engine]["engine"] == reports[engine + "-s3"]["engine"] == engine

    assert reports["spark"]["files"] == len(objects) and reports["spark"]["symlinks"] == 1
    assert reports["spark-s3"]["skipped_symlinks"] == 1
    # The tasks' split follows each engine's parallelism, so the parts' names may differ; what they hold may not.
    for spark_run, local_run in (("spark", "in-process"), ("spark-s3", "in-process-s3")):
        a, b = ({k: v for k, v in reports[r].items() if k not in {*VOLATILE, "target", "parts"}}
                for r in (spark_run, local_run))
        assert a == b
        assert trees[spark_run] == trees[local_run]
        assert records[spark_run] == records[local_run]
    assert trees["spark"]["big.bin"][1] == objects["big.bin"]


def test_auto_exports_small_prefixes_in_process_and_others_on_spark(
    app: App, tmp_path: Path, no_spark_running: list[str | None], monkeypatch: pytest.MonkeyPatch
) -> None:
    app.catalog.create_repository("auto")
    for i in range(3):
        app.catalog.put("auto", "main", f"small/{i}.csv", b"x" * 10)
    app.catalog.put("auto", "main", "large/one.bin", b"x" * 200)
    app.graveler.commit("auto", "main", "data")
    monkeypatch.setattr(export, "SMALL_OBJECTS", 3)
    monkeypatch.setattr(export, "SMALL_BYTES", 100)
    assert export_objects(app, "auto", "main", "small", str(tmp_path / "a"))["engine"] == "in-process"
    assert no_spark_running == []
    assert export_objects(app, "auto", "main", "small", str(tmp_path / "b"), master="local[1]")["engine"] == "spark"
    assert export_objects(app, "auto", "main", "", str(tmp_path / "c"))["engine"] == "spark"  # one object too many
    assert export_objects(app, "auto", "main", "large", str(tmp_path / "d"))["engine"] == "spark"  # too many bytes
    assert no_spark_running == ["local[1]", None, None]
    assert (tmp_path / "a" / "0.csv").read_bytes() == b"x" * 10


@pytest.fixture
def no_spark_running(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str | None]]:
    """Auto's view of a fresh process; a Spark start is recorded (and served by a stand-in) instead of made."""
    asked: list[str | None] = []

    def get_context(master: str | None = None) -> LocalContext:
        asked.append(master)
        return LocalContext()

    monkeypatch.setattr(session, "running", lambda: False)
    monkeypatch.setattr(session, "get_context", get_context)
    yield asked


def test_auto_imports_small_sources_in_process_and_others_on_spark(
    app: App, tmp_path: Path, no_spark_running: list[str | None], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(importer, "SMALL_OBJECTS", 3)
    monkeypatch.setattr(importer, "SMALL_BYTES", 100)
    app.catalog.create_repository("auto")
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)  # a directory counts as one of the 3
    for i in range(2):
        (src / "d" / f"{i}").write_bytes(b"x" * 10)
    assert import_objects(app, str(src), "auto", "main", "a")["engine"] == "in-process"
    assert no_spark_running == []
    assert import_objects(app, str(src), "auto", "main", "a", master="local[1]")["engine"] == "spark"  # a named master
    (src / "e").mkdir()  # one entry too many
    assert import_objects(app, str(src), "auto", "main", "b")["engine"] == "spark"
    (src / "e").rmdir()
    (src / "d" / "0").write_bytes(b"x" * 91)  # too many bytes to hash
    assert import_objects(app, str(src), "auto", "main", "c")["engine"] == "spark"
    assert no_spark_running == ["local[1]", None, None]


def test_auto_collects_small_namespaces_in_process_and_others_on_spark(
    app: App, no_spark_running: list[str | None], monkeypatch: pytest.MonkeyPatch
) -> None:
    app.catalog.create_repository("auto")
    app.catalog.put("auto", "main", "a.txt", b"a")
    app.graveler.commit("auto", "main", "one")
    ns = app.catalog.repository("auto").storage_namespace
    store_rules(app.adapter, ns, GcRules(7))

    def keys() -> list[str]:
        return [info.url[len(ns) + 1:] for info in app.adapter.list(ns + "/")]

    work = [k for k in keys() if is_data_key(k) or is_table_key(k)]  # what GC lists and may collect
    monkeypatch.setattr(gc, "SMALL_OBJECTS", len(work))
    for _ in range(3):  # each run keeps its mark's files: GC's own files are not its work (issue 38 item 9)
        assert run_gc(app, "auto", dry_run=True, min_age=0)["engine"] == "in-process"
    assert no_spark_running == []
    assert len(keys()) > 10 * len(work), "the marks' files must outnumber what GC collects"
    monkeypatch.setattr(gc, "SMALL_OBJECTS", len(work) - 1)
    assert run_gc(app, "auto", dry_run=True, min_age=0)["engine"] == "spark"
    monkeypatch.setattr(gc, "SMALL_OBJECTS", len(work))
    monkeypatch.setattr(gc, "SMALL_LOOK", len(work))  # a namespace it cannot size within its look is not small
    assert run_gc(app, "auto", dry_run=True, min_age=0)["engine"] == "spark"
    assert no_spark_running == [None, None]


def test_engine_choice_refuses_bad_input() -> None:
    with pytest.raises(InvalidArgument, match="unknown engine 'jvm'"):
        job_context("jvm", None, lambda: True)
    with pytest.raises(InvalidArgument, match="--master local.1. names a Spark master: not with the in-process engine"):
        job_context("in-process", "local[1]", lambda: True)


def test_ctrl_c_cancels_an_in_process_job_between_tasks() -> None:
    sc = LocalContext()
    ran: list[int] = []
    waited: list[bool] = []
    cancelled = threading.Event()
    cancel_all = sc.cancelAllJobs

    def cancelling() -> None:  # the SIGINT handler's thread cancels the jobs: the first task waits for it
        cancel_all()
        cancelled.set()

    sc.cancelAllJobs = cancelling  # type: ignore[method-assign]

    def task(i: int, items: Iterator[int]) -> Iterator[int]:
        ran.append(i)
        if i == 0:
            os.kill(os.getpid(), signal.SIGINT)
            # the cancelling thread has run before the next task may start (not a fixed 0.5 s it could outlast);
            # asserted below: an error raised in here would leave the block as Interrupted all the same
            waited.append(cancelled.wait(60))
        yield from items

    with pytest.raises(Interrupted, match="stopped: run it again"):
        with interruptible(sc, "stopped: run it again"), translated():
            sc.parallelize(range(8), 4).mapPartitionsWithIndex(task).count()
    assert waited == [True], "the SIGINT never cancelled the jobs"
    assert ran == [0]  # the SIGINT landed in the first task, and no other task started


def test_the_jvm_stderr_keeps_errors_and_drops_start_up_noise(capfd: pytest.CaptureFixture[str]) -> None:
    kept = "14:02:03 ERROR Executor: Exception in task 0.0 in stage 1.0\njava.lang.OutOfMemoryError: Java heap space\n"
    noise = (
        "WARNING: Using incubator modules: jdk.incubator.vector\n"
        "Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties\n"
        "26/11/26 14:02:01 WARN NativeCodeLoader: Unable to load native-hadoop library for your platform\n"
        "26/11/26 14:02:01 WARN Utils: Your hostname, vm, resolves to a loopback address: 127.0.0.1; using 10.0.0.2\n"
        "WARNING: An illegal reflective access operation has occurred\n"
        'Setting default log level to "WARN".\n'
    )
    read_fd, write_fd = os.pipe()
    os.write(write_fd, (noise + kept).encode())
    os.close(write_fd)
    session._forward(read_fd)
    assert capfd.readouterr().err == kept


WARNING_LINE = re.compile(r"WARN|log4j|NativeCodeLoader|illegal reflective|FutureWarning|incubator", re.IGNORECASE)


@pytest.mark.slow
def test_import_and_gc_on_spark_print_no_warnings(tmp_path: Path) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("LAKEMOUNT_", "SPARK_", "PYSPARK_"))},
        "LAKEMOUNT_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT),
        "LAKEMOUNT_BLOCKSTORE_LOCAL_IMPORT_ROOTS": str(tmp_path),  # the source lies beside the home
    }
    src = tmp_path / "src"
    src.mkdir()
    (src / "one.csv").write_bytes(b"1\n")

    def lakemount(*args: str) -> str:
        cmd = [sys.executable, "-m", "lakemount.cli.main", *args]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
        assert out.returncode == 0, out.stderr
        return out.stderr

    lakemount("repo", "create", "lakefs://quiet")
    lakemount("gc", "set-config", "lakefs://quiet", "--default-retention-days", "7")
    for args in (
        ("import", "--from", str(src), "--to", "lakefs://quiet/main/in/", "--commit", "--engine", "spark", "--no-progress"),
        ("gc", "run", "lakefs://quiet", "--dry-run", "--engine", "spark"),
    ):
        stderr = lakemount(*args)
        assert not [line for line in stderr.splitlines() if WARNING_LINE.search(line)], stderr
