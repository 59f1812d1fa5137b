"""Hard links in the filesystem core (no kernel): names, inodes, link counts, writes, errnos, versions."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable

import pytest

from lakemount.app import App
from lakemount.catalog.links import LINK_MAX, group_of, members
from lakemount.fuse.core import FileSystem
from lakemount.fuse.values import SetAttr
from tests.fuse.conftest import REPO
from tests.fuse.pathfs import PathFS
from tests.fuse.test_control import control, control_errno
from tests.fuse.test_core import MAIN, errno_of_call, staged


def test_a_link_is_a_second_name_with_the_same_inode_and_data(pfs: PathFS, app: App) -> None:
    pfs.write_file(f"{MAIN}/a", b"hello")
    attr = pfs.link(f"{MAIN}/a", f"{MAIN}/b")
    a, b = pfs.lstat(f"{MAIN}/a"), pfs.lstat(f"{MAIN}/b")
    assert attr.ino == a.ino == b.ino
    assert a.nlink == b.nlink == attr.nlink == 2
    assert pfs.read_file(f"{MAIN}/b") == b"hello"
    ea, eb = staged(app, "a"), staged(app, "b")
    assert ea == eb and ea is not None and ea.address == eb.address  # one stored object, identical entries
    group = group_of(ea)
    assert group is not None and group.names == ("a", "b")
    assert sorted(pfs.listdir(MAIN)) == [".lakefs", "a", "b"]
    app.graveler.commit(REPO, "main", "a")
    pfs.link(f"{MAIN}/a", f"{MAIN}/c")
    # every name's entry lists the group: a diff shows the new name added and the others changed, same ETag
    diff = {d.path: d for d in app.catalog.diff_uncommitted(REPO, "main")}
    assert {p: d.kind for p, d in diff.items()} == {"a": "changed", "b": "changed", "c": "added"}
    assert {d.right.etag for d in diff.values() if d.right is not None} == {ea.etag}


def test_a_write_through_one_name_shows_through_every_name(pfs: PathFS, app: App) -> None:
    pfs.mkdir(f"{MAIN}/d")
    pfs.write_file(f"{MAIN}/a", b"one")
    pfs.link(f"{MAIN}/a", f"{MAIN}/d/b")
    pfs.link(f"{MAIN}/d/b", f"{MAIN}/c")
    assert pfs.lstat(f"{MAIN}/a").nlink == 3
    with pfs.opened(f"{MAIN}/d/b", os.O_WRONLY | os.O_APPEND) as fh:
        pfs.pwrite(fh, 3, b" two")
        # read-your-writes through another name before close: one inode, one temp file
        assert pfs.read_file(f"{MAIN}/c") == b"one two"
    for name in ("a", "d/b", "c"):
        assert pfs.read_file(f"{MAIN}/{name}") == b"one two"
    entries = {staged(app, name) for name in ("a", "d/b", "c")}
    assert len(entries) == 1  # every name got the new entry in one transaction
    pfs.chmod(f"{MAIN}/c", 0o600)
    pfs.setxattr(f"{MAIN}/a", "user.k", b"v")
    for name in ("a", "d/b", "c"):
        assert stat.S_IMODE(pfs.lstat(f"{MAIN}/{name}").mode) == 0o600
        assert pfs.getxattr(f"{MAIN}/{name}", "user.k") == b"v"
    assert len({staged(app, name) for name in ("a", "d/b", "c")}) == 1


def test_unlink_of_one_name_keeps_the_others(pfs: PathFS, app: App) -> None:
    pfs.write_file(f"{MAIN}/a", b"data")
    pfs.link(f"{MAIN}/a", f"{MAIN}/b")
    pfs.link(f"{MAIN}/a", f"{MAIN}/c")
    ino = pfs.ino(f"{MAIN}/a")
    pfs.unlink(f"{MAIN}/a")
    assert not pfs.exists(f"{MAIN}/a") and staged(app, "a") is None
    assert pfs.lstat(f"{MAIN}/b").nlink == pfs.lstat(f"{MAIN}/c").nlink == 2
    assert pfs.lstat(f"{MAIN}/c").ino == ino
    group = group_of(staged(app, "b"))
    assert group is not None and group.names == ("b", "c")
    pfs.unlink(f"{MAIN}/c")
    b = pfs.lstat(f"{MAIN}/b")
    assert b.nlink == 1 and b.ino == ino
    assert staged(app, "b") is not None and staged(app, "b").link == ""  # one name left: an ordinary entry again
    assert pfs.read_file(f"{MAIN}/b") == b"data"


def test_unlink_of_an_open_linked_file_saves_under_the_names_left(pfs: PathFS) -> None:
    pfs.write_file(f"{MAIN}/a", b"x")
    pfs.link(f"{MAIN}/a", f"{MAIN}/b")
    with pfs.opened(f"{MAIN}/a", os.O_WRONLY) as fh:
        pfs.unlink(f"{MAIN}/a")
        pfs.pwrite(fh, 0, b"y")
    assert pfs.read_file(f"{MAIN}/b") == b"y"
    assert not pfs.exists(f"{MAIN}/a")


def test_rename_of_and_over_linked_names(pfs: PathFS, app: App) -> None:
    pfs.write_file(f"{MAIN}/a", b"A")
    pfs.link(f"{MAIN}/a", f"{MAIN}/b")
    ino = pfs.ino(f"{MAIN}/a")
    # two names of one file: rename(2) does nothing and both stay
    pfs.rename(f"{MAIN}/a", f"{MAIN}/b")
    assert pfs.exists(f"{MAIN}/a") and pfs.lstat(f"{MAIN}/b").nlink == 2
    pfs.rename(f"{MAIN}/a", f"{MAIN}/c")
    assert pfs.lstat(f"{MAIN}/c").ino == ino and pfs.lstat(f"{MAIN}/b").nlink == 2
    group = group_of(staged(app, "b"))
    assert group is not None and group.names == ("b", "c") and staged(app, "a") is None
    # renaming another file over a linked name takes that name out of its group
    pfs.write_file(f"{MAIN}/other", b"O")
    pfs.rename(f"{MAIN}/other", f"{MAIN}/b")
    assert pfs.read_file(f"{MAIN}/b") == b"O" and pfs.lstat(f"{MAIN}/b").nlink == 1
    assert pfs.lstat(f"{MAIN}/c").nlink == 1 and pfs.lstat(f"{MAIN}/c").ino == ino
    assert pfs.read_file(f"{MAIN}/c") == b"A"


def test_rename_of_a_directory_keeps_its_links(pfs: PathFS, app: App, fs_factory: Callable[..., FileSystem]) -> None:
    pfs.mkdir(f"{MAIN}/d")
    pfs.write_file(f"{MAIN}/d/f", b"F")
    pfs.link(f"{MAIN}/d/f", f"{MAIN}/outside")
    pfs.link(f"{MAIN}/d/f", f"{MAIN}/d/g")
    pfs.rename(f"{MAIN}/d", f"{MAIN}/e")
    group = group_of(staged(app, "outside"))
    assert group is not None and group.names == ("e/f", "e/g", "outside")
    assert staged(app, "e/f") == staged(app, "e/g") == staged(app, "outside")
    fresh = PathFS(fs_factory())  # another mount sees one inode with three names
    inos = {fresh.lstat(f"{MAIN}/{n}").ino for n in ("e/f", "e/g", "outside")}
    assert len(inos) == 1 and fresh.lstat(f"{MAIN}/e/g").nlink == 3
    pfs.write_file(f"{MAIN}/outside", b"G")
    assert pfs.read_file(f"{MAIN}/e/f") == b"G"


def test_link_errors(pfs: PathFS, fs: FileSystem, app: App) -> None:
    pfs.write_file(f"{MAIN}/a", b"")
    pfs.mkdir(f"{MAIN}/d")
    app.graveler.create_branch(REPO, "dev", "main")
    assert errno_of_call(lambda: pfs.link(f"{MAIN}/d", f"{MAIN}/d2")) == errno.EPERM
    assert errno_of_call(lambda: pfs.link(f"{MAIN}/a", f"{MAIN}/d")) == errno.EEXIST
    assert errno_of_call(lambda: pfs.link(f"{MAIN}/d", f"{MAIN}/d")) == errno.EEXIST  # a taken name first, as linkat(2)
    assert errno_of_call(lambda: pfs.link(f"{MAIN}/a", f"/{REPO}/dev/b")) == errno.EXDEV
    assert errno_of_call(lambda: pfs.link(f"{MAIN}/a", f"{MAIN}/{'n' * 256}")) == errno.ENAMETOOLONG
    assert errno_of_call(lambda: pfs.link(f"{MAIN}/.lakefs/head", f"{MAIN}/h")) == errno.EPERM
    app.graveler.commit(REPO, "main", "c1")
    assert errno_of_call(lambda: pfs.link(f"/{REPO}/main@/a", f"/{REPO}/main@/b")) == errno.EROFS
    assert errno_of_call(lambda: pfs.link(f"{MAIN}/a", f"/{REPO}/main@/b")) == errno.EXDEV


def test_link_count_past_the_maximum_is_emlink(pfs: PathFS) -> None:
    pfs.write_file(f"{MAIN}/f", b"")
    for i in range(1, LINK_MAX):
        pfs.link(f"{MAIN}/f", f"{MAIN}/l{i}")
    assert pfs.lstat(f"{MAIN}/f").nlink == LINK_MAX
    assert errno_of_call(lambda: pfs.link(f"{MAIN}/f", f"{MAIN}/one-more")) == errno.EMLINK


def test_links_of_special_files_and_symlinks(pfs: PathFS, fs: FileSystem) -> None:
    pfs.symlink("target", f"{MAIN}/s")
    pfs.link(f"{MAIN}/s", f"{MAIN}/s2")
    assert pfs.readlink(f"{MAIN}/s2") == "target" and pfs.lstat(f"{MAIN}/s").nlink == 2
    main = pfs.ino(MAIN)
    fs.mknod(main, b"fifo", stat.S_IFIFO | 0o644, 0, pfs.caller)
    pfs.link(f"{MAIN}/fifo", f"{MAIN}/fifo2")
    attr = pfs.lstat(f"{MAIN}/fifo2")
    assert stat.S_ISFIFO(attr.mode) and attr.nlink == 2 and attr.ino == pfs.ino(f"{MAIN}/fifo")


def test_a_commit_keeps_links_and_a_read_only_checkout_shows_them(pfs: PathFS, app: App, fs_factory: Callable[..., FileSystem]) -> None:
    pfs.write_file(f"{MAIN}/a", b"kept")
    pfs.link(f"{MAIN}/a", f"{MAIN}/b")
    cid = app.graveler.commit(REPO, "main", "linked").commit.id
    fresh = PathFS(fs_factory())
    for ref in (cid, "main@", "main"):
        a, b = fresh.lstat(f"/{REPO}/{ref}/a"), fresh.lstat(f"/{REPO}/{ref}/b")
        assert a.ino == b.ino and a.nlink == b.nlink == 2, ref
        assert fresh.read_file(f"/{REPO}/{ref}/b") == b"kept"


def test_a_name_overwritten_by_another_front_end_leaves_the_group(pfs: PathFS, app: App, fs_factory: Callable[..., FileSystem]) -> None:
    pfs.write_file(f"{MAIN}/a", b"shared")
    pfs.link(f"{MAIN}/a", f"{MAIN}/b")
    with app.catalog.writer(REPO) as w:  # as the gateway's PUT stores and stages an object
        w.write(b"new")
    app.catalog.put_entry(REPO, "main", "b", staged(app, "a")._replace(address=w.info.address, size=3, etag=w.info.etag, link=""))
    fresh = PathFS(fs_factory())
    a, b = fresh.lstat(f"{MAIN}/a"), fresh.lstat(f"{MAIN}/b")
    assert a.nlink == 1 and b.nlink == 1 and a.ino != b.ino
    assert fresh.read_file(f"{MAIN}/a") == b"shared" and fresh.read_file(f"{MAIN}/b") == b"new"


def test_merge_and_revert_carry_links_and_a_conflict_names_the_paths(pfs: PathFS, app: App) -> None:
    app.catalog.put(REPO, "main", "a", b"base")
    app.graveler.commit(REPO, "main", "base")
    app.graveler.create_branch(REPO, "dev", "main")
    dev = f"/{REPO}/dev"
    pfs.link(f"{dev}/a", f"{dev}/b")
    control(pfs, "commit", "link a to b", root=dev)
    control(pfs, "merge", "dev")
    a, b = pfs.lstat(f"{MAIN}/a"), pfs.lstat(f"{MAIN}/b")
    assert a.ino == b.ino and a.nlink == 2
    assert staged(app, "a") == staged(app, "b")
    # revert the merge: main has one name again, an ordinary entry
    control(pfs, "revert", "main --parent-number 1")
    assert not pfs.exists(f"{MAIN}/b")
    assert pfs.lstat(f"{MAIN}/a").nlink == 1 and staged(app, "a") is not None and staged(app, "a").link == ""
    # both sides change a linked name: the conflict names the paths
    pfs.write_file(f"{MAIN}/a", b"main side")
    control(pfs, "commit", "main edit")
    pfs.write_file(f"{dev}/b", b"dev side")  # through the link: a and b change on dev
    control(pfs, "commit", "dev edit", root=dev)
    assert control_errno(pfs, "merge", "dev") == errno.ECANCELED
    error = pfs.read_file(f"{MAIN}/.lakefs/error").decode()
    assert "conflict" in error and "\na\n" in error + "\n"
    control(pfs, "merge", "dev --strategy source-wins")
    assert pfs.read_file(f"{MAIN}/a") == pfs.read_file(f"{MAIN}/b") == b"dev side"
    assert pfs.lstat(f"{MAIN}/b").nlink == 2 and pfs.lstat(f"{MAIN}/a").ino == pfs.lstat(f"{MAIN}/b").ino


def test_with_write_back_a_linked_file_is_saved_under_every_name(app: App, home: str, fs_factory: Callable[..., FileSystem]) -> None:
    fs = fs_factory(head_ttl=0.2, writeback=True, journal_dir=os.path.join(home, "journal"))
    pfs = PathFS(fs)
    pfs.write_file(f"{MAIN}/a", b"journaled first")  # journaled, staged in the background
    pfs.link(f"{MAIN}/a", f"{MAIN}/b")  # waits for the journal: a is staged before its group is
    pfs.write_file(f"{MAIN}/b", b"through b")
    assert pfs.read_file(f"{MAIN}/a") == b"through b"
    a, b = staged(app, "a"), staged(app, "b")
    assert a == b and a is not None and app.catalog.read(app.catalog.repository(REPO), a) == b"through b"
    assert pfs.lstat(f"{MAIN}/a").nlink == 2


def test_with_write_back_a_save_after_another_mount_linked_the_file_reaches_every_name(
    pfs: PathFS, app: App, home: str, fs_factory: Callable[..., FileSystem],
) -> None:
    """Mount A writes back a file it knows with one name; mount B links it before A's journal is staged: the
    pipeline stages A's save on both names (one group, the new bytes), not on A's name alone; a file A made
    and journaled itself is staged in the batch, with nothing read."""
    pfs.write_file(f"{MAIN}/f", b"old bytes")
    fs = fs_factory(head_ttl=60, writeback=True, journal_dir=os.path.join(home, "journal"))
    a, b = PathFS(fs), PathFS(fs_factory(head_ttl=60))
    assert a.lstat(f"{MAIN}/f").nlink == 1
    with a.opened(f"{MAIN}/f", os.O_WRONLY | os.O_TRUNC) as fh:
        a.pwrite(fh, 0, b"written back by a")
        b.link(f"{MAIN}/f", f"{MAIN}/g")
    a.write_file(f"{MAIN}/new", b"made by a")
    assert fs.writeback is not None
    fs.writeback.drain(None)
    assert _whole_groups(app, fs_factory, ["f", "g"]) == {"f": 2, "g": 2}
    repo = app.catalog.repository(REPO)
    assert [app.catalog.read(repo, staged(app, n)) for n in ("f", "g", "new")] == [  # type: ignore[arg-type]
        b"written back by a", b"written back by a", b"made by a"]
    assert a.lstat(f"{MAIN}/g").nlink == 2 and a.read_file(f"{MAIN}/g") == b"written back by a"


def test_renames_of_renames_keep_every_group_whole(pfs: PathFS, app: App, fs_factory: Callable[..., FileSystem]) -> None:
    pfs.mkdir(f"{MAIN}/d")
    pfs.mkdir(f"{MAIN}/e")
    pfs.write_file(f"{MAIN}/d/f", b"F")
    pfs.link(f"{MAIN}/d/f", f"{MAIN}/e/g")
    pfs.link(f"{MAIN}/d/f", f"{MAIN}/d/h")
    pfs.rename(f"{MAIN}/d", f"{MAIN}/e/d")  # the group's directory moves into the one holding its other name
    pfs.rename(f"{MAIN}/e", f"{MAIN}/x")  # and that one moves: every name of the group moves with it
    pfs.rename(f"{MAIN}/x/d/h", f"{MAIN}/x/g2")
    names = ("x/d/f", "x/g", "x/g2")
    group = group_of(staged(app, "x/g"))
    assert group is not None and group.names == names
    assert len({staged(app, n) for n in names}) == 1
    assert [p for p in ("d/f", "d/h", "e/g", "e/d/f", "x/d/h") if staged(app, p) is not None] == []
    fresh = PathFS(fs_factory())
    assert len({fresh.lstat(f"{MAIN}/{n}").ino for n in names}) == 1 and fresh.lstat(f"{MAIN}/x/g").nlink == 3
    pfs.write_file(f"{MAIN}/x/g2", b"G")
    assert [pfs.read_file(f"{MAIN}/{n}") for n in names] == [b"G"] * 3
    repo = app.catalog.repository(REPO)
    assert [app.catalog.read(repo, staged(app, n)) for n in names] == [b"G"] * 3


def test_two_mounts_linking_one_file_at_once_keep_one_whole_group(
    pfs: PathFS, app: App, fs_factory: Callable[..., FileSystem],
) -> None:
    """Two mounts of the branch each add links to one file at the same time: every link either lands in the
    group or fails (never a name outside it, never a count that disagrees with the names), and a third
    mount sees one group whose every name reads the file."""
    import threading

    pfs.write_file(f"{MAIN}/f", b"shared")
    mounts = [PathFS(fs_factory(head_ttl=0.05)) for _ in range(2)]
    made: list[list[str]] = [[], []]
    failed: list[list[int]] = [[], []]
    start = threading.Barrier(2)

    def link_many(k: int) -> None:
        start.wait()
        for i in range(15):
            name = f"{MAIN}/l{k}_{i:02d}"
            try:
                mounts[k].link(f"{MAIN}/f", name)
                made[k].append(name)
            except OSError as exc:
                failed[k].append(exc.errno or 0)

    threads = [threading.Thread(target=link_many, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert made[0] and made[1], (made, failed)
    entry = staged(app, "f")
    assert entry is not None
    group = group_of(entry)
    assert group is not None
    names = sorted(n[len(MAIN) + 1:] for n in made[0] + made[1])
    assert sorted(group.names) == sorted(["f", *names]), (group.names, names, failed)
    third = PathFS(fs_factory(head_ttl=0.05))
    for name in ["f", *names]:
        assert third.read_file(f"{MAIN}/{name}") == b"shared"
        assert third.lstat(f"{MAIN}/{name}").nlink == len(group.names)
        assert group_of(staged(app, name)) == group  # type: ignore[arg-type]


def _whole_groups(app: App, fs_factory: Callable[..., FileSystem], names: list[str]) -> dict[str, int]:
    """Assert the names left of ``names`` form whole groups (a name's members, as every front end counts
    them, count it back) and that a fresh mount shows each name's ``st_nlink`` as its members and one
    ``st_ino`` per group; returns name -> link count (a lost link shows as a count too small)."""
    fresh = PathFS(fs_factory(head_ttl=0.05))
    counts: dict[str, int] = {}
    inodes: dict[tuple[str, ...], set[int]] = {}
    for name in names:
        entry = staged(app, name)
        if entry is None:
            assert not fresh.exists(f"{MAIN}/{name}"), name
            continue
        found = members(entry, name, lambda other: staged(app, other))
        for other in found:
            theirs = staged(app, other)
            assert theirs is not None and members(theirs, other, lambda n: staged(app, n)) == found, (name, other)
        attr = fresh.lstat(f"{MAIN}/{name}")
        assert attr.nlink == len(found), (name, attr.nlink, found)
        assert fresh.read_file(f"{MAIN}/{name}") == app.catalog.read(app.catalog.repository(REPO), entry)
        inodes.setdefault(found, set()).add(attr.ino)
        counts[name] = attr.nlink
    assert all(len(inos) == 1 for inos in inodes.values()), inodes
    return counts


def _stale_pair(pfs: PathFS, fs_factory: Callable[..., FileSystem], links: list[str]) -> tuple[PathFS, PathFS]:
    """File ``f`` with the names ``links`` too; mount A has read them all (and trusts them for a minute),
    mount B is another mount of the branch."""
    pfs.write_file(f"{MAIN}/f", b"one file")
    for name in links:
        pfs.link(f"{MAIN}/f", f"{MAIN}/{name}")
    a, b = PathFS(fs_factory(head_ttl=60)), PathFS(fs_factory(head_ttl=60))
    for name in ["f", *links]:
        assert a.lstat(f"{MAIN}/{name}").nlink == 1 + len(links)
        assert b.lstat(f"{MAIN}/{name}").nlink == 1 + len(links)
    return a, b


def test_unlink_in_one_mount_while_another_links_keeps_one_whole_group(
    pfs: PathFS, app: App, fs_factory: Callable[..., FileSystem],
) -> None:
    """Mount B links a new name to the file after mount A read its names; A's unlink of one of them then
    neither drops B's name from the group nor keeps a count that disagrees with the names."""
    a, b = _stale_pair(pfs, fs_factory, ["g"])
    b.link(f"{MAIN}/f", f"{MAIN}/h")
    a.unlink(f"{MAIN}/f")
    assert _whole_groups(app, fs_factory, ["f", "g", "h"]) == {"g": 2, "h": 2}
    assert group_of(staged(app, "g")).names == ("g", "h")  # type: ignore[union-attr]
    assert a.lstat(f"{MAIN}/g").nlink == 2 and a.read_file(f"{MAIN}/h") == b"one file"


