"""Zero-copy import on Spark: 100,000 objects from a local directory and from moto S3, replace semantics, bad input."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import Any

import pytest

from lakemount.app import App
from lakemount.catalog.confinement import ImportSource
from lakemount.errors import InvalidArgument, NotFound, PreconditionFailed, ReadOnly
from lakemount.jobs.importer import FILES_PER_TASK, import_objects, plan
from tests.jobs.conftest import moto_backend

pytestmark = [pytest.mark.spark]

N_DIRS, N_FILES = 100, 1000  # 100,000 objects


def make_tree(root: Path, dirs: int, files: int) -> None:
    for d in range(dirs):
        p = root / f"d{d:03d}"
        p.mkdir(parents=True)
        for i in range(files):
            (p / f"f{i:04d}.txt").write_bytes(f"{d}/{i}".encode())


def test_plan_cuts_contiguous_intervals(tmp_path: Path) -> None:
    root = tmp_path / "src"
    make_tree(root / "a", 3, 2)
    (root / "a-file").write_bytes(b"x")
    (root / "b").mkdir()
    for i in range(FILES_PER_TASK + 3):
        (root / f"top{i:05d}").write_bytes(b"y")
    tasks = plan(ImportSource("local", str(root)), want_tasks=4)
    assert tasks[0].lo == b"" and tasks[-1].hi is None
    for a, b in zip(tasks, tasks[1:]):
        assert a.hi == b.lo and a.hi is not None and a.lo < a.hi
    # Expanded one level: a/'s 3 subdirectories became tasks, the empty b/ vanished, files are chunked.
    dirs = [u[1] for t in tasks for u in t.units if u[0] == "dir"]
    assert dirs == [b"a/d000/", b"a/d001/", b"a/d002/"]
    assert sum(1 for t in tasks for u in t.units if u[0] == "lfile") == FILES_PER_TASK + 4
    for t in tasks:
        keys = [u[1] for u in t.units]
        assert all(t.lo <= k and (t.hi is None or k < t.hi) for k in keys)


def check_imported(app: App, repo: str, ref: str, prefix: str, expected: dict[str, bytes], sample: int = 500) -> None:
    items = [it for it in app.catalog.list(repo, ref, prefix) if it.entry is not None]
    assert [it.path for it in items] == sorted(prefix + k for k in expected)
    r = app.catalog.repository(repo)
    for it in items[:: max(1, len(items) // sample)]:
        assert it.entry is not None
        data = app.catalog.read(r, it.entry)
        assert data == expected[it.path[len(prefix) :]]
        assert "://" in it.entry.address and it.entry.size == len(data)


@pytest.mark.slow
def test_import_100k_from_a_local_directory(app: App, spark: Any, tmp_path: Path) -> None:
    src = tmp_path / "src"
    make_tree(src, N_DIRS, N_FILES)
    expected = {f"d{d:03d}/f{i:04d}.txt": f"{d}/{i}".encode() for d in range(N_DIRS) for i in range(N_FILES)}
    app.catalog.create_repository("imp")
    app.catalog.put("imp", "main", "in/stale.txt", b"replaced by the import")
    app.catalog.put("imp", "main", "keep.txt", b"outside the prefix")
    app.graveler.commit("imp", "main", "before")
    started = time.monotonic()
    report = import_objects(app, str(src), "imp", "main", "in", commit=True, message="import 100k")
    elapsed = time.monotonic() - started
    print(f"\nlocal import: {report['objects']} objects in {elapsed:.1f} s ({report['objects_per_second']}/s of work)")
    assert report["objects"] == N_DIRS * N_FILES and report["staged"] == N_DIRS * N_FILES
    assert report["removed"] == 1 and report["commit"] is not None
    check_imported(app, "imp", "main", "in/", expected)
    entry = app.catalog.stat("imp", "main", "in/d007/f0042.txt")
    assert entry.address == f"local://{src}/d007/f0042.txt"
    assert entry.etag == hashlib.md5(b"7/42").hexdigest()
    assert entry.mtime_ns == os.stat(src / "d007/f0042.txt").st_mtime_ns
    assert app.catalog.read(app.catalog.repository("imp"), app.catalog.stat("imp", "main", "keep.txt")) == b"outside the prefix"
    data_objects = list(app.adapter.list(app.catalog.repository("imp").storage_namespace + "/data/"))
    assert len(data_objects) == 2  # the two objects written before: the import copied nothing
    # Changing the source and importing again replaces exactly the difference.
    (src / "d000" / "f0000.txt").write_bytes(b"changed")
    (src / "d001" / "f0001.txt").unlink()
    (src / "new.txt").write_bytes(b"new")
    again = import_objects(app, f"file://{src}", "imp", "main", "in/", commit=True)
    assert (again["staged"], again["removed"], again["unchanged"]) == (2, 1, N_DIRS * N_FILES - 2)
    assert app.catalog.read(app.catalog.repository("imp"), app.catalog.stat("imp", "main", "in/d000/f0000.txt")) == b"changed"


@pytest.mark.slow
def test_import_100k_from_s3(app: App, spark: Any, s3: Any) -> None:
    s3.create_bucket(Bucket="ingest")
    backend = moto_backend()
    expected: dict[str, bytes] = {}
    for d in range(N_DIRS):
        for i in range(N_FILES):
            key, data = f"d{d:03d}/f{i:04d}.csv", f"{d},{i}\n".encode()
            backend.put_object("ingest", f"events/{key}", data)
            expected[key] = data
    backend.put_object("ingest", "other/not-imported", b"x")
    app.catalog.create_repository("s3imp")
    report = import_objects(app, "s3://ingest/events", "s3imp", "main", "raw", commit=True, message="from s3")
    print(f"\ns3 import: {report['objects']} objects ({report['objects_per_second']}/s of work)")
    assert report["objects"] == N_DIRS * N_FILES and report["staged"] == N_DIRS * N_FILES
    check_imported(app, "s3imp", "main", "raw/", expected, sample=200)
    entry = app.catalog.stat("s3imp", "main", "raw/d003/f0004.csv")
    assert entry.address == "s3://ingest/events/d003/f0004.csv"
    assert entry.etag == hashlib.md5(b"3,4\n").hexdigest()


def test_import_bad_input(app: App, spark: Any, tmp_path: Path, s3: Any) -> None:
    app.catalog.create_repository("bad")
    src = tmp_path / "src"
    make_tree(src, 1, 3)
    with pytest.raises(NotFound, match="does not exist"):
        import_objects(app, str(tmp_path / "missing"), "bad", "main")
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotFound, match="nothing to import"):
        import_objects(app, str(tmp_path / "empty"), "bad", "main")
    with pytest.raises(InvalidArgument, match="not a directory"):
        import_objects(app, str(src / "d000" / "f0000.txt"), "bad", "main")
    with pytest.raises(InvalidArgument):
        import_objects(app, "gs://bucket/x", "bad", "main")
    with pytest.raises(NotFound):
        import_objects(app, str(src), "no-such-repo", "main")
    with pytest.raises(NotFound):
        import_objects(app, str(src), "bad", "no-such-branch")
    s3.create_bucket(Bucket="empty-bucket")
    with pytest.raises(NotFound, match="nothing to import"):
        import_objects(app, "s3://empty-bucket/none/", "bad", "main")
    with pytest.raises(NotFound, match="bucket"):
        import_objects(app, "s3://no-such-bucket/x", "bad", "main")
    app.catalog.put("bad", "main", "x", b"x")
    app.graveler.commit("bad", "main", "x")
    app.graveler.create_tag("bad", "v1", "main")
    with pytest.raises(ReadOnly):
        import_objects(app, str(src), "bad", "v1")
    app.catalog.put("bad", "main", "elsewhere.txt", b"uncommitted")
    with pytest.raises(PreconditionFailed, match="uncommitted changes outside"):
        import_objects(app, str(src), "bad", "main", "in", commit=True)
    report = import_objects(app, str(src), "bad", "main", "in")  # staging only: allowed
    assert report["staged"] == 3 and report["commit"] is None
