"""Export on Spark: byte-exact round trips into a directory and into moto S3, with the manifest; bad input."""

from __future__ import annotations

import hashlib
import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from lakemount.app import App
from lakemount.errors import InvalidArgument, NotFound, PreconditionFailed
from lakemount.graveler.model import DIR_MODE, LINK_MODE, Entry
from lakemount.jobs.export import MANIFEST_DIR, export_objects

pytestmark = [pytest.mark.spark]


def populate(app: App, repo: str, n: int = 1500) -> dict[str, bytes]:
    """``n`` objects of mixed sizes (and one above the streaming threshold), committed; returns path -> bytes."""
    app.catalog.create_repository(repo)
    rng = random.Random(7)
    objects: dict[str, bytes] = {}
    for i in range(n):
        size = rng.choice([0, 1, 17, 1000, 70_000])
        objects[f"data/part-{i // 100:02d}/obj-{i:05d}.bin"] = rng.randbytes(size)
    objects["data/big.bin"] = rng.randbytes(9 * 1024 * 1024)
    objects["data/dup-a.txt"] = objects["data/dup-b.txt"] = b"same bytes, stored once"
    for path, data in objects.items():
        app.catalog.put(repo, "main", path, data, mode=0o100640)
    app.catalog.put(repo, "main", "outside/skip.txt", b"not under the prefix")
    app.catalog.put_entry(repo, "main", "data/empty-dir/", Entry("", 0, "", 1, "", (), DIR_MODE))
    app.catalog.put_entry(repo, "main", "data/link", Entry("", 0, "", 1, "", (), LINK_MODE, target="big.bin"))
    app.graveler.commit(repo, "main", "data")
    app.catalog.put(repo, "main", "data/uncommitted.txt", b"staged: a branch exports its head commit")
    return {p[len("data/") :]: d for p, d in objects.items()}


def manifest(read: Any, parts: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for part in parts:
        for line in read(part).decode().splitlines():
            rec = json.loads(line)
            out[rec["path"]] = rec
    return out


@pytest.mark.slow
def test_export_round_trips_into_a_directory(app: App, spark: Any, tmp_path: Path) -> None:
    objects = populate(app, "exp")
    target = tmp_path / "out"
    report = export_objects(app, "exp", "main", "data", str(target))
    assert report["files"] == len(objects) and report["failed"] == 0
    assert report["directories"] == 1 and report["symlinks"] == 1
    for rel, data in objects.items():
        path = target / rel
        assert path.read_bytes() == data, rel
        assert os.stat(path).st_mode & 0o777 == 0o640
    assert (target / "empty-dir").is_dir() and os.readlink(target / "link") == "big.bin"
    assert not (target / "uncommitted.txt").exists() and not (target / "skip.txt").exists()
    summary = json.loads((target / MANIFEST_DIR / "manifest.json").read_bytes())
    assert summary["commit"] == app.graveler.get_branch("exp", "main").commit_id
    recs = manifest(lambda p: (target / p).read_bytes(), summary["parts"])
    files = {p: r for p, r in recs.items() if r["type"] == "file"}
    assert set(files) == set(objects)
    for rel, rec in files.items():
        assert rec["size"] == len(objects[rel]) and rec["sha256"] == hashlib.sha256(objects[rel]).hexdigest()
        assert rec["etag"] == hashlib.md5(objects[rel]).hexdigest()
    mtime = app.catalog.stat("exp", "main", "data/big.bin").mtime_ns
    assert os.stat(target / "big.bin").st_mtime_ns == mtime

    with pytest.raises(PreconditionFailed, match="not empty"):
        export_objects(app, "exp", "main", "data", str(target))
    (target / "part-00" / "obj-00000.bin").write_bytes(b"clobbered")
    (target / "mine.txt").write_bytes(b"not ours")
    again = export_objects(app, "exp", "main~0", "data/part-00", str(target), overwrite=True)
    assert again["files"] == 100
    assert (target / "obj-00000.bin").read_bytes() == objects["part-00/obj-00000.bin"]
    assert (target / "mine.txt").read_bytes() == b"not ours"


@pytest.mark.slow
def test_export_round_trips_into_s3(app: App, spark: Any, s3: Any) -> None:
    objects = populate(app, "exps3", 300)  # moto serves each object in milliseconds
    s3.create_bucket(Bucket="exports")
    report = export_objects(app, "exps3", "main", "data/", "s3://exports/run1")
    assert report["files"] == len(objects) and report["skipped_symlinks"] == 1

    def get(key: str) -> bytes:
        return s3.get_object(Bucket="exports", Key=f"run1/{key}")["Body"].read()

    listed = {
        o["Key"][len("run1/") :]
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket="exports", Prefix="run1/")
        for o in page.get("Contents", [])
    }
    assert {k for k in listed if not k.startswith(MANIFEST_DIR)} == set(objects) | {"empty-dir/"}
    for rel, data in objects.items():
        assert hashlib.sha256(get(rel)).digest() == hashlib.sha256(data).digest(), rel
    summary = json.loads(get(f"{MANIFEST_DIR}/manifest.json"))
    recs = manifest(get, summary["parts"])
    assert {p for p, r in recs.items() if r["type"] == "file"} == set(objects)
    assert all(recs[p]["sha256"] == hashlib.sha256(d).hexdigest() for p, d in objects.items())
    with pytest.raises(PreconditionFailed):
        export_objects(app, "exps3", "main", "data", "s3://exports/run1")


def test_export_bad_input(app: App, spark: Any, tmp_path: Path) -> None:
    app.catalog.create_repository("expbad")
    app.catalog.put("expbad", "main", "a/x", b"x")
    app.graveler.commit("expbad", "main", "x")
    with pytest.raises(NotFound):
        export_objects(app, "nope", "main", "", str(tmp_path / "o"))
    with pytest.raises(NotFound):
        export_objects(app, "expbad", "no-such-ref", "", str(tmp_path / "o"))
    with pytest.raises(NotFound, match="no objects under"):
        export_objects(app, "expbad", "main", "b", str(tmp_path / "o"))
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(InvalidArgument, match="not a directory"):
        export_objects(app, "expbad", "main", "", str(tmp_path / "file"))
    with pytest.raises(NotFound, match="bucket"):
        export_objects(app, "expbad", "main", "", "s3://no-such-bucket/x")
    # Data gone from under a commit: the export says so and does not mark itself complete.
    ns = app.catalog.repository("expbad").storage_namespace
    app.adapter.delete(f"{ns}/{app.catalog.stat('expbad', 'main', 'a/x').address}")
    with pytest.raises(NotFound, match="export incomplete"):
        export_objects(app, "expbad", "main", "", str(tmp_path / "o2"))
    assert not (tmp_path / "o2" / MANIFEST_DIR / "manifest.json").exists()