def test_link_in_one_mount_after_another_unlinked_a_name_keeps_one_whole_group(
    pfs: PathFS, app: App, fs_factory: Callable[..., FileSystem],
) -> None:
    """The other order: B unlinks the name A's link starts from, after A read the names; A links through
    the file's inode, which keeps its other name."""
    a, b = _stale_pair(pfs, fs_factory, ["g"])
    b.unlink(f"{MAIN}/f")
    a.link(f"{MAIN}/g", f"{MAIN}/h")
    assert _whole_groups(app, fs_factory, ["f", "g", "h"]) == {"g": 2, "h": 2}


def test_unlinks_of_two_names_of_one_file_from_two_mounts_leave_the_third(
    pfs: PathFS, app: App, fs_factory: Callable[..., FileSystem],
) -> None:
    """A and B each unlink one name of a file of three after both read the names: one name is left, an
    ordinary file (neither unlink brings back the name the other removed)."""
    a, b = _stale_pair(pfs, fs_factory, ["g", "h"])
    b.unlink(f"{MAIN}/g")
    a.unlink(f"{MAIN}/f")
    assert _whole_groups(app, fs_factory, ["f", "g", "h"]) == {"h": 1}
    assert staged(app, "h").link == ""  # type: ignore[union-attr]
    assert errno_of_call(lambda: a.lstat(f"{MAIN}/g")) == errno.ENOENT and a.lstat(f"{MAIN}/h").nlink == 1


