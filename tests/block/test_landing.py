"""Landing files and the pipeline that hashes and writes an upload on a second thread."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from lakemount.block.landing import FLUSH_EVERY, Landing, Pipeline, landing
from tests.pagecache import filesystem_of, resident_pages


def _round_trip(tmp_path: Path, chunks: list[bytes], expected: int | None) -> object:
    """Put ``chunks`` through a Pipeline into a landing file; check its bytes and digest; return the pipeline's thread."""
    sha = hashlib.sha256()
    with landing(f"local://{tmp_path}/ns", None) as land:
        pipe = Pipeline(land, sha, expected=expected)
        thread = pipe._thread
        for c in chunks:
            pipe.put(c)
        pipe.finish()
        land.close()
        with open(land.path, "rb") as f:
            assert f.read() == b"".join(chunks)
    assert sha.hexdigest() == hashlib.sha256(b"".join(chunks)).hexdigest()
    return thread


def test_a_pipeline_writes_and_hashes_every_chunk_in_order(tmp_path: Path) -> None:
    chunks = [os.urandom(n) for n in (1, 0, 65536, 3, 1 << 20, 7) * 20]
    assert _round_trip(tmp_path, chunks, expected=None) is not None  # a thread wrote them
    assert os.listdir(tmp_path / "ns") == []  # not stored: the landing file is gone


def test_a_failed_write_surfaces_in_put_or_finish_and_the_thread_ends(tmp_path: Path) -> None:
    class FullDisk(Landing):
        def write(self, data: bytes | memoryview) -> None:
            raise OSError(28, "No space left on device")

    land = FullDisk(str(tmp_path / "f"), local_namespace=False)
    pipe = Pipeline(land)
    with pytest.raises(OSError, match="No space"):
        for _ in range(100):
            pipe.put(b"x" * 1024)
        pipe.finish()
    with pytest.raises(OSError, match="No space"):
        pipe.finish()
    assert not pipe._thread.is_alive()
    land.discard()


def test_a_small_body_is_written_inline_with_the_same_result(tmp_path: Path) -> None:
    """Below PIPELINE_ABOVE no thread is started; bytes and digest are those of the threaded path."""
    chunks = [os.urandom(n) for n in (1, 0, 4096, 3)]
    assert _round_trip(tmp_path, chunks, expected=sum(map(len, chunks))) is None


def test_a_large_landing_file_leaves_the_page_cache_as_it_is_written_back(tmp_path: Path) -> None:
    """Stop 51: on the local store a landing file is written back every FLUSH_EVERY bytes while it fills, and
    the kernel drops the pages written back; the bytes read back the same."""
    if filesystem_of(str(tmp_path)) in ("tmpfs", "ramfs"):
        pytest.skip("a memory file system keeps its pages: nothing to drop")
    body = os.urandom(3 * FLUSH_EVERY)
    land = Landing(str(tmp_path / "f"), local_namespace=True)
    try:
        for offset in range(0, len(body), 1 << 20):
            land.write(body[offset:offset + (1 << 20)])
        land.close()  # after the write-backs started while it filled
        fd = os.open(land.path, os.O_RDONLY)
        try:
            first = resident_pages(fd, FLUSH_EVERY)
            assert first == 0, f"{first} pages of the first {FLUSH_EVERY} bytes stayed cached after their write-back"
            assert os.pread(fd, len(body), 0) == body
        finally:
            os.close(fd)
    finally:
        land.discard()
