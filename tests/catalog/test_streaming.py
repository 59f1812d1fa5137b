"""Streamed uploads (catalog/streaming.py): parts go out as the file fills, bounded, and end content-addressed."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

import pytest

from lakemount.app import App
from lakemount.block.layout import data_address
from lakemount.catalog import streaming
from lakemount.catalog.streaming import IN_FLIGHT, PART_SIZE, StreamedUpload, parts_etag
from lakemount.config import load
from lakemount.errors import Unavailable
from lakemount.fuse.writes import DirtyFile

REPO = "repo"
MiB = 1 << 20


class FakeParts:
    """An in-memory ``PartUploads`` that records its calls; ``gate`` holds every put_part until set."""

    def __init__(self, store: object = None) -> None:
        self.store = store  # where a completed upload lands (a BlockAdapter), if anywhere
        self.calls: list[tuple[str, int]] = []
        self.parts: dict[int, bytes] = {}
        self.completed: dict[str, bytes] = {}
        self.gate = threading.Event()
        self.gate.set()
        self.lock = threading.Lock()
        self.waiting = 0
        self.fail_part: int | None = None

    def start_parts(self, url: str) -> str:
        self.calls.append(("start", 0))
        return "upload-1"

    def put_part(self, url: str, upload_id: str, number: int, data: bytes) -> str:
        with self.lock:
            self.waiting += 1
        try:
            assert self.gate.wait(30), "the gate was never opened"
        finally:
            with self.lock:
                self.waiting -= 1
        if number == self.fail_part:
            raise Unavailable(f"injected: part {number} refused")
        with self.lock:
            self.calls.append(("part", number))
            self.parts[number] = data
        return f"etag-{number}"

    def finish_parts(self, url: str, upload_id: str, etags: list[str]) -> None:
        self.calls.append(("finish", len(etags)))
        assert etags == [f"etag-{n}" for n in range(1, len(etags) + 1)]
        self.completed[url] = b"".join(self.parts[n] for n in range(1, len(etags) + 1))
        if self.store is not None:
            self.store.put(url, self.completed[url])  # type: ignore[attr-defined]

    def abort_parts(self, url: str, upload_id: str) -> None:
        self.calls.append(("abort", 0))


@pytest.fixture
def app(tmp_path: Path) -> App:
    a = App(load(env={"LAKEMOUNT_HOME": str(tmp_path / "home"), "LAKEMOUNT_CACHE_DISK_BYTES": "0"}))
    a.catalog.create_repository(REPO)
    return a


def dirty_file(app: App, tmp_path: Path, parts: FakeParts) -> DirtyFile:
    repo = app.catalog.repository(REPO)
    spool = tmp_path / "spool"
    spool.mkdir(exist_ok=True)
    return DirtyFile(str(spool), None, 0, streaming=lambda: StreamedUpload(app.catalog, repo, parts))


def wait_until(pred: object, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.01)


def test_parts_go_out_while_the_file_is_written_and_the_save_sends_the_last(app: App, tmp_path: Path) -> None:
    parts = FakeParts(app.catalog.adapter)
    dirty = dirty_file(app, tmp_path, parts)
    body = os.urandom(2 * PART_SIZE + 3 * MiB)
    try:
        for off in range(0, 2 * PART_SIZE + MiB, MiB):
            dirty.pwrite(off, body[off : off + MiB])
        wait_until(lambda: ("part", 2) in parts.calls, "part 2 sent before the save")
        assert ("part", 1) in parts.calls and not any(c[0] == "finish" for c in parts.calls)
        for off in range(2 * PART_SIZE + MiB, len(body), MiB):
            dirty.pwrite(off, body[off : off + MiB])
        sha = hashlib.sha256(body).hexdigest()

        def put(path: str, digests: object, link: bool, finish: object) -> object:
            assert finish is not None, "the save did not end the streamed upload"
            return finish()  # type: ignore[operator]

        _version, info = dirty.store(put)
    finally:
        dirty.discard()
    assert info.address == data_address(sha) and info.etag == parts_etag(sha, len(body)) and info.size == len(body)
    assert info.etag.endswith("-3")  # a file past MD5_MAX has the ETag of an upload in parts
    assert parts.calls[-2:] == [("part", 3), ("finish", 3)]
    landing = next(iter(parts.completed))
    assert parts.completed[landing] == body
    # Here the namespace is local: the landing object was copied to the content address and deleted.
    assert app.catalog.adapter.get(app.catalog.physical_url(app.catalog.repository(REPO), info.address)) == body
    assert not app.catalog.adapter.exists(landing)


def test_at_most_in_flight_parts_wait_and_the_writer_waits_for_the_oldest(app: App, tmp_path: Path) -> None:
    """Bounded memory: with the store stuck, IN_FLIGHT parts are out and the writer blocks in its write."""
    parts = FakeParts()
    parts.gate.clear()
    dirty = dirty_file(app, tmp_path, parts)
    chunk = os.urandom(MiB)
    total = (IN_FLIGHT + 3) * PART_SIZE
    done = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for off in range(0, total, MiB):
                dirty.pwrite(off, chunk)
        except BaseException as exc:  # re-raised below
            errors.append(exc)
        finally:
            done.set()

    t = threading.Thread(target=writer)
    t.start()
    try:
        wait_until(lambda: parts.waiting == IN_FLIGHT, f"{IN_FLIGHT} parts waiting on the store")
        assert not done.wait(0.3), "the writer went on with more than IN_FLIGHT parts unsent"
        assert parts.waiting == IN_FLIGHT
        stream = dirty.stream
        assert stream is not None and stream.sent == IN_FLIGHT * PART_SIZE
    finally:
        parts.gate.set()
        t.join(30)
    assert not errors and done.is_set()
    dirty.discard()
    assert ("abort", 0) in parts.calls  # a file dropped unsaved gives its upload up


def test_an_overwrite_gives_the_upload_up_and_the_save_uploads_whole(app: App, tmp_path: Path) -> None:
    parts = FakeParts()
    dirty = dirty_file(app, tmp_path, parts)
    body = bytearray(os.urandom(PART_SIZE + MiB))
    try:
        for off in range(0, len(body), MiB):
            dirty.pwrite(off, bytes(body[off : off + MiB]))
        assert dirty.stream is not None
        dirty.pwrite(10, b"rewritten")
        body[10:19] = b"rewritten"
        assert dirty.stream is None and ("abort", 0) in parts.calls
        seen: list[object] = []
        dirty.store(lambda path, digests, link, finish: seen.append((digests, finish)))
        assert seen == [(None, None)]  # no digests, no upload to finish: put hashes and uploads the file
        with open(dirty.path, "rb") as f:
            assert f.read() == bytes(body)
    finally:
        dirty.discard()


def test_a_failed_part_falls_back_to_a_whole_upload(app: App, tmp_path: Path) -> None:
    """A part the store refuses does not fail the write: the upload is aborted and the save stores whole."""
    parts = FakeParts()
    parts.fail_part = 1
    dirty = dirty_file(app, tmp_path, parts)
    body = os.urandom(2 * PART_SIZE + MiB)
    try:
        for off in range(0, len(body), MiB):
            dirty.pwrite(off, body[off : off + MiB])
        seen: list[object] = []

        def put(path: str, digests: object, link: bool, finish: object) -> None:
            seen.append(finish() if finish is not None else "no stream")  # type: ignore[operator]

        dirty.store(put)
    finally:
        dirty.discard()
    assert seen == [None]
    assert ("abort", 0) in parts.calls and not any(c[0] == "finish" for c in parts.calls)
    assert ("part", 1) not in parts.calls  # the fault landed on the part it was aimed at


def test_part_sizes_grow_so_ten_thousand_parts_hold_a_large_file() -> None:
    assert streaming.part_size(1) == PART_SIZE and streaming.part_size(1000) == PART_SIZE
    assert streaming.part_size(1001) == 2 * PART_SIZE
    assert sum(streaming.part_size(n) for n in range(1, 10_001)) > 400 << 30


def test_a_failed_completion_falls_back_to_a_whole_upload(app: App, tmp_path: Path) -> None:
    """The store refusing the completion (moto lost an upload under load, a real S3 a 5xx past retries)
    does not fail the save either: the upload is aborted and ``finish`` says to upload whole."""
    parts = FakeParts()
    refused: list[str] = []

    def refuse(url: str, upload_id: str, etags: list[str]) -> None:
        refused.append(url)
        raise Unavailable("injected: completion refused")

    parts.finish_parts = refuse  # type: ignore[method-assign]
    dirty = dirty_file(app, tmp_path, parts)
    body = os.urandom(PART_SIZE + MiB)
    try:
        for off in range(0, len(body), MiB):
            dirty.pwrite(off, body[off : off + MiB])
        seen: list[object] = []
        dirty.store(lambda path, digests, link, finish: seen.append(finish()))  # type: ignore[misc]
    finally:
        dirty.discard()
    assert refused, "the completion was never tried"
    assert seen == [None] and ("abort", 0) in parts.calls