def test_rename_in_one_mount_while_another_links_keeps_one_whole_group(
    pfs: PathFS, app: App, fs_factory: Callable[..., FileSystem],
) -> None:
    """B links a new name after A read the names; A's rename of one name (and, after, A's rename of
    another file over one of them) keeps B's name in the group."""
    a, b = _stale_pair(pfs, fs_factory, ["g"])
    b.link(f"{MAIN}/f", f"{MAIN}/h")
    a.rename(f"{MAIN}/f", f"{MAIN}/f2")
    assert _whole_groups(app, fs_factory, ["f", "f2", "g", "h"]) == {"f2": 3, "g": 3, "h": 3}
    b.link(f"{MAIN}/g", f"{MAIN}/i")
    a.write_file(f"{MAIN}/x", b"other")
    a.rename(f"{MAIN}/x", f"{MAIN}/g")  # over a linked name: g leaves the group
    counts = _whole_groups(app, fs_factory, ["f2", "g", "h", "i"])
    assert counts == {"f2": 3, "g": 1, "h": 3, "i": 3}
    repo = app.catalog.repository(REPO)
    assert [app.catalog.read(repo, staged(app, n)) for n in ("g", "i")] == [b"other", b"one file"]  # type: ignore[arg-type]


def test_link_in_one_mount_after_another_renamed_a_name_keeps_one_whole_group(
    pfs: PathFS, app: App, fs_factory: Callable[..., FileSystem],
) -> None:
    """B renames a name of the file after A read the names; A's link then lists the new name, not the old."""
    a, b = _stale_pair(pfs, fs_factory, ["g"])
    b.rename(f"{MAIN}/f", f"{MAIN}/f2")
    a.link(f"{MAIN}/g", f"{MAIN}/h")
    assert _whole_groups(app, fs_factory, ["f", "f2", "g", "h"]) == {"f2": 3, "g": 3, "h": 3}


