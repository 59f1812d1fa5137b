"""The object writer: one context manager stores object data; leaving commits, an exception leaves nothing.

Also the rules that keep it the only way in: no front end reaches the block
store's landing files itself, and only ``block/layout.py`` spells the data
layout (``data/<aa>/<sha256>``).
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import time
from pathlib import Path

import pytest

from lakemount.app import App
from lakemount.block.landing import Landing
from lakemount.block.layout import data_address, data_sha, is_data_key
from lakemount.catalog.model import Entry
from lakemount.catalog.writer import INLINE_MAX
from lakemount.config import load
from tests.test_layering import PACKAGE, front_end_files, imports, rel

REPO = "writes"


@pytest.fixture
def app(tmp_path: Path) -> App:
    a = App(load(env={"LAKEMOUNT_HOME": str(tmp_path / "home"), "LAKEMOUNT_CACHE_DISK_BYTES": "0"}))
    a.catalog.create_repository(REPO)
    return a


def namespace(app: App) -> Path:
    return Path(app.config.home) / "data" / REPO


def stored_files(app: App) -> list[str]:
    """Every file under the repository's namespace, landing files included."""
    return sorted(str(Path(d, f).relative_to(namespace(app))) for d, _s, fs in os.walk(namespace(app)) for f in fs)


def landing_files(app: App) -> list[Path]:
    return [p for p in namespace(app).rglob(".tmp-*") if p.is_file()]


def read(app: App, address: str) -> bytes:
    cat = app.catalog
    return cat.adapter.get(cat.physical_url(cat.repository(REPO), address))


@pytest.mark.parametrize("size", [0, 10, INLINE_MAX + 1, 5 * 1024 * 1024 + 3])
def test_leaving_the_block_stores_the_bytes_content_addressed_and_returns_their_info(app: App, size: int) -> None:
    body = os.urandom(size)
    before = set(stored_files(app))
    with app.catalog.writer(REPO) as w:
        for i in range(0, size, 100_000):
            w.write(body[i : i + 100_000])
    sha = hashlib.sha256(body).hexdigest()
    assert w.info.address == data_address(sha) == f"data/{sha[:2]}/{sha}"
    assert (w.info.size, w.info.etag, w.info.sha256) == (size, hashlib.md5(body).hexdigest(), sha)
    assert read(app, w.info.address) == body
    assert set(stored_files(app)) - before == {w.info.address} and landing_files(app) == []


@pytest.mark.parametrize("size", [10, 3 * 1024 * 1024])
def test_an_exception_in_the_block_leaves_nothing_visible(app: App, size: int) -> None:
    body = os.urandom(size)
    before = stored_files(app)
    with pytest.raises(ZeroDivisionError), app.catalog.writer(REPO) as w:
        w.write(body)
        raise ZeroDivisionError
    assert stored_files(app) == before  # no object, no landing file
    assert not app.catalog.adapter.exists(app.catalog.physical_url(app.catalog.repository(REPO),
                                                                    data_address(hashlib.sha256(body).hexdigest())))
    with pytest.raises(RuntimeError, match="stored nothing"):
        _ = w.info


def test_a_full_disk_while_landing_fails_the_block_and_leaves_nothing(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    writes: list[int] = []

    def full(self: Landing, data: bytes | memoryview) -> None:
        writes.append(len(data))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Landing, "write", full)
    before = stored_files(app)
    with pytest.raises(OSError) as err, app.catalog.writer(REPO, expected=8 << 20) as w:
        for _ in range(8):
            w.write(os.urandom(1 << 20))
    assert err.value.errno == errno.ENOSPC and writes, "the fault hit the landing file"
    assert stored_files(app) == before


def test_a_large_body_streams_to_disk_while_it_is_written(app: App) -> None:
    """Past ``INLINE_MAX`` the bytes go to a landing file as they come: the body is never held whole in memory."""
    chunk = os.urandom(64 * 1024)
    with app.catalog.writer(REPO) as w:
        for _ in range(48):
            w.write(chunk)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and sum(p.stat().st_size for p in landing_files(app)) < 48 * len(chunk):
            time.sleep(0.01)
        assert [p.stat().st_size for p in landing_files(app)] == [48 * len(chunk)]
    assert read(app, w.info.address) == chunk * 48 and landing_files(app) == []


def test_the_same_bytes_are_kept_not_written_again(app: App) -> None:
    cat = app.catalog
    first = cat.write_data(REPO, b"twice")
    path = namespace(app) / first.address
    os.utime(path, (1000, 1000))
    with cat.writer(REPO) as w:
        w.write(b"twice")
    assert w.info == first
    assert path.stat().st_mtime > time.time() - 60, "the kept object is refreshed against a running GC"


