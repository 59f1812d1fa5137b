"""The filesystem core without a kernel: layout, POSIX semantics on branches, read-only refs, caching."""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa

from lakemount.app import App
from lakemount.fuse import namespace
from lakemount.fuse.core import Caller, FileSystem, NeedsThread, SetAttr
from lakemount.fuse.inodes import ROOT_INODE
from lakemount.graveler.moves import Move, move_of
from tests.fuse.conftest import REPO
from tests.fuse.pathfs import PathFS

MAIN = f"/{REPO}/main"


def staged(app: App, path: str, ref: str = "main"):
    return app.catalog.get_optional(REPO, ref, path)


@contextmanager
def statements(app: App) -> Iterator[list[str]]:
    """The SQL statements the ref store's database runs meanwhile, from every thread (hot path and SQLAlchemy).

    Every thread's: a statement a background thread of the mount runs (a scan-ahead listing) is counted where
    it runs, not missed, and one the request then did not run is not missing (stop 51's flake).  The hot path's
    connections are per thread, so each is traced as it is handed out; ``settle`` a mount first so that work
    an earlier request started does not land in the window.
    """
    seen: list[str] = []
    fast = app.metastore._fast
    engine = app.metastore.engine
    connection = fast.connection
    traced: list[Any] = []

    def traced_connection() -> Any:
        conn = connection()
        if not any(c is conn for c in traced):
            conn.set_trace_callback(seen.append)
            traced.append(conn)
        return conn

    def on_execute(_conn: object, _cursor: object, text: str, *_args: object) -> None:
        seen.append(text)

    fast.connection = traced_connection  # type: ignore[method-assign]
    traced_connection()
    sa.event.listen(engine, "before_cursor_execute", on_execute)
    try:
        yield seen
    finally:
        del fast.connection
        for conn in traced:
            conn.set_trace_callback(None)
        sa.event.remove(engine, "before_cursor_execute", on_execute)


def settle(fs: FileSystem) -> None:
    """Wait for the background listings earlier opens queued for scan-ahead (``lakemount.fuse.scan``), whose
    statements would otherwise run whenever the loaded machine gets to them: inside a later window of
    ``statements`` (stop 51: one read of a branch row on the scan thread stood in for the request's own)."""
    pool = fs.scan._pool
    if pool is not None:
        pool.submit(lambda: None).result()  # one worker, first in first out: everything queued before ran


def errno_of_call(fn: Callable[[], object]) -> int:
    with pytest.raises(OSError) as info:
        fn()
    assert info.value.errno is not None
    return info.value.errno


# ---------------------------------------------------------------------------- layout
def test_root_lists_repositories_and_stats(pfs: PathFS, app: App) -> None:
    app.catalog.create_repository("other")
    assert pfs.listdir("/") == [".lakefs", "other", REPO]
    assert pfs.listdir("/.lakefs") == ["stats"]
    assert stat.S_ISDIR(pfs.lstat("/repo").mode)


def test_repo_lists_branches_and_tags(pfs: PathFS, app: App) -> None:
    app.catalog.put(REPO, "main", "a", b"1")
    app.graveler.commit(REPO, "main", "c1")
    app.graveler.create_branch(REPO, "dev", "main")
    app.graveler.create_tag(REPO, "v1", "main")
    assert pfs.listdir("/repo") == ["dev", "main", "v1"]


def test_unknown_repo_and_ref_are_enoent(pfs: PathFS) -> None:
    assert errno_of_call(lambda: pfs.lstat("/nope")) == errno.ENOENT
    assert errno_of_call(lambda: pfs.lstat("/repo/nope")) == errno.ENOENT
    assert errno_of_call(lambda: pfs.lstat("/repo/.git")) == errno.ENOENT
    assert errno_of_call(lambda: pfs.lstat("/repo/main~5")) == errno.ENOENT


def test_ref_expressions_resolve_on_lookup(pfs: PathFS, app: App) -> None:
    app.catalog.put(REPO, "main", "f", b"one")
    c1 = app.graveler.commit(REPO, "main", "c1").commit.id
    app.catalog.put(REPO, "main", "f", b"two")
    app.graveler.commit(REPO, "main", "c2")
    app.catalog.put(REPO, "main", "f", b"three")  # staged only
    app.graveler.create_tag(REPO, "v1", c1)
    assert pfs.read_file(f"{MAIN}/f") == b"three"
    assert pfs.read_file("/repo/main@/f") == b"two"
    assert pfs.read_file("/repo/main~1/f") == b"one"
    assert pfs.read_file(f"/repo/{c1}/f") == b"one"
    assert pfs.read_file(f"/repo/{c1[:10]}/f") == b"one"
    assert pfs.read_file("/repo/v1/f") == b"one"
    assert pfs.read_file("/repo/main$/f") == b"three"


@pytest.mark.parametrize("ref", ["main@", "main~1", "v1", "COMMIT"])
def test_read_only_refs_refuse_writes_with_erofs(pfs: PathFS, app: App, ref: str) -> None:
    app.catalog.put(REPO, "main", "d/f", b"x")
    cid = app.graveler.commit(REPO, "main", "c1").commit.id
    app.catalog.put(REPO, "main", "g", b"y")
    app.graveler.commit(REPO, "main", "c2")
    app.graveler.create_tag(REPO, "v1", "main~1")
    ref = cid if ref == "COMMIT" else ref
    root = f"/repo/{ref}"
    assert pfs.read_file(f"{root}/d/f") == b"x"
    assert errno_of_call(lambda: pfs.write_file(f"{root}/new", b"1")) == errno.EROFS
    assert errno_of_call(lambda: pfs.open(f"{root}/d/f", os.O_WRONLY)) == errno.EROFS
    assert errno_of_call(lambda: pfs.mkdir(f"{root}/dd")) == errno.EROFS
    assert errno_of_call(lambda: pfs.unlink(f"{root}/d/f")) == errno.EROFS
    assert errno_of_call(lambda: pfs.rename(f"{root}/d/f", f"{root}/d/g")) == errno.EROFS
    assert errno_of_call(lambda: pfs.chmod(f"{root}/d/f", 0o600)) == errno.EROFS
    assert errno_of_call(lambda: pfs.setxattr(f"{root}/d/f", "user.k", b"v")) == errno.EROFS
    assert errno_of_call(lambda: pfs.symlink("x", f"{root}/l")) == errno.EROFS
    assert pfs.listdir(f"{root}/.lakefs") == ["head", "log"]
    assert pfs.read_file(f"{root}/.lakefs/head").strip() == app.graveler.resolve(REPO, ref).commit_id.encode()


def test_single_ref_mode_mounts_one_branch_as_root(fs_factory: Callable[..., FileSystem], app: App) -> None:
    app.catalog.put(REPO, "main", "a/b", b"x")
    pfs = PathFS(fs_factory(ref=(REPO, "main")))
    assert pfs.listdir("/") == [".lakefs", "a"]
    assert "stats" in pfs.listdir("/.lakefs") and "commit" in pfs.listdir("/.lakefs")
    pfs.write_file("/c", b"y")
    assert staged(app, "c") is not None
    assert pfs.read_file("/.lakefs/stats").startswith(b"# HELP")


def test_single_ref_mode_on_a_tag_is_read_only(fs_factory: Callable[..., FileSystem], app: App) -> None:
    app.catalog.put(REPO, "main", "a", b"x")
    app.graveler.commit(REPO, "main", "c1")
    app.graveler.create_tag(REPO, "v1", "main")
    pfs = PathFS(fs_factory(ref=(REPO, "v1")))
    assert pfs.read_file("/a") == b"x"
    assert errno_of_call(lambda: pfs.write_file("/b", b"y")) == errno.EROFS


def test_layout_levels_refuse_changes(pfs: PathFS) -> None:
    assert errno_of_call(lambda: pfs.mkdir("/newrepo")) == errno.EPERM
    assert errno_of_call(lambda: pfs.mkdir("/repo/newbranch")) == errno.EPERM
    assert errno_of_call(lambda: pfs.write_file(f"{MAIN}/.lakefs/x", b"")) == errno.EPERM
    assert errno_of_call(lambda: pfs.mkdir(f"{MAIN}/.lakefs")) == errno.EEXIST


# ---------------------------------------------------------------------------- files
def test_write_read_and_content_is_staged_on_close(pfs: PathFS, app: App) -> None:
    fh = pfs.open(f"{MAIN}/a.txt", os.O_WRONLY | os.O_CREAT, 0o640)
    pfs.pwrite(fh, 0, b"hello ")
    pfs.pwrite(fh, 6, b"world")
    # The create waits for the file's first close (fuse/held.py): this mount shows the file, the branch not yet.
    assert staged(app, "a.txt") is None
    assert "a.txt" in pfs.listdir(MAIN) and pfs.lstat(f"{MAIN}/a.txt").size == 11
    assert pfs.read_file(f"{MAIN}/a.txt") == b"hello world"  # read-your-writes before close
    pfs.close(fh)
    entry = staged(app, "a.txt")
    assert entry is not None and entry.size == 11 and stat.S_IMODE(entry.mode) == 0o640
    assert app.catalog.read(app.catalog.repository(REPO), entry) == b"hello world"
    assert entry.content_type == "text/plain"