def test_a_write_in_one_mount_after_another_linked_the_file_shows_through_every_name(
    pfs: PathFS, app: App, fs_factory: Callable[..., FileSystem],
) -> None:
    """Mount A writes a file it knows with one name while mount B links it: A's close saves under both names
    (the link is not broken, the new name does not keep the old bytes); so does A's next write once the file
    is linked as A knows it and B adds a third name."""
    pfs.write_file(f"{MAIN}/f", b"old bytes")
    a, b = PathFS(fs_factory(head_ttl=60)), PathFS(fs_factory(head_ttl=60))
    assert a.lstat(f"{MAIN}/f").nlink == 1
    with a.opened(f"{MAIN}/f", os.O_WRONLY | os.O_TRUNC) as fh:
        a.pwrite(fh, 0, b"written by a")
        b.link(f"{MAIN}/f", f"{MAIN}/g")
    assert _whole_groups(app, fs_factory, ["f", "g"]) == {"f": 2, "g": 2}
    repo = app.catalog.repository(REPO)
    assert [app.catalog.read(repo, staged(app, n)) for n in ("f", "g")] == [b"written by a"] * 2  # type: ignore[arg-type]
    assert a.lstat(f"{MAIN}/f").nlink == 2
    with a.opened(f"{MAIN}/f", os.O_WRONLY | os.O_TRUNC) as fh:
        a.pwrite(fh, 0, b"again by a")
        b.link(f"{MAIN}/g", f"{MAIN}/h")
    assert _whole_groups(app, fs_factory, ["f", "g", "h"]) == {"f": 3, "g": 3, "h": 3}
    assert [app.catalog.read(repo, staged(app, n)) for n in ("f", "g", "h")] == [b"again by a"] * 3  # type: ignore[arg-type]


