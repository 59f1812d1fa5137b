"""How the front ends stream object bodies out: memory maps for local files, reads otherwise."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from lakemount.app import App
from lakemount.config import load
from lakemount.errors import ObjectNotFound
from lakemount.serving.bodies import MappedChunks, read_stream

SIZE = 3 * (1 << 20) + 4099  # several chunks and a partial page at the end


def _data(n: int) -> bytes:
    block = hashlib.sha256(b"stream").digest()
    return (block * (n // len(block) + 1))[:n]


@pytest.fixture
def app(tmp_path: Path) -> App:
    app = App(load(None, env={"LAKEMOUNT_HOME": os.fspath(tmp_path)}))
    app.catalog.create_repository("repo")
    return app


@pytest.mark.parametrize(("start", "length"), [(0, SIZE), (1, SIZE - 1), (4095, 1 << 20), (SIZE - 5, 5), ((1 << 20) - 3, 7)])
def test_local_objects_stream_as_views_of_a_map(app: App, start: int, length: int) -> None:
    data = _data(SIZE)
    app.catalog.put("repo", "main", "f", data)
    repo = app.catalog.repository("repo")
    entry = app.catalog.stat("repo", "main", "f")
    chunks, f = read_stream(app.catalog, repo, entry, start, length)
    try:
        assert isinstance(chunks, MappedChunks)
        assert b"".join(bytes(c) for c in chunks) == data[start : start + length]
        # The ASGI adapter's way: fault windows in, then slice the view itself.
        chunks.fault(chunks.start, chunks.end)
        assert bytes(chunks.view[chunks.start : chunks.end]) == data[start : start + length]
    finally:
        assert f is not None
        f.close()


def test_an_object_shorter_than_its_entry_is_refused(app: App) -> None:
    app.catalog.put("repo", "main", "f", _data(1 << 20))
    repo = app.catalog.repository("repo")
    entry = app.catalog.stat("repo", "main", "f")
    with pytest.raises(ObjectNotFound):
        read_stream(app.catalog, repo, entry._replace(size=(1 << 20) + 1), 0, (1 << 20) + 1)


def test_imported_objects_are_read_not_mapped(app: App, tmp_path: Path) -> None:
    # Someone else's file may be truncated while a GET streams it: a map would turn that into SIGBUS.
    outside = tmp_path / "outside.bin"
    data = _data(SIZE)
    outside.write_bytes(data)
    repo = app.catalog.repository("repo")
    app.catalog.put("repo", "main", "f", data)
    entry = app.catalog.stat("repo", "main", "f")._replace(address=f"local://{outside}")
    chunks, f = read_stream(app.catalog, repo, entry, 0, SIZE)
    try:
        assert not isinstance(chunks, MappedChunks)
        assert b"".join(chunks) == data
    finally:
        if f is not None:
            f.close()


def test_item3_gateway_refuses_an_import_whose_source_changed(app: App, tmp_path: Path) -> None:
    from lakemount.errors import Corrupt
    from lakemount.gateway.errors import from_lakemount
    from tests.catalog.test_import_contract import imported_entry

    src = tmp_path / "source.csv"
    src.write_bytes(b"ab")
    app.catalog.put_entry("repo", "main", "imp.csv", imported_entry(src))
    repo = app.catalog.repository("repo")
    entry = app.catalog.stat("repo", "main", "imp.csv")
    chunks, f = read_stream(app.catalog, repo, entry, 0, 2)
    try:
        assert b"".join(bytes(c) for c in chunks) == b"ab"
    finally:
        if f is not None:
            f.close()
    src.write_bytes(b"XY")
    os.utime(src, ns=(entry.mtime_ns + 10**9, entry.mtime_ns + 10**9))
    with pytest.raises(Corrupt, match="changed at its source") as info:
        chunks, f = read_stream(app.catalog, repo, entry, 0, 2)
        try:
            assert b"".join(bytes(c) for c in chunks) == b"ab", "other bytes than the entry's"
        finally:
            if f is not None:
                f.close()
    err = from_lakemount(info.value)
    assert err.code == "InvalidObjectState" and err.http_status == 403 and "re-imported" in err.message
