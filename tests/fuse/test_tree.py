"""``Tree.listing``: a directory's listing read while the mount changes it is kept, with those changes.

A mount with several writers changes its scope between any listing's start and end; a listing that
no change of the scope raced was the only one kept, so a busy mount kept almost none and listed the
directory again for each new name (issue 36: a branch scan per file on three hosts of writers).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from lakemount.app import App
from lakemount.fuse import tree
from lakemount.fuse.core import FileSystem
from lakemount.metastore.notify import STAGING, Change, dirs_detail
from tests.fuse.pathfs import PathFS
from tests.fuse.test_core import MAIN


def _listed_then(monkeypatch: pytest.MonkeyPatch, path: str, meanwhile: Callable[[], None]) -> list[str]:
    """Make the next read of ``path``'s listing run ``meanwhile`` after the catalog answered (before the
    listing is kept); the paths listed from now on, in order."""
    listed: list[str] = []
    real = tree.list_dir
    pending = [meanwhile]

    def spy(catalog: Any, repo: str, ref: Any, dir_path: str) -> Any:
        listed.append(dir_path)
        out = real(catalog, repo, ref, dir_path)
        if dir_path == path and pending:
            pending.pop()()
        return out

    monkeypatch.setattr(tree, "list_dir", spy)
    return listed


def _write(pfs: PathFS, path: str, data: bytes) -> None:
    with pfs.opened(path, 0o1 | 0o100) as fh:  # O_WRONLY | O_CREAT
        pfs.pwrite(fh, 0, data)


def test_a_listing_read_while_this_mount_changes_the_directory_is_kept_with_the_change(
    fs_factory: Callable[..., FileSystem], app: App, monkeypatch: pytest.MonkeyPatch,
) -> None:
    fs = fs_factory(head_ttl=3600.0)  # nothing expires during the test
    pfs = PathFS(fs)
    app.catalog.put("repo", "main", "d/a", b"a")
    app.catalog.put("repo", "main", "d/gone", b"g")
    assert pfs.exists(f"{MAIN}/d/gone")
    versions: list[int] = []

    def change() -> None:
        node = fs.state.table.by_key((("repo", "main"), "d"))
        assert node is not None and node.scope is not None
        versions.append(node.scope.version)
        _write(pfs, f"{MAIN}/d/new", b"new")
        pfs.unlink(f"{MAIN}/d/gone")
        versions.append(node.scope.version)

    listed = _listed_then(monkeypatch, "d", change)
    assert sorted(pfs.listdir(f"{MAIN}/d")) == ["a", "new"]  # the catalog's answer had gone, not new
    assert versions[1] > versions[0], "no change of the scope raced the read (what the old rule refused)"
    assert listed == ["d"]
    assert sorted(pfs.listdir(f"{MAIN}/d")) == ["a", "new"]
    assert not pfs.exists(f"{MAIN}/d/gone") and pfs.read_file(f"{MAIN}/d/new") == b"new"
    assert listed == ["d"], "the listing was not kept: the directory was listed again"


def test_a_listing_read_while_a_notice_names_the_directory_is_not_kept(
    fs_factory: Callable[..., FileSystem], app: App, monkeypatch: pytest.MonkeyPatch,
) -> None:
    fs = fs_factory(head_ttl=3600.0)
    pfs = PathFS(fs)
    app.catalog.put("repo", "main", "d/a", b"a")
    assert pfs.exists(f"{MAIN}/d")

    def elsewhere() -> None:  # another host stages d/b, and its notice arrives during the read
        app.catalog.put("repo", "main", "d/b", b"b")
        fs.refs_changed([Change("another-host", STAGING, "repo", "main", dirs_detail([b"d/b"]))])

    listed = _listed_then(monkeypatch, "d", elsewhere)
    assert sorted(pfs.listdir(f"{MAIN}/d")) == ["a"]  # what the read saw
    assert sorted(pfs.listdir(f"{MAIN}/d")) == ["a", "b"]  # not kept: listed again
    assert listed == ["d", "d"]