def test_attributes_changed_in_one_mount_after_another_linked_the_file_show_through_every_name(
    pfs: PathFS, app: App, fs_factory: Callable[..., FileSystem],
) -> None:
    """chmod, utimens and a user xattr through a name in mount A, after mount B linked the file A knows with
    one name (and then with two): each change stages every name's entry, the group stays whole."""
    pfs.write_file(f"{MAIN}/f", b"bytes")
    a, b = PathFS(fs_factory(head_ttl=60)), PathFS(fs_factory(head_ttl=60))
    assert a.lstat(f"{MAIN}/f").nlink == 1
    b.link(f"{MAIN}/f", f"{MAIN}/g")
    a.chmod(f"{MAIN}/f", 0o600)
    assert _whole_groups(app, fs_factory, ["f", "g"]) == {"f": 2, "g": 2}
    assert [stat.S_IMODE(staged(app, n).mode) for n in ("f", "g")] == [0o600, 0o600]  # type: ignore[union-attr]
    b.link(f"{MAIN}/f", f"{MAIN}/h")
    a.setxattr(f"{MAIN}/g", "user.origin", b"a")
    a.setattr(f"{MAIN}/f", SetAttr(mtime_ns=1_500_000_000 * 10**9))
    assert _whole_groups(app, fs_factory, ["f", "g", "h"]) == {"f": 3, "g": 3, "h": 3}
    for name in ("f", "g", "h"):
        entry = staged(app, name)
        assert entry is not None and entry.metadata == (("origin", "a"),) and entry.mtime_ns == 1_500_000_000 * 10**9
        assert stat.S_IMODE(entry.mode) == 0o600


