"""A listing of a directory this mount writes into outlives head_ttl while only this mount changed the branch
(lakemount/fuse/ownchanges.py), and is read again as soon as anyone else did."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from lakemount.app import App
from lakemount.fuse import tree
from lakemount.fuse.core import FileSystem
from lakemount.fuse.ownchanges import KEEP_MAX
from tests.fuse.conftest import REPO
from tests.fuse.pathfs import PathFS

MAIN = f"/{REPO}/main"


class Clock:
    """The mounts' monotonic clock, moved by the test (head_ttl passes without sleeping)."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def listed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The directories the mounts list from the catalog."""
    seen: list[str] = []
    real = tree.list_dir

    def counted(catalog, repo, ref, dir_path, *args):  # type: ignore[no-untyped-def]
        seen.append(dir_path)
        return real(catalog, repo, ref, dir_path, *args)

    monkeypatch.setattr(tree, "list_dir", counted)
    return seen


def mount(fs_factory: Callable[..., FileSystem], home: str, clock: Clock, monkeypatch: pytest.MonkeyPatch, *,
          writeback: bool, name: str = "core") -> FileSystem:
    extra: dict[str, object] = {"writeback": True, "journal_dir": os.path.join(home, f"journal-{name}")} if writeback else {}
    fs = fs_factory(name, head_ttl=1.0, **extra)
    monkeypatch.setattr(fs.state, "now", clock)
    return fs


def settle(fs: FileSystem) -> None:
    """Wait until the write-back pipeline staged everything journaled (no-op without write-back)."""
    if fs.state.writeback is not None:
        fs.state.writeback.drain(None)


@pytest.mark.parametrize("writeback", [False, True], ids=["no-writeback", "writeback"])
def test_a_directory_this_mount_writes_into_is_not_listed_again_after_head_ttl(
    fs_factory: Callable[..., FileSystem], home: str, clock: Clock, listed: list[str], monkeypatch: pytest.MonkeyPatch, writeback: bool,
) -> None:
    fs = mount(fs_factory, home, clock, monkeypatch, writeback=writeback)
    pfs = PathFS(fs)
    pfs.mkdir(f"{MAIN}/d")
    for i in range(3):
        pfs.write_file(f"{MAIN}/d/f{i}", b"x" * i)
    settle(fs)
    clock.t += 1.5  # the listing mkdir made (read from nothing) is read once, noting the branch's stamp
    assert pfs.listdir(f"{MAIN}/d") == ["f0", "f1", "f2"]
    assert listed == ["d"]
    listed.clear()
    for i in range(3, 6):  # head_ttl passes between the files, as during a long cp -r
        clock.t += 1.5
        pfs.write_file(f"{MAIN}/d/f{i}", b"x" * i)
        settle(fs)
    clock.t += 1.5
    assert pfs.listdir(f"{MAIN}/d") == [f"f{i}" for i in range(6)]
    assert not pfs.exists(f"{MAIN}/d/nothing")
    assert listed == [], f"listed again from the catalog: {listed}"
    assert fs.metrics.counter("listings_kept") > 0
    assert [pfs.lstat(f"{MAIN}/d/f{i}").size for i in range(6)] == list(range(6))


@pytest.mark.parametrize("writeback", [False, True], ids=["no-writeback", "writeback"])
def test_a_change_by_anyone_else_is_listed_after_head_ttl(
    fs_factory: Callable[..., FileSystem], home: str, app: App, clock: Clock, listed: list[str], monkeypatch: pytest.MonkeyPatch,
    writeback: bool,
) -> None:
    fs = mount(fs_factory, home, clock, monkeypatch, writeback=writeback)
    other = mount(fs_factory, home, clock, monkeypatch, writeback=False, name="other")
    pfs, opfs = PathFS(fs), PathFS(other)
    app.catalog.put(REPO, "main", "d/first", b"")
    pfs.write_file(f"{MAIN}/d/mine", b"1")
    settle(fs)
    assert pfs.listdir(f"{MAIN}/d") == ["first", "mine"]

    # Another process of the node (here: the test's own catalog call, recorded by no mount).
    app.catalog.put(REPO, "main", "d/theirs", b"22")
    clock.t += 1.5
    pfs.write_file(f"{MAIN}/d/mine2", b"1")  # this mount's change after it does not hide it
    settle(fs)
    listed.clear()
    assert pfs.listdir(f"{MAIN}/d") == ["first", "mine", "mine2", "theirs"]
    assert listed == ["d"], "the other process's change was not listed"
    assert pfs.read_file(f"{MAIN}/d/theirs") == b"22"

    # Another mount of the node writing into the same directory.
    opfs.write_file(f"{MAIN}/d/other-mount", b"333")
    clock.t += 1.5
    assert pfs.exists(f"{MAIN}/d/other-mount")
    assert "other-mount" in pfs.listdir(f"{MAIN}/d")

    # A branch's head that moved (a commit elsewhere) drops the listing whatever the stamps say.
    app.catalog.put(REPO, "main", "d/after-commit", b"4")
    app.graveler.commit(REPO, "main", "elsewhere")
    clock.t += 1.5
    assert "after-commit" in pfs.listdir(f"{MAIN}/d")


def test_a_kept_listing_is_read_again_keep_max_after_it_was_read(
    fs_factory: Callable[..., FileSystem], home: str, app: App, clock: Clock, listed: list[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where no stamp can tell (another home on the same SQLite), KEEP_MAX bounds how long a listing is kept."""
    fs = mount(fs_factory, home, clock, monkeypatch, writeback=False)
    pfs = PathFS(fs)
    app.catalog.put(REPO, "main", "d/f", b"1")
    assert pfs.listdir(f"{MAIN}/d") == ["f"]
    listed.clear()
    clock.t += KEEP_MAX / 2
    pfs.write_file(f"{MAIN}/d/g", b"2")
    assert pfs.listdir(f"{MAIN}/d") == ["f", "g"]
    assert listed == []
    clock.t += KEEP_MAX / 2 + 0.1
    assert pfs.listdir(f"{MAIN}/d") == ["f", "g"]
    assert listed == ["d"]