def test_cancel_stores_nothing(app: App) -> None:
    before = stored_files(app)
    with app.catalog.writer(REPO) as w:
        w.write(os.urandom(INLINE_MAX * 2))
        w.cancel()
    assert stored_files(app) == before


def test_an_address_stores_the_bytes_there_and_vouched_digests_are_not_recomputed(app: App) -> None:
    with app.catalog.writer(REPO, address="_lakefs/multipart/u1/00001-ab", hash_md5=False, hash_sha256=False) as w:
        w.write(b"part one")
        w.vouch(md5="0" * 32)
    assert (w.info.address, w.info.etag, w.info.sha256) == ("_lakefs/multipart/u1/00001-ab", "0" * 32, "")
    assert read(app, w.info.address) == b"part one"
    with app.catalog.writer(REPO, hash_sha256=False) as w:
        w.write(b"signed")
        w.vouch(sha256="ab" * 32)  # the gateway's signed payload hash, checked by its decoder
    assert w.info.address == data_address("ab" * 32)


def test_a_content_address_needs_the_sha256(app: App) -> None:
    with pytest.raises(ValueError, match="SHA-256"), app.catalog.writer(REPO, hash_sha256=False) as w:
        w.write(b"x")
    assert landing_files(app) == []


def test_write_file_uploads_the_file_itself_with_the_digests_given(app: App, tmp_path: Path) -> None:
    src = tmp_path / "temp"
    src.write_bytes(b"from the mount")
    sha, md5 = hashlib.sha256(b"from the mount").hexdigest(), hashlib.md5(b"from the mount").hexdigest()
    with app.catalog.writer(REPO) as w:
        w.write_file(str(src), digests=(14, sha, md5))
    assert (w.info.address, w.info.etag, w.info.size) == (data_address(sha), md5, 14)
    with app.catalog.writer(REPO) as w2:
        w2.write_file(str(src))  # hashed here
    assert w2.info == w.info and read(app, w.info.address) == b"from the mount"


def test_the_layout_parsers_agree_with_the_address() -> None:
    sha = hashlib.sha256(b"x").hexdigest()
    assert data_sha(data_address(sha)) == sha and is_data_key(data_address(sha))
    assert data_sha("data/ab/" + "cd" * 32) is None and not is_data_key("data/ab/" + "ab" * 31)


def test_no_front_end_reaches_the_block_stores_writer() -> None:
    """Object data goes in through ``Catalog.writer`` only: no front end lands bytes itself."""
    bad = [f"lakemount/{rel(p)}:{line}" for p in front_end_files() for line, m in imports(p)
           if m == "lakemount.block.landing" or m.startswith("lakemount.block.landing.")]
    assert not bad, "use Catalog.writer, not block.landing:\n" + "\n".join(bad)


def test_only_the_layout_module_spells_the_data_address() -> None:
    spelled = re.compile(r"""f?["']data/(\{|["'])""")
    bad = [f"lakemount/{rel(p)}:{n}" for p in sorted(PACKAGE.rglob("*.py")) if rel(p) != "block/layout.py"
           for n, line in enumerate(p.read_text().splitlines(), 1) if spelled.search(line)]
    assert not bad, "build data addresses with lakemount.block.layout:\n" + "\n".join(bad)


def test_a_deferred_small_body_is_stored_while_lsm_staging_stores_its_file(tmp_path: Path) -> None:
    """``defer`` (the gateway's PutObject): the entry is known when the block ends, the data PUT and
    the lsm staging file's PUT run at once, and the entry is visible only once both are stored; a
    data PUT that fails stages nothing (issue 26: a lone SDK writer paid them one after the other).
    A staging file on the block store (``staging.inline_bytes`` 0): an inline one has no PUT to overlap."""
    import threading

    from lakemount.catalog.model import Entry
    from lakemount.errors import Unavailable

    a = App(load(env={"LAKEMOUNT_HOME": str(tmp_path / "home"), "LAKEMOUNT_CACHE_DISK_BYTES": "0",
                      "LAKEMOUNT_STAGING_BACKEND": "lsm", "LAKEMOUNT_STAGING_INLINE_BYTES": "0"}))
    cat = a.catalog
    cat.create_repository(REPO)
    real = cat.adapter.put
    data_put, release = threading.Event(), threading.Event()
    order: list[str] = []

    def put(url: str, data: bytes) -> None:
        if is_data_key(url.rsplit(f"/{REPO}/", 1)[-1]):
            data_put.set()
            release.wait(30)
            if data.startswith(b"fail"):
                raise Unavailable("the object store is unreachable")
        order.append("data" if "/_lakefs/staging/" not in url else "staging")
        real(url, data)

    cat.adapter.put = put  # type: ignore[method-assign]

    def upload(body: bytes, path: str) -> None:
        with cat.writer(REPO, defer=True) as w:
            w.write(body)
        info = w.info  # known before the bytes are stored
        entry = Entry(info.address, info.size, info.etag)
        cat.stage_upload(REPO, "main", path, entry, ready=w.stored)

    t = threading.Thread(target=upload, args=(b"small body", "x.txt"))
    t.start()
    assert data_put.wait(10)
    deadline = time.monotonic() + 10
    while "staging" not in order and time.monotonic() < deadline:
        time.sleep(0.01)
    assert order == ["staging"]  # the staging file went while the data PUT was under way
    assert cat.get_optional(REPO, "main", "x.txt") is None  # not visible before its data
    release.set()
    t.join(30)
    assert order == ["staging", "data"]
    got = cat.get_optional(REPO, "main", "x.txt")
    assert got is not None and got.size == len(b"small body")

    with pytest.raises(Unavailable):
        upload(b"fail this one", "y.txt")
    assert cat.get_optional(REPO, "main", "y.txt") is None