def test_two_mounts_linking_renaming_and_unlinking_names_of_one_file_at_once_lose_no_change(
    pfs: PathFS, app: App, fs_factory: Callable[..., FileSystem],
) -> None:
    """Two mounts each link, rename and unlink names of their own (one file's names) at the same time: the
    file ends with exactly the names each mount's successful calls leave (none brought back, none lost), each
    counting them all; a call may only fail with EAGAIN (its compare-and-set lost too often)."""
    import threading

    pfs.write_file(f"{MAIN}/f", b"shared")
    mounts = [PathFS(fs_factory(head_ttl=0.05)) for _ in range(2)]
    alive: list[set[str]] = [set(), set()]
    failed: list[list[int]] = [[], []]
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def work(k: int) -> None:
        fs = mounts[k]
        start.wait()
        try:
            for i in range(12):
                name, moved = f"m{k}_{i:02d}", f"m{k}_{i:02d}r"
                steps = [("link", name), ("rename", name, moved)] + ([("unlink", moved)] if i % 3 == 0 else [])
                for step in steps:
                    try:
                        if step[0] == "link":
                            fs.link(f"{MAIN}/f", f"{MAIN}/{name}")
                            alive[k].add(name)
                        elif step[0] == "rename" and name in alive[k]:
                            fs.rename(f"{MAIN}/{name}", f"{MAIN}/{moved}")
                            alive[k].remove(name)
                            alive[k].add(moved)
                        elif step[0] == "unlink" and moved in alive[k]:
                            fs.unlink(f"{MAIN}/{moved}")
                            alive[k].remove(moved)
                    except OSError as exc:
                        if exc.errno != errno.EAGAIN:
                            raise
                        failed[k].append(exc.errno)
        except BaseException as exc:  # re-raised in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not any(t.is_alive() for t in threads), "a mount's calls never finished"
    if errors:
        raise errors[0]
    want = sorted({"f", *alive[0], *alive[1]})
    assert alive[0] and alive[1], failed
    entry = staged(app, "f")
    assert entry is not None
    assert members(entry, "f", lambda n: staged(app, n)) == tuple(want), (failed, want)
    everything = ["f", *(f"m{k}_{i:02d}{r}" for k in range(2) for i in range(12) for r in ("", "r"))]
    counts = _whole_groups(app, fs_factory, everything)
    assert counts == {name: len(want) for name in want}


