"""A staging notice that names its directories drops what a mount caches of those directories only.

Another host's ``cp -r`` into one directory used to make every mount forget the whole branch at each
staging (issue 36: on three hosts of twelve writers, two lookups per file went to PostgreSQL); the
notice now carries the directories it changed (``metastore.notify.dirs_detail``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from lakemount.app import App
from lakemount.fuse.core import FileSystem
from lakemount.metastore.notify import STAGING, Change, dirs_detail
from tests.fuse.pathfs import PathFS
from tests.fuse.test_core import MAIN

READS = ("lookup_first", "first_record", "scan_records", "get_optional", "exists", "list", "probe")


@pytest.fixture
def reads(app: App, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The catalog reads of branch content meanwhile, by method name."""
    seen: list[str] = []
    for name in READS:
        if not hasattr(app.catalog, name):
            continue
        real = getattr(app.catalog, name)

        def spy(*args: object, _real: Callable[..., object] = real, _name: str = name, **kw: object) -> object:
            seen.append(_name)
            return _real(*args, **kw)

        monkeypatch.setattr(app.catalog, name, spy)
    yield seen


def _notice(app: App, fs: FileSystem, *paths: str, named: bool = True) -> None:
    """Stage ``paths`` as another host would, and deliver its notice to ``fs``."""
    for p in paths:
        app.catalog.put("repo", "main", p, b"from elsewhere " + p.encode())
    detail = dirs_detail([p.encode() for p in paths]) if named else ""
    fs.refs_changed([Change("another-host", STAGING, "repo", "main", detail)])


def test_a_notice_naming_one_directory_keeps_the_rest_of_the_branch_cached(
    fs_factory: Callable[..., FileSystem], app: App, reads: list[str],
) -> None:
    fs = fs_factory(head_ttl=3600.0)  # nothing expires during the test: only notices drop what is cached
    pfs = PathFS(fs)
    app.catalog.put("repo", "main", "keep/k.txt", b"kept")
    app.catalog.put("repo", "main", "busy/x", b"x")

    def warm() -> None:
        assert sorted(pfs.listdir(f"{MAIN}/keep")) == ["k.txt"]
        assert pfs.read_file(f"{MAIN}/keep/k.txt") == b"kept"
        assert not pfs.exists(f"{MAIN}/keep/absent")
        assert not pfs.exists(f"{MAIN}/fresh")

    warm()
    assert sorted(pfs.listdir(f"{MAIN}/busy")) == ["x"]
    reads.clear()
    warm()
    assert reads == []  # all from memory

    _notice(app, fs, "busy/new")
    reads.clear()
    warm()
    assert reads == []  # nothing of keep/ (nor the absent names elsewhere) was dropped
    assert sorted(pfs.listdir(f"{MAIN}/busy")) == ["new", "x"]  # busy/ was
    assert reads != []

    _notice(app, fs, "fresh/dir/f")  # a directory new to the branch: the listings above it show it
    assert pfs.exists(f"{MAIN}/fresh") and "fresh" in pfs.listdir(MAIN)
    assert pfs.read_file(f"{MAIN}/fresh/dir/f") == b"from elsewhere fresh/dir/f"


def test_a_notice_naming_no_directory_drops_the_whole_branch(
    fs_factory: Callable[..., FileSystem], app: App, reads: list[str],
) -> None:
    fs = fs_factory(head_ttl=3600.0)
    pfs = PathFS(fs)
    app.catalog.put("repo", "main", "keep/k.txt", b"kept")
    assert pfs.read_file(f"{MAIN}/keep/k.txt") == b"kept"
    assert sorted(pfs.listdir(f"{MAIN}/keep")) == ["k.txt"]
    _notice(app, fs, "busy/new", named=False)  # the LSM backend's notices, a partial reset, a key no path shows
    reads.clear()
    assert sorted(pfs.listdir(f"{MAIN}/keep")) == ["k.txt"]
    assert reads != []  # asked again


def test_the_detail_names_the_directories_or_none() -> None:
    assert dirs_detail([b"a/b/c", b"a/b/", b"x"]) == "dirs\x1f\x1fa\x1fa/b"
    assert dirs_detail([b"/odd", b"a"]) == ""  # an S3 key the mount shows under no such directory
    assert dirs_detail([f"d{i}/f".encode() for i in range(40)]) == ""  # too many: the whole branch
    assert dirs_detail([b"\xff"]) == ""


def test_an_overwrite_in_a_named_directory_is_seen(fs_factory: Callable[..., FileSystem], app: App) -> None:
    fs = fs_factory(head_ttl=3600.0)
    pfs = PathFS(fs)
    app.catalog.put("repo", "main", "busy/x", b"old")
    app.catalog.put("repo", "main", "keep/k.txt", b"kept")
    assert pfs.read_file(f"{MAIN}/busy/x") == b"old"
    assert pfs.read_file(f"{MAIN}/keep/k.txt") == b"kept"
    _notice(app, fs, "busy/x")
    assert pfs.read_file(f"{MAIN}/busy/x") == b"from elsewhere busy/x"
