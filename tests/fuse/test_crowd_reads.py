"""What a crowd's folders cost to read again (docs/SCALE.md, stop 55): a writer's folder whose entry and listing went
stale together is read in one statement, and a listing read while this mount writes into other folders is kept."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from lakemount.app import App
from lakemount.fuse import tree
from lakemount.fuse.core import FileSystem
from tests.fuse.conftest import REPO
from tests.fuse.pathfs import PathFS

MAIN = f"/{REPO}/main"


class Clock:
    """The mount's monotonic clock, moved by the test (head_ttl passes without sleeping)."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """What the mount reads from the catalog: ("list", directory) and ("lookup", path)."""
    seen: list[tuple[str, str]] = []
    list_dir, lookup_child = tree.list_dir, tree.lookup_child

    def listed(catalog, repo, ref, dir_path, *args):  # type: ignore[no-untyped-def]
        seen.append(("list", dir_path))
        return list_dir(catalog, repo, ref, dir_path, *args)

    def looked_up(catalog, repo, ref, path):  # type: ignore[no-untyped-def]
        seen.append(("lookup", path))
        return lookup_child(catalog, repo, ref, path)

    monkeypatch.setattr(tree, "list_dir", listed)
    monkeypatch.setattr(tree, "lookup_child", looked_up)
    return seen


def mount(fs_factory: Callable[..., FileSystem], monkeypatch: pytest.MonkeyPatch, clock: Clock) -> tuple[FileSystem, PathFS]:
    fs = fs_factory(head_ttl=1.0)
    monkeypatch.setattr(fs.state, "now", clock)
    return fs, PathFS(fs)


def test_a_writers_folder_gone_stale_with_its_listing_is_read_in_one_statement(
    fs_factory: Callable[..., FileSystem], app: App, reads: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: the folder was looked up (its entry) and then listed (for the next create in it), two statements."""
    clock = Clock()
    fs, pfs = mount(fs_factory, monkeypatch, clock)
    pfs.mkdir(f"{MAIN}/d")
    for i in range(3):
        pfs.write_file(f"{MAIN}/d/f{i}", b"x")
    assert pfs.listdir(f"{MAIN}/d") == ["f0", "f1", "f2"]
    app.catalog.put(REPO, "main", "elsewhere/x", b"1")  # another process changed the branch: no listing is kept on stamps
    clock.t += 1.5  # the folder's entry and its listing are both stale
    reads.clear()
    d = pfs.ino(f"{MAIN}/d")
    pfs.lstat(f"{MAIN}/d")
    pfs.write_file(f"{MAIN}/d/f3", b"x")
    assert reads == [("list", "d")], reads
    node = fs.state.table.get(d)
    assert node is not None and node.listing is not None and tree.Tree.fresh(fs.tree, node)
    assert pfs.listdir(f"{MAIN}/d") == ["f0", "f1", "f2", "f3"]

    # Through getattr too (the kernel still holds the folder's entry, its attributes expired).
    app.catalog.put(REPO, "main", "elsewhere/y", b"2")
    clock.t += 1.5
    reads.clear()
    fs.getattr(d)
    assert reads == [("list", "d")], reads

    # Gone meanwhile (removed by another process): ENOENT, as when it was looked up.
    for i in range(4):
        app.catalog.delete(REPO, "main", f"d/f{i}")
    clock.t += 1.5
    assert not pfs.exists(f"{MAIN}/d")


@pytest.mark.parametrize("where", ["b", "a"])
def test_a_listing_read_while_this_mount_creates_elsewhere_is_kept(
    fs_factory: Callable[..., FileSystem], app: App, monkeypatch: pytest.MonkeyPatch, where: str,
) -> None:
    """A listing of ``a`` read while this mount created a file in ``b`` is kept (before: dropped, so the next lookup
    in ``a`` listed it again: with 16 writers each listing raced another writer's create); one that raced a create
    in ``a`` itself is still dropped, and the next read shows that file."""
    clock = Clock()
    fs, pfs = mount(fs_factory, monkeypatch, clock)
    app.catalog.put(REPO, "main", "a/first", b"1")
    app.catalog.put(REPO, "main", "b/first", b"1")
    assert pfs.exists(f"{MAIN}/b/first")
    assert pfs.exists(f"{MAIN}/a/first")
    real = tree.list_dir
    raced: list[str] = []

    def racing(catalog, repo, ref, dir_path, *args):  # type: ignore[no-untyped-def]
        got = real(catalog, repo, ref, dir_path, *args)
        if dir_path == "a" and not raced:  # this mount's writer in ``where`` creates a file while ``a`` is read
            raced.append(dir_path)
            pfs.write_file(f"{MAIN}/{where}/new", b"2")
        return got

    monkeypatch.setattr(tree, "list_dir", racing)
    first = pfs.listdir(f"{MAIN}/a")
    assert raced == ["a"]
    lists: list[str] = []

    def counted(catalog, repo, ref, dir_path, *args):  # type: ignore[no-untyped-def]
        lists.append(dir_path)
        return real(catalog, repo, ref, dir_path, *args)

    monkeypatch.setattr(tree, "list_dir", counted)
    again = pfs.listdir(f"{MAIN}/a")
    if where == "b":
        assert first == again == ["first"]
        assert lists == [], lists
    else:
        assert again == ["first", "new"]
        assert lists == ["a"], lists
    assert pfs.read_file(f"{MAIN}/{where}/new") == b"2"


def test_a_crowds_folders_going_stale_together_are_listed_again_in_one_statement(
    fs_factory: Callable[..., FileSystem], app: App, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Folders made together go stale together (``KEEP_MAX`` after they were listed): the first one listed again
    reads the others' listings in the same statement (before: a statement each, 16 in the crowd's window)."""
    from tests.fuse.test_core import statements

    clock = Clock()
    fs, pfs = mount(fs_factory, monkeypatch, clock)
    AHEAD_S = tree.AHEAD_S  # noqa: N806
    folders = [f"d{i}" for i in range(4)]
    for d in folders:
        pfs.mkdir(f"{MAIN}/{d}")
        pfs.write_file(f"{MAIN}/{d}/warm", b"w")
    app.catalog.put(REPO, "main", "d3/theirs", b"t")  # another process's file: the listing read ahead shows it
    clock.t += tree.KEEP_MAX - AHEAD_S / 2  # within AHEAD_S of their KEEP_MAX: d0 goes first, the rest with it
    pfs.listdir(f"{MAIN}")
    clock.t += AHEAD_S  # d0 is due now
    with statements(app) as seen:
        for d in folders:
            pfs.write_file(f"{MAIN}/{d}/next", b"n")
    scans = [s for s in seen if s.startswith("SELECT 0, commit_id") and "lm_staging" in s]
    assert len(scans) == 1, seen
    assert fs.metrics.counter("listings_read_ahead") == 3
    for d in folders:
        assert pfs.listdir(f"{MAIN}/{d}") == (["next", "theirs", "warm"] if d == "d3" else ["next", "warm"])