def test_a_rename_past_the_pending_moves_limit_stages_per_key_and_keeps_every_group(
    pfs: PathFS, app: App, fs_factory: Callable[..., FileSystem], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With ``MAX_MOVES`` directory renames pending, the next stages a tombstone and an entry per key, read
    through the moves still pending: a file and its links moved by earlier renames keep their names and
    groups, and the commit holds the same tree."""
    from lakemount.fuse import namespace
    from lakemount.graveler.moves import MAX_MOVES, move_of

    monkeypatch.setattr(namespace, "PER_KEY_RENAME", 0)  # every directory a move record (these are small)

    pfs.mkdir(f"{MAIN}/d0")
    pfs.mkdir(f"{MAIN}/out")
    pfs.write_file(f"{MAIN}/d0/f", b"moved many times")
    pfs.link(f"{MAIN}/d0/f", f"{MAIN}/out/g")
    pfs.link(f"{MAIN}/d0/f", f"{MAIN}/d0/h")
    for i in range(MAX_MOVES):
        pfs.rename(f"{MAIN}/d{i}", f"{MAIN}/d{i + 1}")
    tokens = app.catalog.graveler.get_branch(REPO, "main").tokens
    assert sum(1 for t in tokens if move_of(t)) == MAX_MOVES
    last = f"d{MAX_MOVES}"
    pfs.rename(f"{MAIN}/{last}", f"{MAIN}/z")  # one more: per key
    tokens = app.catalog.graveler.get_branch(REPO, "main").tokens
    assert sum(1 for t in tokens if move_of(t)) == MAX_MOVES  # no move record added
    names = ["z/f", "z/h", "out/g"]
    assert _whole_groups(app, fs_factory, [*names, f"{last}/f", f"{last}/h"]) == dict.fromkeys(names, 3)
    assert group_of(staged(app, "out/g")).names == ("out/g", "z/f", "z/h")  # type: ignore[union-attr]
    app.graveler.commit(REPO, "main", "after the renames")
    committed = [app.catalog.get_optional(REPO, "main@", n) for n in names]
    assert committed[0] is not None and committed == [committed[0]] * 3
    assert sorted(pfs.listdir(MAIN)) == [".lakefs", "out", "z"]


def test_a_directory_renamed_per_key_relists_its_linked_files_other_names(pfs: PathFS, app: App) -> None:
    """A small directory is renamed per key (``PER_KEY_RENAME``), rewriting the group entry of a file linked
    from outside it: the listing this mount holds of the outside name's directory shows the new entry, so a
    lookup there keeps the file's new names and inode instead of handing it back its old ones (the model test
    met this when a loaded machine had read the root's listing before the rename)."""
    pfs.mkdir(f"{MAIN}/d")
    pfs.write_file(f"{MAIN}/d/f", b"linked")
    pfs.link(f"{MAIN}/d/f", f"{MAIN}/g")
    assert sorted(pfs.listdir(MAIN)) == [".lakefs", "d", "g"]  # the root's listing, cached with g's old entry
    pfs.rename(f"{MAIN}/d", f"{MAIN}/e")
    assert sorted(pfs.listdir(MAIN)) == [".lakefs", "e", "g"]
    g, f = pfs.lstat(f"{MAIN}/g"), pfs.lstat(f"{MAIN}/e/f")
    assert g.ino == f.ino and g.nlink == f.nlink == 2
    assert pfs.read_file(f"{MAIN}/e/f") == b"linked"
    entry = staged(app, "g")
    group = group_of(entry) if entry is not None else None
    assert group is not None and group.names == ("e/f", "g")
    assert members(entry, "g", lambda n: staged(app, n)) == ("e/f", "g")
    pfs.unlink(f"{MAIN}/g")  # the group's names as the mount holds them: e/f is the one left
    assert pfs.lstat(f"{MAIN}/e/f").nlink == 1
    assert pfs.read_file(f"{MAIN}/e/f") == b"linked"