@pytest.mark.parametrize("size", [10, 64 * 1024, 64 * 1024 + 1])
def test_a_small_body_on_a_request_priced_store_is_one_put_whether_or_not_it_is_there(
    app: App, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int,
) -> None:
    """Issue 26 (a lone writer's cp -r): each file was a COPY (the refresh of an existing copy,
    failing for a new one) and then its PUT; on S3 a small body is PUT without asking, which refreshes
    an existing copy as well.  A bigger one still asks first (its PUT moves its bytes).  The local
    store here stands in for S3 (its scheme listed as S3's is)."""
    import lakemount.catalog.writer as writer

    assert writer.PUT_UNASKED_SCHEMES == ("s3://",)
    monkeypatch.setattr(writer, "PUT_UNASKED_SCHEMES", ("local://",))
    cat = app.catalog
    calls: list[str] = []
    adapter = cat.adapter
    for name in ("touch", "put", "put_file"):
        real = getattr(adapter, name)
        monkeypatch.setattr(adapter, name, lambda *a, _n=name, _r=real, **k: (calls.append(_n), _r(*a, **k))[1])
    src = tmp_path / "body"
    body = os.urandom(size)
    src.write_bytes(body)
    for _ in range(2):  # new, then there already
        with cat.writer(REPO) as w:
            w.write_file(str(src))
        assert read(app, w.info.address) == body
    if size <= writer.PUT_UNASKED_MAX:
        assert calls == ["put_file", "put_file"]
    else:
        assert calls == ["touch", "put_file", "touch"]
    calls.clear()
    path = namespace(app) / w.info.address
    os.utime(path, (1000, 1000))
    with cat.writer(REPO) as w:
        w.write(body)
    assert path.stat().st_mtime > time.time() - 60, "the existing object is refreshed against a running GC"
    assert calls == (["put"] if size <= writer.PUT_UNASKED_MAX else ["touch"])


def test_a_lazy_write_is_synced_by_the_next_commit_before_the_commit_is_made(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lazy write (the mount's small close) reaches its object unsynced; a commit syncs the namespace's
    filesystem before it names the object, and a plain write syncs its own object as before."""
    from lakemount.block import local

    monkeypatch.setattr(local, "_lazy", local._LazySync())
    monkeypatch.setattr(local, "SYNC_AFTER", 60.0)
    events: list[str] = []
    real_syncfs, real_fsync, real_commit = local._syncfs, os.fsync, app.catalog.graveler.commit
    assert real_syncfs is not None

    def syncfs(directory: str) -> None:
        events.append("syncfs")
        real_syncfs(directory)

    def fsync(fd: int) -> None:
        events.append("fsync")
        real_fsync(fd)

    def commit(*args: object, **kw: object) -> object:
        events.append("commit")
        return real_commit(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(local, "_syncfs", syncfs)
    monkeypatch.setattr(local.os, "fsync", fsync)
    monkeypatch.setattr(app.catalog.graveler, "commit", commit)
    with app.catalog.writer(REPO, lazy=True) as w:
        w.write(b"small and lazy")
    assert read(app, w.info.address) == b"small and lazy"
    assert events == [], "no sync of any kind on the write's path"
    app.catalog.put_entry(REPO, "main", "f", Entry(w.info.address, w.info.size, w.info.etag))
    app.catalog.commit(REPO, "main", "with a lazy object")
    assert events[:2] == ["syncfs", "commit"]
    events.clear()
    with app.catalog.writer(REPO) as w2:
        w2.write(b"plain")
    assert "fsync" in events and "syncfs" not in events