def test_a_new_files_content_type_is_guess_types_asked_once_per_extension(
    pfs: PathFS, app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mimetypes

    names = ["f00001", "b.txt", "x.tar.gz", ".bashrc", "..x.csv", "e.TXT", "b.c.d.json", "q.", "dir.d/file", "y.tgz",
             "z.txt.bz2", "w.JPG", "...", "README", "a:b/c.txt", "data:text/plain,x", "d/.hidden.txt", "p.parquet"]
    for name in names:  # the same answer as guess_type's, whatever the name
        assert namespace.content_type(name) == (mimetypes.guess_type(name)[0] or ""), name
    asked: list[str] = []
    real = mimetypes.guess_type

    def guess_type(url: str, strict: bool = True) -> tuple[str | None, str | None]:
        asked.append(url)
        return real(url, strict)

    monkeypatch.setattr(mimetypes, "guess_type", guess_type)
    namespace._content_types.clear()
    for i in range(20):
        pfs.write_file(f"{MAIN}/f{i}.csv", b"x")
        pfs.write_file(f"{MAIN}/g{i}", b"x")
    assert len(asked) == 2  # one per extension ("" for none), not one per create
    assert staged(app, "f3.csv").content_type == "text/csv" and staged(app, "g3").content_type == ""


def test_holding_a_lock_held_elsewhere_needs_a_thread_on_the_loop(fs: FileSystem) -> None:
    import threading

    lock = threading.Lock()
    with fs.state.holding(lock):  # free: taken, and given back
        assert lock.locked()
    assert not lock.locked()
    lock.acquire()
    try:
        with fs.nonblocking(), pytest.raises(NeedsThread), fs.state.holding(lock):
            pass
    finally:
        lock.release()
    with fs.nonblocking(), fs.state.holding(lock):
        assert lock.locked()
    assert not lock.locked()


def test_fsync_stages_content_of_an_open_file(pfs: PathFS, app: App) -> None:
    with pfs.opened(f"{MAIN}/f", os.O_WRONLY | os.O_CREAT) as fh:
        pfs.pwrite(fh, 0, b"durable")
        pfs.fsync(fh)
        e = staged(app, "f")
        assert e is not None and e.size == 7


def test_random_writes_sparse_extension_and_append(pfs: PathFS) -> None:
    p = f"{MAIN}/r"
    pfs.write_file(p, b"0123456789")
    pfs.write_at(p, 3, b"abc")
    assert pfs.read_file(p) == b"012abc6789"
    pfs.write_at(p, 12, b"Z")
    assert pfs.read_file(p) == b"012abc6789\0\0Z"
    pfs.append(p, b"++")
    assert pfs.read_file(p) == b"012abc6789\0\0Z++"
    assert pfs.lstat(p).size == 15


def test_a_saved_file_counts_its_object_before_the_release_arrives(pfs: PathFS) -> None:
    # close(2) waits for FLUSH (the save) but not for RELEASE: a stat between them must see the saved object.
    p = f"{MAIN}/holes"
    fh = pfs.open(p, os.O_CREAT | os.O_RDWR)
    pfs.fs.setattr(pfs.ino(p), SetAttr(size=8 << 20), fh, pfs.caller)
    pfs.pwrite(fh, 4 << 20, b"x" * 4096)
    open_attr = pfs.lstat(p)
    assert open_attr.blocks * 512 < 1 << 20 and open_attr.timeout == 0.0, open_attr  # sparse, and not cacheable
    pfs.fs.flush(fh)  # saved; the release has not come yet
    try:
        saved = pfs.lstat(p)
        assert saved.size == 8 << 20 and saved.blocks * 512 == 8 << 20, saved
        assert saved.timeout > 0  # the saved object's attributes may be cached again
    finally:
        pfs.fs.release(fh)


def test_copy_on_first_write_keeps_the_rest_of_a_large_file(pfs: PathFS, app: App) -> None:
    data = os.urandom(3 << 20)
    app.catalog.put(REPO, "main", "big", data)
    pfs.write_at(f"{MAIN}/big", 2 << 20, b"XY")
    expected = data[: 2 << 20] + b"XY" + data[(2 << 20) + 2 :]
    assert pfs.read_file(f"{MAIN}/big") == expected
    e = staged(app, "big")
    assert e is not None and app.catalog.read(app.catalog.repository(REPO), e) == expected


def test_truncate_with_and_without_open_writers(pfs: PathFS, app: App) -> None:
    p = f"{MAIN}/t"
    pfs.write_file(p, b"abcdef")
    pfs.truncate(p, 3)  # truncate(2): no writer, staged at once
    e = staged(app, "t")
    assert e is not None and e.size == 3
    assert pfs.read_file(p) == b"abc"
    pfs.truncate(p, 5)
    assert pfs.read_file(p) == b"abc\0\0"
    with pfs.opened(p, os.O_WRONLY | os.O_TRUNC) as fh:
        assert pfs.lstat(p).size == 0
        pfs.pwrite(fh, 0, b"new")
    assert pfs.read_file(p) == b"new"
    assert staged(app, "t").size == 3


def test_open_with_o_trunc_moves_mtime_and_ctime(pfs: PathFS, app: App) -> None:
    p = f"{MAIN}/t"
    pfs.write_file(p, b"abcde")
    pfs.setattr(p, SetAttr(mtime_ns=10**18))
    before = pfs.lstat(p)
    pfs.close(pfs.open(p, os.O_WRONLY | os.O_TRUNC))
    after = pfs.lstat(p)
    assert after.size == 0 and after.mtime_ns > before.mtime_ns and after.ctime_ns > before.ctime_ns
    assert staged(app, "t").mtime_ns == after.mtime_ns  # the staged entry has it too


def test_open_with_o_trunc_of_an_empty_file_stages_its_new_mtime(pfs: PathFS, app: App) -> None:
    """An empty file's ``O_TRUNC`` open moves its mtime (POSIX) and its close stages it, as for a file with content:
    the staged entry kept the old mtime while ``stat`` showed the new one (found by
    tests/fuse/test_large_file_model.py)."""
    p = f"{MAIN}/e"
    pfs.write_file(p, b"")
    pfs.setattr(p, SetAttr(mtime_ns=10**18))
    pfs.close(pfs.open(p, os.O_WRONLY | os.O_TRUNC))
    after = pfs.lstat(p)
    assert after.size == 0 and after.mtime_ns > 10**18
    assert staged(app, "e").mtime_ns == after.mtime_ns


def test_same_content_is_stored_once(pfs: PathFS, app: App) -> None:
    pfs.write_file(f"{MAIN}/a", b"same bytes")
    pfs.write_file(f"{MAIN}/b", b"same bytes")
    assert staged(app, "a").address == staged(app, "b").address


def test_create_exclusive_and_open_existing(pfs: PathFS) -> None:
    pfs.write_file(f"{MAIN}/x", b"1")
    assert errno_of_call(lambda: pfs.open(f"{MAIN}/x", os.O_WRONLY | os.O_CREAT | os.O_EXCL)) == errno.EEXIST
    fh = pfs.open(f"{MAIN}/x", os.O_RDONLY | os.O_CREAT)
    assert pfs.pread(fh, 0, 10) == b"1"
    pfs.close(fh)


def test_unlinked_open_file_stays_readable_and_is_not_resurrected(pfs: PathFS, app: App) -> None:
    pfs.write_file(f"{MAIN}/u", b"data")
    fh = pfs.open(f"{MAIN}/u", os.O_RDWR)
    ino = pfs.ino(f"{MAIN}/u")
    assert pfs.fs.getattr(ino).nlink == 1
    pfs.unlink(f"{MAIN}/u")
    assert pfs.fs.getattr(ino).nlink == 0  # fstat of the open handle: no names left
    assert pfs.pread(fh, 0, 10) == b"data"
    pfs.pwrite(fh, 0, b"DATA")
    assert pfs.pread(fh, 0, 10) == b"DATA"
    pfs.close(fh)
    assert staged(app, "u") is None
    assert not pfs.exists(f"{MAIN}/u")


def test_mknod_fifos_sockets_and_device_nodes(pfs: PathFS, fs: FileSystem, app: App, fs_factory: Callable[..., FileSystem]) -> None:
    main = pfs.ino(MAIN)
    attr = fs.mknod(main, b"fifo", stat.S_IFIFO | 0o600, 0, Caller())
    assert stat.S_ISFIFO(attr.mode)
    assert stat.S_ISFIFO(pfs.lstat(f"{MAIN}/fifo").mode)
    # device nodes (pjdfstest makes them everywhere) keep their type and number in the entry
    attr = fs.mknod(main, b"chr", stat.S_IFCHR | 0o640, os.makedev(1, 2), Caller())
    assert stat.S_ISCHR(attr.mode) and attr.rdev == os.makedev(1, 2)
    fs.mknod(main, b"blk", stat.S_IFBLK | 0o600, os.makedev(3, 4), Caller())
    pfs.setattr(f"{MAIN}/blk", SetAttr(mode=0o1640))
    blk = pfs.lstat(f"{MAIN}/blk")
    assert stat.S_ISBLK(blk.mode) and stat.S_IMODE(blk.mode) == 0o1640 and blk.rdev == os.makedev(3, 4)
    entry = staged(app, "chr")
    assert entry is not None and stat.S_ISCHR(entry.mode) and entry.target == str(os.makedev(1, 2))
    again = PathFS(fs_factory()).lstat(f"{MAIN}/chr")
    assert stat.S_ISCHR(again.mode) and again.rdev == os.makedev(1, 2)
    with pytest.raises(OSError) as info:
        fs.mknod(main, b"dir", stat.S_IFDIR | 0o700, 0, Caller())
    assert info.value.errno == errno.EINVAL


# ---------------------------------------------------------------------------- directories
def test_empty_directories_persist_as_markers(pfs: PathFS, app: App, fs_factory: Callable[..., FileSystem]) -> None:
    pfs.mkdir(f"{MAIN}/empty", 0o750)
    marker = staged(app, "empty/")
    assert marker is not None and marker.is_dir and stat.S_IMODE(marker.mode) == 0o750
    fresh = PathFS(fs_factory())
    assert fresh.listdir(MAIN) == [".lakefs", "empty"]
    assert stat.S_IMODE(fresh.lstat(f"{MAIN}/empty").mode) == 0o750
    app.graveler.commit(REPO, "main", "with an empty dir")
    assert fresh.listdir("/repo/main@/empty") == []


def test_rmdir_rules(pfs: PathFS) -> None:
    pfs.mkdir(f"{MAIN}/d")
    pfs.write_file(f"{MAIN}/d/f", b"")
    assert errno_of_call(lambda: pfs.rmdir(f"{MAIN}/d")) == errno.ENOTEMPTY
    assert errno_of_call(lambda: pfs.rmdir(f"{MAIN}/d/f")) == errno.ENOTDIR
    assert errno_of_call(lambda: pfs.unlink(f"{MAIN}/d")) == errno.EISDIR
    assert errno_of_call(lambda: pfs.mkdir(f"{MAIN}/d")) == errno.EEXIST
    pfs.unlink(f"{MAIN}/d/f")
    pfs.rmdir(f"{MAIN}/d")
    assert not pfs.exists(f"{MAIN}/d")
    assert errno_of_call(lambda: pfs.rmdir(f"{MAIN}/d")) == errno.ENOENT


def test_implicit_directory_survives_removing_its_last_file(pfs: PathFS, app: App) -> None:
    app.catalog.put(REPO, "main", "imp/only", b"x")  # written by another front end: no marker
    pfs.unlink(f"{MAIN}/imp/only")
    assert pfs.listdir(f"{MAIN}/imp") == []
    assert staged(app, "imp/") is not None


def test_directory_shadows_a_file_of_the_same_name(pfs: PathFS, app: App) -> None:
    app.catalog.put(REPO, "main", "x", b"file")
    app.catalog.put(REPO, "main", "x/y", b"inner")
    assert pfs.listdir(MAIN) == [".lakefs", "x"]
    assert stat.S_ISDIR(pfs.lstat(f"{MAIN}/x").mode)


def test_large_directory_listing_pages(pfs: PathFS, app: App) -> None:
    for i in range(300):
        app.catalog.put(REPO, "main", f"many/f{i:04d}", b"")
    for i in range(40):
        app.catalog.put(REPO, "main", f"many/sub{i:02d}/inner/deep", b"")
    names = pfs.listdir(f"{MAIN}/many")
    assert names == [f"f{i:04d}" for i in range(300)] + [f"sub{i:02d}" for i in range(40)]


def test_names_too_long(pfs: PathFS) -> None:
    long = "x" * 256
    assert errno_of_call(lambda: pfs.lstat(f"{MAIN}/{long}")) == errno.ENAMETOOLONG
    assert errno_of_call(lambda: pfs.write_file(f"{MAIN}/{long}", b"")) == errno.ENAMETOOLONG
    assert errno_of_call(lambda: pfs.mkdir(f"{MAIN}/{long}")) == errno.ENAMETOOLONG
    pfs.write_file(f"{MAIN}/{'y' * 255}", b"ok")


# ---------------------------------------------------------------------------- rename
def test_rename_file_moves_the_entry_without_copying(pfs: PathFS, app: App) -> None:
    pfs.write_file(f"{MAIN}/a", b"content")
    before = staged(app, "a")
    pfs.rename(f"{MAIN}/a", f"{MAIN}/b")
    after = staged(app, "b")
    assert staged(app, "a") is None and after is not None
    assert after.address == before.address and after.etag == before.etag
    assert pfs.read_file(f"{MAIN}/b") == b"content"


def test_rename_directory_is_one_transaction(pfs: PathFS, app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(namespace, "PER_KEY_RENAME", 0)  # every directory a move record (this one is small)
    for p in ("d/a", "d/sub/b", "d/sub/deeper/c"):
        app.catalog.put(REPO, "main", p, p.encode())
    pfs.mkdir(f"{MAIN}/d/empty")
    addresses = {p: staged(app, p).address for p in ("d/a", "d/sub/b", "d/sub/deeper/c")}
    calls: list[int] = []
    moves: list[tuple[str, str]] = []
    real_apply, real_move = app.catalog.apply, app.catalog.move_directory

    def counting_apply(repo: str, ref: object, changes: list) -> None:  # type: ignore[type-arg]
        calls.append(len(changes))
        real_apply(repo, ref, changes)  # type: ignore[arg-type]

    def counting_move(repo: str, ref: object, old: str, new: str) -> bool:
        moves.append((old, new))
        return real_move(repo, ref, old, new)  # type: ignore[arg-type]

    monkeypatch.setattr(app.catalog, "apply", counting_apply)
    monkeypatch.setattr(app.catalog, "move_directory", counting_move)
    pfs.rename(f"{MAIN}/d", f"{MAIN}/e")
    # One move record, whatever the directory holds; nothing staged per key (issue 40).
    assert (calls, moves) == ([], [("d", "e")])
    assert staged(app, "e/empty/") is not None
    for p, addr in addresses.items():
        assert staged(app, p) is None
        assert staged(app, "e" + p[1:]).address == addr
    assert pfs.listdir(f"{MAIN}/e") == ["a", "empty", "sub"]
    assert pfs.read_file(f"{MAIN}/e/sub/deeper/c") == b"d/sub/deeper/c"
    assert not pfs.exists(f"{MAIN}/d")


def test_a_small_directory_is_renamed_per_key_and_a_large_one_by_a_move_record(
    pfs: PathFS, app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A Spark job's committer renames one small directory per task (issue 36): as move records, each pending
    # until the commit, every later read of the branch walked one layer more.  Per key they cost reads nothing.
    monkeypatch.setattr(namespace, "PER_KEY_RENAME", 4)
    pending = lambda: [t for t in app.catalog.graveler.get_branch(REPO, "main").tokens if move_of(t)]  # noqa: E731
    for d in ("_temporary", "_temporary/attempt", "_temporary/attempt/p=1", "big"):
        pfs.mkdir(f"{MAIN}/{d}")
    for i in range(4):
        pfs.write_file(f"{MAIN}/_temporary/attempt/p=1/f{i}", f"small {i}".encode())
    before = staged(app, "_temporary/attempt/p=1/f0").address
    pfs.rename(f"{MAIN}/_temporary/attempt", f"{MAIN}/_temporary/task")
    assert pending() == []
    assert staged(app, "_temporary/task/p=1/f0").address == before  # metadata only: the same object, a new key
    assert sorted(pfs.listdir(f"{MAIN}/_temporary/task/p=1")) == [f"f{i}" for i in range(4)]
    assert staged(app, "_temporary/attempt/p=1/f0") is None and staged(app, "_temporary/task/p=1/f0") is not None
    pfs.rename(f"{MAIN}/_temporary/task/p=1", f"{MAIN}/p=1")  # the job's commit: out of _temporary
    assert pending() == [] and pfs.read_file(f"{MAIN}/p=1/f3") == b"small 3"
    assert pfs.listdir(f"{MAIN}/_temporary/task") == []
    for i in range(5):  # one key past the bound: a move record
        pfs.write_file(f"{MAIN}/big/f{i}", b"x")
    pfs.rename(f"{MAIN}/big", f"{MAIN}/moved")
    assert pending() == [Move(b"big/", b"moved/").token]
    assert sorted(pfs.listdir(f"{MAIN}/moved")) == [f"f{i}" for i in range(5)] and not pfs.exists(f"{MAIN}/big")


def test_directory_link_counts_follow_mkdir_rename_and_rmdir(pfs: PathFS, app: App) -> None:
    # pjdfstest rename/24: 2 plus one per subdirectory, kept by this mount's own changes.
    pfs.mkdir(f"{MAIN}/src")
    pfs.mkdir(f"{MAIN}/dst")
    pfs.mkdir(f"{MAIN}/src/d")
    pfs.write_file(f"{MAIN}/src/f", b"x")
    assert (pfs.lstat(f"{MAIN}/src").nlink, pfs.lstat(f"{MAIN}/dst").nlink) == (3, 2)
    pfs.rename(f"{MAIN}/src/d", f"{MAIN}/dst/e")
    assert (pfs.lstat(f"{MAIN}/src").nlink, pfs.lstat(f"{MAIN}/dst").nlink) == (2, 3)
    pfs.rename(f"{MAIN}/src/f", f"{MAIN}/dst/f")  # files do not count
    assert pfs.lstat(f"{MAIN}/dst").nlink == 3
    pfs.rmdir(f"{MAIN}/dst/e")
    assert pfs.lstat(f"{MAIN}/dst").nlink == 2
    # A directory that came from the store is counted once it has been listed.
    for p in ("t/a/x", "t/b/y", "t/c"):
        app.catalog.put(REPO, "main", p, b"1")
    pfs.listdir(f"{MAIN}/t")
    assert pfs.lstat(f"{MAIN}/t").nlink == 4
    pfs.listdir(MAIN)
    root_dirs = 1 + sum(1 for n in ("src", "dst", "t") if pfs.exists(f"{MAIN}/{n}"))  # and .lakefs
    assert pfs.lstat(MAIN).nlink == 2 + root_dirs


def test_rename_keeps_inodes_of_the_moved_tree(pfs: PathFS) -> None:
    pfs.mkdir(f"{MAIN}/d")
    pfs.write_file(f"{MAIN}/d/f", b"x")
    ino = pfs.ino(f"{MAIN}/d/f")
    pfs.rename(f"{MAIN}/d", f"{MAIN}/e")
    assert pfs.ino(f"{MAIN}/e/f") == ino


def test_a_directory_rename_is_not_taken_for_a_change_made_elsewhere(
    pfs: PathFS, fs: FileSystem, app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(namespace, "PER_KEY_RENAME", 0)  # every directory a move record (this one is small)
    # A move record swaps the branch row's tokens.  The mount takes the new row as its own, checked
    # as of the swap: neither its head check nor a read that began before the swap (and returns the
    # row before it) may count as a change elsewhere, which drops every cached inode (pjdfstest
    # rename/09 and 10 saw inode numbers change).
    pfs.mkdir(f"{MAIN}/d")
    pfs.write_file(f"{MAIN}/d/f", b"x")
    pfs.write_file(f"{MAIN}/g", b"y")
    inodes = (pfs.ino(f"{MAIN}/d/f"), pfs.ino(f"{MAIN}/g"))
    real_move = app.catalog.move_directory
    began: list[float] = []

    def move(repo: str, ref: object, old: str, new: str) -> object:
        began.append(time.monotonic())
        return real_move(repo, ref, old, new)  # type: ignore[arg-type]

    monkeypatch.setattr(app.catalog, "move_directory", move)
    before = app.catalog.get_branch(REPO, "main")
    changes = fs.state.metrics.counter("scope_changes")
    pfs.rename(f"{MAIN}/d", f"{MAIN}/e")
    assert began and app.catalog.get_branch(REPO, "main").sealed_tokens[1:] == before.tokens  # the move's row
    # What a read that began between the rename's start and its swap left behind: the row before.
    monkeypatch.setattr(app.catalog, "branch_seen", lambda repo, name: (before, began[0] + 1e-6))
    for _ in range(3):
        assert (pfs.ino(f"{MAIN}/e/f"), pfs.ino(f"{MAIN}/g")) == inodes
        time.sleep(0.25)  # past the head TTL (0.2 s): the head check reads the row after the move
    assert fs.state.metrics.counter("scope_changes") == changes


def test_rename_does_not_revive_unlinked_entries(pfs: PathFS, app: App) -> None:
    # Found by the model test: an unlinked file the kernel still knows must not
    # reappear under the new name when its old directory is renamed.
    pfs.mkdir(f"{MAIN}/b")
    pfs.write_file(f"{MAIN}/b/a", b"old")
    pfs.unlink(f"{MAIN}/b/a")
    pfs.rename(f"{MAIN}/b", f"{MAIN}/c")
    assert not pfs.exists(f"{MAIN}/c/a")
    pfs.write_file(f"{MAIN}/c/a", b"new")
    assert pfs.read_file(f"{MAIN}/c/a") == b"new"
    assert staged(app, "c/a").size == 3


def test_rename_rules(pfs: PathFS, app: App) -> None:
    app.catalog.create_repository("other")
    app.graveler.create_branch(REPO, "dev", "main")
    pfs.write_file(f"{MAIN}/f", b"1")
    pfs.write_file(f"{MAIN}/g", b"2")
    pfs.mkdir(f"{MAIN}/d")
    pfs.mkdir(f"{MAIN}/full")
    pfs.write_file(f"{MAIN}/full/x", b"")
    assert errno_of_call(lambda: pfs.rename(f"{MAIN}/f", f"{MAIN}/d")) == errno.EISDIR
    assert errno_of_call(lambda: pfs.rename(f"{MAIN}/d", f"{MAIN}/f")) == errno.ENOTDIR
    assert errno_of_call(lambda: pfs.rename(f"{MAIN}/d", f"{MAIN}/full")) == errno.ENOTEMPTY
    assert errno_of_call(lambda: pfs.rename(f"{MAIN}/d", f"{MAIN}/d/inside")) == errno.EINVAL
    assert errno_of_call(lambda: pfs.rename(f"{MAIN}/full/x", f"{MAIN}/full")) == errno.ENOTEMPTY
    assert errno_of_call(lambda: pfs.rename(f"{MAIN}/f", f"{MAIN}/g", 1)) == errno.EEXIST
    assert errno_of_call(lambda: pfs.rename(f"{MAIN}/f", "/repo/dev/f")) == errno.EXDEV
    assert errno_of_call(lambda: pfs.rename(f"{MAIN}/f", "/other/main/f")) == errno.EXDEV
    assert errno_of_call(lambda: pfs.rename(f"{MAIN}/nope", f"{MAIN}/x")) == errno.ENOENT
    pfs.rename(f"{MAIN}/f", f"{MAIN}/g")  # replaces
    assert pfs.read_file(f"{MAIN}/g") == b"1"
    pfs.rename(f"{MAIN}/full", f"{MAIN}/d")  # onto an empty directory
    assert pfs.listdir(f"{MAIN}/d") == ["x"]


def test_rename_of_a_file_open_for_writing_saves_under_the_new_name(pfs: PathFS, app: App) -> None:
    fh = pfs.open(f"{MAIN}/w", os.O_WRONLY | os.O_CREAT)
    pfs.pwrite(fh, 0, b"late")
    pfs.rename(f"{MAIN}/w", f"{MAIN}/moved")
    pfs.close(fh)
    assert staged(app, "w") is None
    assert staged(app, "moved").size == 4


def test_a_file_open_for_writing_in_a_renamed_directory_saves_under_the_new_name(pfs: PathFS, app: App) -> None:
    # The directory's rename is a move record: the open file is saved after it, under its new name only.
    app.catalog.put(REPO, "main", "d/old", b"committed")
    app.catalog.commit(REPO, "main", "d")
    fh = pfs.open(f"{MAIN}/d/w", os.O_WRONLY | os.O_CREAT)
    pfs.pwrite(fh, 0, b"late")
    pfs.rename(f"{MAIN}/d", f"{MAIN}/e")
    pfs.close(fh)
    assert staged(app, "d/w") is None and staged(app, "d/old") is None
    assert staged(app, "e/w").size == 4 and pfs.read_file(f"{MAIN}/e/old") == b"committed"
    assert pfs.listdir(f"{MAIN}/e") == ["old", "w"] and not pfs.exists(f"{MAIN}/d")


# ---------------------------------------------------------------------------- metadata
def test_symlinks(pfs: PathFS, app: App) -> None:
    pfs.symlink("../target/file", f"{MAIN}/link")
    a = pfs.lstat(f"{MAIN}/link")
    assert stat.S_ISLNK(a.mode) and a.size == len("../target/file")
    assert pfs.readlink(f"{MAIN}/link") == "../target/file"
    assert staged(app, "link").target == "../target/file"
    assert errno_of_call(lambda: pfs.symlink("x", f"{MAIN}/link")) == errno.EEXIST


def test_directory_mtime_and_ctime_move_when_its_names_change(pfs: PathFS) -> None:
    pfs.mkdir(f"{MAIN}/d")
    pfs.mkdir(f"{MAIN}/e")
    pfs.setattr(f"{MAIN}/d", SetAttr(mtime_ns=10**18))
    pfs.setattr(f"{MAIN}/e", SetAttr(mtime_ns=10**18))

    def moved(path: str, change: Callable[[], object]) -> bool:
        before = pfs.lstat(path)
        time.sleep(0.01)
        change()
        after = pfs.lstat(path)
        return after.mtime_ns > before.mtime_ns and after.ctime_ns > before.ctime_ns

    assert moved(f"{MAIN}/d", lambda: pfs.write_file(f"{MAIN}/d/f", b"x"))
    assert moved(f"{MAIN}/d", lambda: pfs.mkdir(f"{MAIN}/d/sub"))
    assert moved(f"{MAIN}/d", lambda: pfs.symlink("f", f"{MAIN}/d/l"))
    assert moved(f"{MAIN}/e", lambda: pfs.rename(f"{MAIN}/d/f", f"{MAIN}/e/f"))
    assert moved(f"{MAIN}/d", lambda: pfs.unlink(f"{MAIN}/d/l"))
    assert moved(MAIN, lambda: pfs.mkdir(f"{MAIN}/x"))
    # chmod of an entry is not a change of the directory's names
    before = pfs.lstat(f"{MAIN}/e").mtime_ns
    pfs.setattr(f"{MAIN}/e/f", SetAttr(mode=0o600))
    assert pfs.lstat(f"{MAIN}/e").mtime_ns == before
    # utimens still sets a directory's mtime, backwards too
    pfs.setattr(f"{MAIN}/e", SetAttr(mtime_ns=10**18))
    assert pfs.lstat(f"{MAIN}/e").mtime_ns == 10**18


def test_chmod_chown_utimens_are_versioned(pfs: PathFS, app: App) -> None:
    pfs.write_file(f"{MAIN}/f", b"x")
    pfs.mkdir(f"{MAIN}/d")
    pfs.setattr(f"{MAIN}/f", SetAttr(mode=0o600, uid=1234, gid=99, mtime_ns=1_000_000_000_123))
    pfs.chmod(f"{MAIN}/d", 0o700)
    e = staged(app, "f")
    assert (stat.S_IMODE(e.mode), e.uid, e.gid, e.mtime_ns) == (0o600, 1234, 99, 1_000_000_000_123)
    assert stat.S_IMODE(staged(app, "d/").mode) == 0o700
    a = pfs.lstat(f"{MAIN}/f")
    assert (stat.S_IMODE(a.mode), a.uid, a.gid, a.mtime_ns) == (0o600, 1234, 99, 1_000_000_000_123)
    app.graveler.commit(REPO, "main", "modes")
    assert stat.S_IMODE(pfs.lstat("/repo/main@/f").mode) == 0o600
    pfs.chmod(f"{MAIN}/f", 0o644)
    diff = list(app.graveler.diff_uncommitted(REPO, "main"))
    assert [d.key for d in diff] == [b"f"]  # a mode change alone is a change


def test_chmod_of_an_implicit_directory_creates_its_marker(pfs: PathFS, app: App) -> None:
    app.catalog.put(REPO, "main", "imp/f", b"")
    pfs.chmod(f"{MAIN}/imp", 0o711)
    assert stat.S_IMODE(staged(app, "imp/").mode) == 0o711
    assert stat.S_IMODE(pfs.lstat(f"{MAIN}/imp").mode) == 0o711


def test_user_xattrs_are_object_metadata(pfs: PathFS, app: App) -> None:
    pfs.write_file(f"{MAIN}/f", b"x")
    pfs.setxattr(f"{MAIN}/f", "user.owner", b"team-a")
    pfs.setxattr(f"{MAIN}/f", "user.stage", b"raw")
    assert pfs.getxattr(f"{MAIN}/f", "user.owner") == b"team-a"
    assert sorted(pfs.listxattr(f"{MAIN}/f")) == ["user.owner", "user.stage"]
    assert dict(staged(app, "f").metadata) == {"owner": "team-a", "stage": "raw"}
    pfs.removexattr(f"{MAIN}/f", "user.stage")
    assert dict(staged(app, "f").metadata) == {"owner": "team-a"}
    assert errno_of_call(lambda: pfs.getxattr(f"{MAIN}/f", "user.stage")) == errno.ENODATA
    assert errno_of_call(lambda: pfs.getxattr(f"{MAIN}/f", "security.capability")) == errno.ENODATA
    assert errno_of_call(lambda: pfs.setxattr(f"{MAIN}/f", "trusted.x", b"1")) == errno.ENOTSUP
    assert errno_of_call(lambda: pfs.setxattr(f"{MAIN}/f", "user.bin", b"\xff\xfe")) == errno.EINVAL
    # metadata written through S3 (or the CLI) shows up as xattrs
    app.catalog.put(REPO, "main", "s3obj", b"", metadata=[("source", "gateway")])
    assert pfs.getxattr(f"{MAIN}/s3obj", "user.source") == b"gateway"
    pfs.mkdir(f"{MAIN}/d")
    pfs.setxattr(f"{MAIN}/d", "user.k", b"v")
    assert dict(staged(app, "d/").metadata) == {"k": "v"}


def test_statfs(fs: FileSystem) -> None:
    s = fs.statfs()
    assert s.namemax == 255 and s.bavail > 0 and s.ffree > 0


def test_setgid_directories_pass_on_their_group(pfs: PathFS) -> None:
    pfs.mkdir(f"{MAIN}/shared", 0o2775)
    pfs.setattr(f"{MAIN}/shared", SetAttr(gid=4242))
    user = PathFS(pfs.fs, Caller(uid=1000, gid=1000))
    user.write_file(f"{MAIN}/shared/f", b"")
    user.mkdir(f"{MAIN}/shared/sub")
    assert pfs.lstat(f"{MAIN}/shared/f").gid == 4242
    sub = pfs.lstat(f"{MAIN}/shared/sub")
    assert sub.gid == 4242 and sub.mode & stat.S_ISGID
    assert pfs.lstat(f"{MAIN}/shared/f").uid == 1000


# ---------------------------------------------------------------------------- caching and consistency
class MountClock:
    """The monotonic clock of the mounts and of the catalog's branch reads, moved by the test: "within
    ``head_ttl``" is a reading of this clock, so a loaded machine neither fails nor skips a claim about it.

    Each reading is a microsecond after the one before (events keep their order, as on a real monotonic
    clock); ``advance`` makes time pass.  The catalog's reads are stamped with it too: ``branch_seen`` times
    are compared with the mount's own (``Scopes.absorb``), so the two must be one clock.
    """

    def __init__(self) -> None:
        self.t = time.monotonic()

    def __call__(self) -> float:
        self.t += 1e-6
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


class _TimeWith:
    """The ``time`` module with another ``monotonic``."""

    def __init__(self, monotonic: Callable[[], float]) -> None:
        self.monotonic = monotonic

    def __getattr__(self, name: str) -> object:
        return getattr(time, name)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> MountClock:
    from lakemount.fuse.state import MountState
    from lakemount.graveler import reads as graveler_reads

    c = MountClock()
    monkeypatch.setattr(MountState, "now", lambda self: c())
    monkeypatch.setattr(graveler_reads, "time", _TimeWith(c))
    return c


def test_second_mount_sees_closed_files_within_head_ttl(fs_factory: Callable[..., FileSystem]) -> None:
    a = PathFS(fs_factory(head_ttl=0.2))
    b = PathFS(fs_factory(head_ttl=0.2))
    assert b.listdir(MAIN) == [".lakefs"]
    a.write_file(f"{MAIN}/shared", b"v1")
    time.sleep(0.25)
    assert b.read_file(f"{MAIN}/shared") == b"v1"
    a.write_file(f"{MAIN}/shared", b"version 2")
    time.sleep(0.25)
    assert b.lstat(f"{MAIN}/shared").size == 9
    assert b.read_file(f"{MAIN}/shared") == b"version 2"
    a.unlink(f"{MAIN}/shared")
    time.sleep(0.25)
    assert not b.exists(f"{MAIN}/shared")


def test_head_change_elsewhere_invalidates_a_moving_ref(fs_factory: Callable[..., FileSystem], app: App) -> None:
    fs = fs_factory(head_ttl=0.1)
    pfs = PathFS(fs)
    app.catalog.put(REPO, "main", "f", b"one")
    app.graveler.commit(REPO, "main", "c1")
    assert pfs.read_file("/repo/main@/f") == b"one"
    app.catalog.put(REPO, "main", "f", b"two!")
    app.graveler.commit(REPO, "main", "c2")
    while not fs.invalidations.empty():
        fs.invalidations.get_nowait()
    time.sleep(0.15)
    fs.poll_heads()
    queued = []
    while not fs.invalidations.empty():
        queued.append(fs.invalidations.get_nowait())
    assert ("inode", pfs.ino("/repo/main@/f")) in queued or any(q[0] == "inode" for q in queued)
    assert pfs.read_file("/repo/main@/f") == b"two!"


def test_a_head_poll_reads_every_open_branch_in_one_statement(fs_factory: Callable[..., FileSystem], app: App) -> None:
    """The poll's cost does not grow with the branches a mount shows: one query for 1 branch or for 8."""
    per_poll = {}
    # The commit is made elsewhere, as its message says: made through the mount's own App, its reads of the
    # branch mid-commit (the staging token sealed) were recorded as the branch last seen, and the poll took
    # that row and then the finished one, two generations (one failed run in nine beside CPU hogs).
    elsewhere = App.from_config()
    try:
        for n in (1, 8):
            names = [f"b{n}x{i}" for i in range(n)]
            for name in names:
                app.graveler.create_branch(REPO, name, "main")
                app.catalog.put(REPO, name, "f", name.encode())
            fs = fs_factory(head_ttl=2.0)
            pfs = PathFS(fs)
            for name in names:
                assert pfs.read_file(f"/{REPO}/{name}/f") == name.encode()
            settle(fs)
            time.sleep(1.1)  # half-way due; the kernel may still cache what it was given
            elsewhere.graveler.commit(REPO, names[-1], "moved elsewhere")
            gens = {name: fs.scopes.get(REPO, name).gen for name in names}
            with statements(app) as seen:
                fs.poll_heads()
            per_poll[n] = len(seen)
            assert {name: fs.scopes.get(REPO, name).gen for name in names} == {**gens, names[-1]: gens[names[-1]] + 1}
    finally:
        elsewhere.close()
    assert per_poll == {1: 1, 8: 1}


def test_a_mount_in_use_looks_a_name_up_again_in_one_statement(fs_factory: Callable[..., FileSystem], app: App) -> None:
    """A reader of two branches, its entries looked up again every ``head_ttl``: one statement per name
    (the branch row comes with the staged entries), one head check per branch root, nothing else
    (no repository or separate branch lookups, no separate staged lookups)."""
    app.graveler.create_branch(REPO, "src", "main")
    app.catalog.put(REPO, "main", "marker.txt", b"main")
    app.graveler.commit(REPO, "main", "c1")
    app.catalog.put(REPO, "src", "marker.txt", b"src")  # staged
    fs = fs_factory(head_ttl=0.3)
    pfs = PathFS(fs)
    for _round in range(3):
        time.sleep(0.35)  # every entry the mount and the kernel had is due again
        for b in ("main", "src"):  # another process stages elsewhere in both: no listing is kept (ownchanges.py),
            app.catalog.put(REPO, b, f"elsewhere-{_round}.txt", b"x")  # even one a late scan-ahead read
        settle(fs)  # round 0's opens listed the roots in the background: not in a later round's window
        with statements(app) as seen:
            for b in ("main", "src"):
                assert pfs.read_file(f"/{REPO}/{b}/marker.txt") == b.encode()
        if _round == 0:
            continue  # the first round learns the branches' tokens
        assert not [s for s in seen if "lm_repositories" in s]
        assert not [s for s in seen if s.startswith("SELECT commit_id, staging_token")]  # no get_branch
        assert not [s for s in seen if s.startswith("SELECT key, value FROM lm_staging") or s.startswith("SELECT token")]
        probes = [s for s in seen if s.startswith("SELECT 0, commit_id")]
        assert len(probes) == 2 and len(seen) <= 4, seen


def test_a_directory_the_kernel_forgot_still_answers_new_names_from_its_listing(
    fs_factory: Callable[..., FileSystem], app: App,
) -> None:
    """Issue 36: a change notice naming a directory's parent invalidates its kernel entry, and the kernel then
    forgets the directory's inode; its node went with its cached listing, so every name a writer created in
    it afterwards was looked up in the catalog first (one statement per file on every host).  The node stays
    with its listing: the writer's next files cost no lookup."""
    fs = fs_factory(head_ttl=30.0)
    pfs = PathFS(fs)
    pfs.mkdir(f"{MAIN}/d")
    pfs.write_file(f"{MAIN}/d/warm", b"w")
    d = pfs.ino(f"{MAIN}/d")
    node = fs.state.table.get(d)
    assert node is not None and node.listing is not None
    fs.forget([(d, node.lookups)])  # what the kernel does once it dropped the directory's entry
    assert node.lookups == 0
    with statements(app) as seen:
        for i in range(5):
            pfs.write_file(f"{MAIN}/d/f{i}", b"x")
    assert pfs.ino(f"{MAIN}/d") == d
    assert [s for s in seen if s.startswith("SELECT 0, commit_id")] == [], seen
    assert sorted(pfs.listdir(f"{MAIN}/d")) == ["f0", "f1", "f2", "f3", "f4", "warm"]


def test_a_branch_in_use_shows_changes_made_elsewhere_within_head_ttl(
    fs_factory: Callable[..., FileSystem], app: App, clock: MountClock
) -> None:
    """Reads that reuse the branch state the mount saw last still show a staged write and a moved head of
    another process within ``head_ttl``, and a commit elsewhere (its staging dropped) never hides a file."""
    other = App.from_config()  # another process: its own graveler and ref store connections
    other.catalog.put(REPO, "main", "f", b"one")
    other.graveler.commit(REPO, "main", "c1")
    ttl = 0.2
    fs = fs_factory(head_ttl=ttl)
    pfs = PathFS(fs)
    assert pfs.read_file(f"{MAIN}/f") == b"one"
    clock.advance(ttl + 0.05)
    assert pfs.read_file(f"{MAIN}/f") == b"one"  # the tokens are known now
    other.catalog.put(REPO, "main", "f", b"two")
    other.catalog.put(REPO, "main", "d/g", b"new")
    clock.advance(ttl)  # head_ttl later by the mount's clock: the staged write shows
    assert pfs.read_file(f"{MAIN}/f") == b"two"
    assert pfs.read_file(f"{MAIN}/d/g") == b"new"
    other.graveler.commit(REPO, "main", "c2")  # seals and drops the staging the mount last read
    for _ in range(6):  # across three head_ttl periods: never hidden, whatever the mount re-reads
        assert pfs.read_file(f"{MAIN}/f") == b"two"
        assert pfs.read_file(f"{MAIN}/d/g") == b"new"
        clock.advance(ttl / 2)
    other.graveler.create_branch(REPO, "dev", "main")
    other.catalog.put(REPO, "dev", "f", b"three")
    other.graveler.commit(REPO, "dev", "c3")
    gen = fs.scopes.get(REPO, "main").gen
    other.graveler.merge(REPO, "dev", "main")
    clock.advance(ttl)
    assert pfs.read_file(f"{MAIN}/f") == b"three"  # the moved head, within head_ttl
    # A read takes the branch row its own statement returned; the scope takes that row at its next head
    # check, due head_ttl after the last one by the mount's clock.
    clock.advance(ttl)
    pfs.read_file(f"{MAIN}/f")
    assert fs.scopes.get(REPO, "main").gen > gen, "the moved head made no new generation"


def test_with_change_notices_a_branch_in_use_needs_no_head_check_of_its_own(
    fs_factory: Callable[..., FileSystem], app: App, clock: MountClock
) -> None:
    """While notices arrive, a branch's moves and staged changes are pushed: a request past ``head_ttl`` asks
    nothing (what was read stays trusted until a notice drops it, or ``PUSHED_POLL``); past ``PUSHED_POLL``
    it checks the head and looks the name up again; and a notice shows a moved head at once."""
    from lakemount.fuse.scope import PUSHED_POLL
    from lakemount.metastore.notify import Change

    other = App.from_config()  # another process
    other.catalog.put(REPO, "main", "f", b"one")
    other.graveler.commit(REPO, "main", "c1")
    ttl = 0.5
    fs = fs_factory(head_ttl=ttl)
    fs.scopes.push_live = lambda: True
    pfs = PathFS(fs)
    assert pfs.read_file(f"{MAIN}/f") == b"one"
    settle(fs)  # the open listed the directory in the background; the next opens of f do not (scan.py)
    for _round in range(2):
        clock.advance(ttl + 0.05)
        with statements(app) as seen:
            assert pfs.read_file(f"{MAIN}/f") == b"one"
        assert seen == [], seen
    for _round in range(2):
        clock.advance(PUSHED_POLL + 0.05)
        with statements(app) as seen:
            assert pfs.read_file(f"{MAIN}/f") == b"one"
        assert len(seen) == 2 and seen[0].startswith("SELECT repo, name, commit_id") and seen[1].startswith("SELECT 0, commit_id"), seen
    other.graveler.create_branch(REPO, "dev", "main")
    other.catalog.put(REPO, "dev", "f", b"two")
    other.graveler.commit(REPO, "dev", "c")
    other.graveler.merge(REPO, "dev", "main")
    # No time has passed on the mount's clock since its last check: the entry is trusted for head_ttl, like any
    # (this was skipped when the merge took longer than head_ttl by the wall clock: on a loaded machine).
    assert pfs.read_file(f"{MAIN}/f") == b"one"
    fs.refs_changed([Change("elsewhere", "head", REPO, "main")])
    assert pfs.read_file(f"{MAIN}/f") == b"two"


def test_an_idle_mount_polls_nothing_and_rechecks_on_the_next_request(fs_factory: Callable[..., FileSystem], app: App) -> None:
    fs = fs_factory(head_ttl=0.2)
    pfs = PathFS(fs)
    app.catalog.put(REPO, "main", "f", b"one")
    app.graveler.commit(REPO, "main", "c1")
    assert pfs.read_file(f"{MAIN}/f") == b"one"
    assert fs.table.per_scope[(REPO, "main")] > 0
    settle(fs)
    time.sleep(0.25)  # everything the kernel was given has run out
    app.catalog.put(REPO, "main", "f", b"two!")
    app.graveler.commit(REPO, "main", "c2")
    with statements(app) as seen:
        fs.poll_heads()
    assert seen == []
    assert pfs.read_file(f"{MAIN}/f") == b"two!"


def test_notices_lost_drop_what_stagings_elsewhere_may_have_changed(
    fs_factory: Callable[..., FileSystem], app: App, clock: MountClock
) -> None:
    """``refs_changed(None)`` (notices lost: a reconnect, or a host that stopped listening while idle, stop 56): a
    listing kept while notices arrived is read again, not trusted for ``PUSHED_POLL`` over the stagings whose
    notices never came (only the heads were checked before: a staging is in no branch row)."""
    other = App.from_config()  # another process
    other.catalog.put(REPO, "main", "d/a", b"a")
    fs = fs_factory(head_ttl=0.5)
    fs.scopes.push_live = lambda: True
    pfs = PathFS(fs)
    assert pfs.listdir(f"{MAIN}/d") == ["a"]
    settle(fs)
    other.catalog.put(REPO, "main", "d/b", b"b")  # its notice never reaches this mount
    clock.advance(0.6)
    assert pfs.listdir(f"{MAIN}/d") == ["a"]  # trusted past head_ttl while notices arrive
    fs.refs_changed(None)
    assert sorted(pfs.listdir(f"{MAIN}/d")) == ["a", "b"]
    assert pfs.read_file(f"{MAIN}/d/b") == b"b"


def test_after_notices_were_lost_a_copy_lists_its_directory_once_not_each_name(
    fs_factory: Callable[..., FileSystem], app: App, clock: MountClock
) -> None:
    """``refs_changed(None)`` keeps the stale listings (a new generation): a directory this mount writes into is
    listed again once by the next create there, then answers the next names from memory, where each create had
    looked its name up (a ``cp -r`` on a host coming back from idle, which reports ``None`` when it listens again:
    stop 56)."""
    fs = fs_factory(head_ttl=0.5)
    fs.scopes.push_live = lambda: True
    pfs = PathFS(fs)
    pfs.mkdir(f"{MAIN}/d")
    for i in range(3):
        pfs.write_file(f"{MAIN}/d/f{i}", b"x")
    settle(fs)
    fs.refs_changed(None)
    with statements(app) as seen:
        for i in range(3, 9):
            pfs.write_file(f"{MAIN}/d/f{i}", b"x")
    reads = [s for s in seen if s.startswith("SELECT") and "lm_staging" in s and "INSERT" not in s]
    assert len(reads) <= 2, seen  # the listing (and the head check), not a lookup per name
    assert sorted(pfs.listdir(f"{MAIN}/d")) == [f"f{i}" for i in range(9)]


def test_the_head_poll_is_no_use_of_notices_a_read_is(fs_factory: Callable[..., FileSystem], app: App) -> None:
    """Stop 56: a host listens while something on it uses what notices keep true (``Listener.use``: the mount's
    ``push_live``); the head poll runs on a timer, so it asks ``push_heard``, or an idle mount would keep its host
    listening (woken by every notice of the database, a transaction each) for ever."""
    fs = fs_factory(head_ttl=0.5)
    uses: list[str] = []
    fs.scopes.push_live = lambda: uses.append("use") is None
    fs.scopes.push_heard = lambda: True
    pfs = PathFS(fs)
    app.catalog.put(REPO, "main", "f", b"one")
    assert pfs.read_file(f"{MAIN}/f") == b"one"
    assert uses  # a read asked whether notices arrive: a use
    settle(fs)
    uses.clear()
    fs.poll_heads()
    assert uses == []


def test_immutable_refs_answer_from_memory(pfs: PathFS, fs: FileSystem, app: App) -> None:
    app.catalog.put(REPO, "main", "dir/f", b"immutable")
    cid = app.graveler.commit(REPO, "main", "c").commit.id
    path = f"/repo/{cid}/dir/f"
    assert pfs.read_file(path) == b"immutable"
    root = pfs.ino(f"/repo/{cid}")
    d = pfs.ino(f"/repo/{cid}/dir")
    with fs.nonblocking():
        attr = fs.lookup(root, b"dir")
        assert attr.timeout >= 3600
        f = fs.lookup(d, b"f")
        fs.getattr(f.ino)
        opened = fs.open(f.ino, os.O_RDONLY)
        assert opened.keep_cache
        assert fs.read(opened.fh, 0, 100) == b"immutable"
        fs.release(opened.fh)


def test_sequential_opens_in_a_directory_prefetch_the_next_files(pfs: PathFS, fs: FileSystem, app: App) -> None:
    from lakemount.fuse.scan import SCAN_AHEAD

    for i in range(40):
        app.catalog.put(REPO, "main", f"ds/f{i:03d}", bytes([i]) * (1000 + i))
    cid = app.graveler.commit(REPO, "main", "forty").commit.id
    d = f"/repo/{cid}/ds"
    assert len(pfs.listdir(d)) == 40
    # Out of order: nothing is fetched ahead.
    for i in (7, 3, 30):
        assert pfs.read_file(f"{d}/f{i:03d}") == bytes([i]) * (1000 + i)
    assert fs.metrics.counter("prefetched_files") == 0
    # Two in listing order: the next SCAN_AHEAD small files come into RAM in the background...
    for i in (10, 11):
        assert pfs.read_file(f"{d}/f{i:03d}") == bytes([i]) * (1000 + i)
    deadline = time.monotonic() + 10
    while fs.metrics.counter("prefetched_files") < SCAN_AHEAD and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fs.metrics.counter("prefetched_files") == SCAN_AHEAD
    # ...so opening and reading them needs no I/O at all, and the window keeps moving.
    for i in range(12, 12 + SCAN_AHEAD):
        ino = pfs.ino(f"{d}/f{i:03d}")
        with fs.nonblocking():
            opened = fs.open(ino, os.O_RDONLY)
            assert fs.read(opened.fh, 0, 4096) == bytes([i]) * (1000 + i)
            fs.release(opened.fh)
    deadline = time.monotonic() + 10
    while fs.metrics.counter("prefetched_files") < 27 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fs.metrics.counter("prefetched_files") == 27  # f012..f039 each once, but f030: it was read, so cached


def test_files_opened_by_path_in_listing_order_are_prefetched_too(pfs: PathFS, fs: FileSystem, app: App) -> None:
    """No readdir first (paths known in advance): the directory is listed in the background."""
    for i in range(30):
        app.catalog.put(REPO, "main", f"ds/f{i:03d}", bytes([i]) * 100)
    cid = app.graveler.commit(REPO, "main", "thirty").commit.id
    d = f"/repo/{cid}/ds"
    deadline = time.monotonic() + 10
    i = 0
    while fs.metrics.counter("prefetched_files") == 0 and i < 30 and time.monotonic() < deadline:
        assert pfs.read_file(f"{d}/f{i:03d}") == bytes([i]) * 100
        i += 1
        time.sleep(0.05)  # let the background listing land
    assert fs.metrics.counter("prefetched_files") > 0, "opening files in order never started a prefetch"
    assert i <= 4


def test_a_file_opened_again_and_again_does_not_list_its_directory(fs_factory: Callable[..., FileSystem], app: App) -> None:
    """A reader polling one file is no scan: its directory is listed for scan-ahead once, not every ``head_ttl``;
    opening another file there brings it up to date (lists it again, or keeps it while nothing else changed the branch)."""
    app.catalog.put(REPO, "main", "d/f", b"f")
    app.catalog.put(REPO, "main", "d/g", b"g")
    fs = fs_factory(head_ttl=0.2)
    pfs = PathFS(fs)

    def listed() -> float:
        """When the listing was last brought up to date (read again, or kept: nothing else changed the branch)."""
        listing = fs.table.get(pfs.ino(f"{MAIN}/d")).listing  # type: ignore[union-attr]
        return listing.fetched if listing is not None else 0.0

    def read() -> float:
        """When the listing was last read from the catalog."""
        listing = fs.table.get(pfs.ino(f"{MAIN}/d")).listing  # type: ignore[union-attr]
        return listing.listed if listing is not None else 0.0

    assert pfs.read_file(f"{MAIN}/d/f") == b"f"
    deadline = time.monotonic() + 10
    while not listed() and time.monotonic() < deadline:
        time.sleep(0.01)
    first = listed()
    assert first and read() == first
    for _round in range(3):
        time.sleep(0.25)  # the listing is stale now
        assert pfs.read_file(f"{MAIN}/d/f") == b"f"
        time.sleep(0.1)
        assert read() == first
    assert pfs.read_file(f"{MAIN}/d/g") == b"g"
    while listed() == first and time.monotonic() < deadline:
        time.sleep(0.01)
    assert listed() > first


def test_branch_entries_need_io_after_head_ttl(fs_factory: Callable[..., FileSystem], app: App) -> None:
    fs = fs_factory(head_ttl=0.1)
    pfs = PathFS(fs)
    pfs.write_file(f"{MAIN}/f", b"x")
    ino = pfs.ino(f"{MAIN}/f")
    with fs.nonblocking():
        fs.getattr(ino)  # fresh: from memory
    time.sleep(0.15)
    with fs.nonblocking(), pytest.raises(NeedsThread):
        fs.getattr(ino)
    fs.getattr(ino)


def test_reads_are_cached_in_blocks(pfs: PathFS, fs: FileSystem, app: App) -> None:
    data = os.urandom(5 << 20)
    app.catalog.put(REPO, "main", "big", data)
    app.graveler.commit(REPO, "main", "c")
    assert pfs.read_file("/repo/main@/big") == data
    misses = fs.metrics.counter("block_misses")
    assert misses >= 5
    assert pfs.read_file("/repo/main@/big") == data
    assert fs.metrics.counter("block_misses") == misses
    assert fs.metrics.counter("readahead_blocks") > 0


def test_page_cache_is_kept_only_while_content_is_unchanged(fs_factory: Callable[..., FileSystem], app: App) -> None:
    fs = fs_factory(head_ttl=0.05)
    pfs = PathFS(fs)
    app.catalog.put(REPO, "main", "f", b"1")
    ino = pfs.ino(f"{MAIN}/f")
    first = fs.open(ino, os.O_RDONLY)
    fs.release(first.fh)
    again = fs.open(ino, os.O_RDONLY)
    fs.release(again.fh)
    assert again.keep_cache
    app.catalog.put(REPO, "main", "f", b"22")
    time.sleep(0.06)
    changed = fs.open(ino, os.O_RDONLY)
    assert not changed.keep_cache
    assert fs.read(changed.fh, 0, 10) == b"22"
    fs.release(changed.fh)


def test_only_a_write_only_handle_writes_past_the_kernel_page_cache(fs: FileSystem, pfs: PathFS, app: App) -> None:
    """Stop 51: direct_io for O_WRONLY (nothing reads or maps through it); a handle that reads keeps the cache."""
    app.catalog.put(REPO, "main", "f", b"1")
    ino = pfs.ino(f"{MAIN}/f")
    direct = {}
    for flags in (os.O_RDONLY, os.O_RDWR, os.O_WRONLY, os.O_WRONLY | os.O_APPEND, os.O_WRONLY | os.O_TRUNC):
        opened = fs.open(ino, flags)
        direct[flags] = opened.direct_io
        fs.release(opened.fh)
    assert direct == {os.O_RDONLY: False, os.O_RDWR: False, os.O_WRONLY: True, os.O_WRONLY | os.O_APPEND: True,
                      os.O_WRONLY | os.O_TRUNC: True}


def test_forget_drops_inodes(pfs: PathFS, fs: FileSystem) -> None:
    pfs.write_file(f"{MAIN}/f", b"")
    before = len(fs.table)
    attr = fs.lookup(pfs.ino(MAIN), b"f")
    fs.forget([(attr.ino, 10**6)])
    assert len(fs.table) == before - 1
    assert fs.table.get(ROOT_INODE) is not None


def test_stats_are_prometheus_text(pfs: PathFS) -> None:
    pfs.write_file(f"{MAIN}/f", b"abc")
    pfs.read_file(f"{MAIN}/f")
    text = pfs.read_file("/.lakefs/stats").decode()
    assert 'lakemount_fuse_ops_total{op="create"} 1' in text
    assert 'lakemount_fuse_op_seconds_bucket{op="read",le="+Inf"}' in text
    assert "lakemount_fuse_written_bytes_total 3" in text
    assert 'lakemount_cache{tier="ram",counter="hits"}' in text
    assert "lakemount_fuse_inodes" in text


def test_protected_branches_refuse_writes_with_eperm(pfs: PathFS, app: App) -> None:
    pfs.write_file(f"{MAIN}/before", b"1")
    app.catalog.protection.add(REPO, "main")
    assert errno_of_call(lambda: pfs.write_file(f"{MAIN}/after", b"2")) == errno.EPERM
    assert errno_of_call(lambda: pfs.unlink(f"{MAIN}/before")) == errno.EPERM
    assert pfs.read_file(f"{MAIN}/before") == b"1"


def test_creating_and_closing_a_file_reads_the_protection_rules_once_per_head_ttl(
    fs_factory: Callable[..., FileSystem], app: App,
) -> None:
    """Issue 26 (a lone writer's cp -r): create and close checked the branch's protection three times
    per file, each a read of the repository and one of its rules (7 of sql staging's 15 statements
    per file); the mount keeps the rules for ``--head-ttl`` like a head.  Issue 36: the writer's read of
    the repository's namespace went too (the record is kept as the rules are, and the staging statement,
    which joins the repository's row, checks the namespace)."""
    pfs = PathFS(fs_factory(head_ttl=30.0))
    pfs.mkdir(f"{MAIN}/d")
    pfs.write_file(f"{MAIN}/d/warm", b"w")
    with statements(app) as seen:
        for i in range(10):
            pfs.write_file(f"{MAIN}/d/f{i}", b"x" * 1024)
    assert [s for s in seen if "lm_protection" in s] == []
    assert [s for s in seen if s.startswith("SELECT storage_namespace")] == []
    assert all(staged(app, f"d/f{i}").size == 1024 for i in range(10))  # type: ignore[union-attr]


def test_a_protection_rule_added_by_another_process_applies_within_head_ttl(
    fs_factory: Callable[..., FileSystem], app: App,
) -> None:
    """The rules a mount keeps are as fresh as its heads: a rule another process adds refuses the
    mount's writes within ``--head-ttl``; one removed there lets them through within it too."""
    pfs = PathFS(fs_factory(head_ttl=0.5))
    pfs.write_file(f"{MAIN}/before", b"1")
    other = App.from_config()  # another process on the same ref store: its catalog tells this one nothing
    other.catalog.protection.add(REPO, "main")
    time.sleep(0.6)
    assert errno_of_call(lambda: pfs.write_file(f"{MAIN}/after", b"2")) == errno.EPERM
    other.catalog.protection.delete(REPO, "main")
    time.sleep(0.6)
    pfs.write_file(f"{MAIN}/after", b"2")
    assert staged(app, "after") is not None


def test_a_refused_write_to_a_protected_branch_leaves_its_reason_in_lakefs_error(pfs: PathFS, app: App) -> None:
    """``cp`` into a protected branch says only "Operation not permitted"; ``.lakefs/error`` says why."""
    pfs.write_file(f"{MAIN}/before", b"1")
    app.catalog.protection.add(REPO, "ma*")
    assert pfs.read_file(f"{MAIN}/.lakefs/error") == b""
    assert errno_of_call(lambda: pfs.write_file(f"{MAIN}/after", b"2")) == errno.EPERM
    error = pfs.read_file(f"{MAIN}/.lakefs/error").decode()
    assert "write:" in error and f"{REPO}/main is protected" in error and "'ma*'" in error and "merge" in error
    assert errno_of_call(lambda: pfs.unlink(f"{MAIN}/before")) == errno.EPERM
    assert "is protected" in pfs.read_file(f"{MAIN}/.lakefs/error").decode()


def test_a_refs_root_keeps_no_attributes(pfs: PathFS) -> None:
    before = pfs.lstat(MAIN)
    after = pfs.setattr(MAIN, SetAttr(mode=0o700, mtime_ns=1))
    assert after.mode == before.mode and after.mtime_ns == before.mtime_ns


def test_a_mount_by_an_ordinary_user_owns_unowned_entries(fs_factory: Callable[..., FileSystem], app: App) -> None:
    app.catalog.put(REPO, "main", "from-s3", b"x")  # uid/gid 0
    app.catalog.put(REPO, "main", "owned", b"x", uid=2000, gid=3000)
    pfs = PathFS(fs_factory(uid=1000, gid=1001))
    a = pfs.lstat(f"{MAIN}/from-s3")
    assert (a.uid, a.gid) == (1000, 1001)
    b = pfs.lstat(f"{MAIN}/owned")
    assert (b.uid, b.gid) == (2000, 3000)


def test_concurrent_writers_readers_and_listers(pfs: PathFS, app: App) -> None:
    import threading

    pfs.mkdir(f"{MAIN}/c")
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for i in range(15):
                path = f"{MAIN}/c/w{n}-{i}"
                data = f"{n}:{i}".encode() * (i + 1)
                pfs.write_file(path, data)
                assert pfs.read_file(path) == data
                pfs.listdir(f"{MAIN}/c")
                if i % 3 == 0:
                    pfs.rename(path, path + ".moved")
                elif i % 3 == 1:
                    pfs.unlink(path)
        except BaseException as exc:  # collected and re-raised by the test thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    expected = sorted(f"w{n}-{i}" + (".moved" if i % 3 == 0 else "") for n in range(6) for i in range(15) if i % 3 != 1)
    assert sorted(pfs.listdir(f"{MAIN}/c")) == expected
    staged_names = sorted(it.path[2:] for it in app.catalog.list(REPO, "main", "c/") if it.path != "c/")
    assert staged_names == expected


def test_a_created_names_negative_entry_is_forgotten_so_a_long_copy_keeps_getting_them(
    fs_factory: Callable[..., FileSystem],
) -> None:
    """Stop 57: each new name ``cp`` writes is looked up first (absent: a negative entry the kernel keeps, noted
    in the scope to invalidate on a change) and then created, which replaces the kernel's negative entry.  The
    note goes with the create; before, it stayed until ``head_ttl`` passed, so a copy of more than
    ``NEGATIVES_KEPT`` names within ``head_ttl`` filled the table: every lookup after scanned it whole and
    granted no negative entry."""
    from lakemount.fuse.errno import Absent
    from lakemount.fuse.tree import NEGATIVES_KEPT

    fs = fs_factory(head_ttl=3600)
    pfs = PathFS(fs)
    pfs.mkdir(f"/{REPO}/main/d")
    d = pfs.ino(f"/{REPO}/main/d")
    pfs.listdir(f"/{REPO}/main/d")  # listed: an absent name is answered from the listing
    me = Caller(os.getuid(), os.getgid(), 1)
    granted = []
    for i in range(NEGATIVES_KEPT + 10):
        name = f"f{i:05d}".encode()
        with pytest.raises(Absent) as gone:
            fs.lookup(d, name)
        granted.append(gone.value.timeout)
        opened, _attr = fs.create(d, name, 0o100644, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, me)
        fs.release(opened.fh)
    scope = fs.state.node(d).scope
    assert scope is not None and not scope.negatives, len(scope.negatives)
    assert min(granted) > 0, f"{granted.count(0.0)} lookups granted no negative entry"


def test_a_create_with_o_trunc_of_a_new_name_makes_no_temp_file_and_of_an_existing_one_truncates(pfs: PathFS, fs: FileSystem) -> None:
    """Stop 57: O_TRUNC truncates a file that existed; a create that makes the file opens it with nothing to
    empty (no temp file until the first write: the create's cost on the request loop), while a create of an
    existing name without O_EXCL still empties it and marks its times."""
    main = f"/{REPO}/main"
    d = pfs.ino(main)
    me = Caller(os.getuid(), os.getgid(), 1)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    opened, attr = fs.create(d, b"new", 0o100644, flags, me)
    node = fs.state.node(attr.ino)
    assert node.dirty is None and attr.size == 0
    fs.write(opened.fh, 0, b"abc")
    fs.flush(opened.fh)
    fs.release(opened.fh)
    assert pfs.read_file(f"{main}/new") == b"abc"
    before = pfs.lstat(f"{main}/new").mtime_ns
    time.sleep(0.01)
    opened, attr = fs.create(d, b"new", 0o100644, flags, me)  # the name exists: opened and truncated
    assert attr.size == 0 and attr.mtime_ns > before
    fs.flush(opened.fh)
    fs.release(opened.fh)
    assert pfs.read_file(f"{main}/new") == b""
