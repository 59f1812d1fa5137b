"""Issue 14 item 3: a zero-copy imported object is checked against its source on every read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lakemount.app import App
from lakemount.block.memory import MemoryAdapter
from lakemount.catalog import catalog as catalog_module
from lakemount.catalog.catalog import Catalog
from lakemount.catalog.confinement import ImportSource
from lakemount.config import load
from lakemount.errors import Corrupt
from lakemount.graveler.model import FILE_MODE, Entry
from lakemount.jobs.importer import _local_records

# The metadata key where import records a local source's mtime (catalog.SOURCE_MTIME_KEY).
SOURCE_MTIME_KEY = "lakemount-source-mtime-ns"
# What the catalog raises (errors.SourceChanged, a Corrupt); spelled by category so the test imports on any version.
SourceChanged = Corrupt


def imported_entry(src: Path) -> Entry:
    """The entry ``import`` writes for a local file (the importer's own record builder)."""
    records = list(_local_records(ImportSource("local", os.fspath(src.parent)), b"", [("lfile", src.name.encode())], [0]))
    assert len(records) == 1
    return records[0][1]


@pytest.fixture
def app(tmp_path: Path) -> App:
    app = App(load(None, env={"LAKEMOUNT_HOME": os.fspath(tmp_path / "home"), "LAKEMOUNT_CACHE_DISK_BYTES": "0"}))
    app.catalog.create_repository("imp")
    return app


def test_item3_import_records_the_source_mtime(tmp_path: Path) -> None:
    src = tmp_path / "f.csv"
    src.write_bytes(b"ab")
    assert getattr(catalog_module, "SOURCE_MTIME_KEY", None) == SOURCE_MTIME_KEY
    e = imported_entry(src)
    assert e.address == f"local://{src}" and e.size == 2
    assert dict(e.metadata)[SOURCE_MTIME_KEY] == str(os.stat(src).st_mtime_ns)


def test_item3_local_import_overwritten_fails_on_read(app: App, tmp_path: Path) -> None:
    cat = app.catalog
    src = tmp_path / "f.csv"
    src.write_bytes(b"ab")
    cat.put_entry("imp", "main", "f.csv", imported_entry(src))
    repo = cat.repository("imp")
    entry = cat.stat("imp", "main", "f.csv")
    assert cat.read(repo, entry) == b"ab"
    with cat.open(repo, entry) as f:
        assert f.read() == b"ab"
    # Same size, new bytes, new mtime: the committed entry's bytes are gone.
    src.write_bytes(b"XY")
    os.utime(src, ns=(entry.mtime_ns + 5_000_000_000, entry.mtime_ns + 5_000_000_000))
    with pytest.raises(SourceChanged, match="modified since the import"):
        cat.read(repo, entry)
    with pytest.raises(SourceChanged):
        cat.open(repo, entry)
    src.write_bytes(b"longer now")
    with pytest.raises(SourceChanged, match="10 bytes, 2 when imported"):
        cat.read(repo, entry)
    src.unlink()
    with pytest.raises(SourceChanged, match="gone"):
        cat.read(repo, entry)


def test_item3_s3_import_checks_the_etag() -> None:
    cat = Catalog.__new__(Catalog)
    cat.adapter = MemoryAdapter()  # type: ignore[misc]
    url = "mem://bucket/k"
    cat.adapter.put(url, b"ab")
    etag = cat.adapter.stat(url).etag
    entry = Entry(url, 2, etag, 1, "", (), FILE_MODE)
    cat.check_source(entry)
    cat.adapter.put(url, b"cd")
    with pytest.raises(SourceChanged, match="ETag"):
        cat.check_source(entry)


def test_item3_cli_cat_of_changed_import_is_one_line_error(app: App, tmp_path: Path) -> None:
    import subprocess
    import sys

    src = tmp_path / "f.csv"
    src.write_bytes(b"ab")
    app.catalog.put_entry("imp", "main", "f.csv", imported_entry(src))
    env = {**os.environ, "LAKEMOUNT_HOME": os.fspath(tmp_path / "home")}
    cmd = [sys.executable, "-m", "lakemount.cli.main", "fs", "cat", "lakefs://imp/main/f.csv"]
    assert subprocess.run(cmd, capture_output=True, env=env, check=True).stdout == b"ab"
    src.write_bytes(b"abc")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert p.returncode == 8 and p.stdout == ""
    assert len(p.stderr.strip().splitlines()) == 1 and "changed at its source" in p.stderr


def test_issue23_item4_import_skips_local_names_that_are_not_utf8(tmp_path: Path) -> None:
    root = tmp_path / "src"
    (root / "d").mkdir(parents=True)
    (root / "d" / "ok.csv").write_bytes(b"ok")
    bad = os.path.join(os.fsencode(root / "d"), b"bad\xffname.csv")
    with open(bad, "wb") as f:
        f.write(b"bad")
    skipped = [0]
    records = list(_local_records(ImportSource("local", str(root)), b"t/", [("dir", b"")], skipped))
    assert [k for k, _e in records] == [b"t/d/ok.csv"] and skipped == [1]
