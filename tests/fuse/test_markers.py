"""Directory markers only while a directory is empty (issue 23 item 6).

A marker ``dir/`` keeps an empty directory; once something is made inside it,
the marker goes in the same staging change (as Hadoop S3A deletes its parent
markers), so object-store readers never list a ``dir/`` object beside a
directory's files.  Removing the last child puts a marker back, so empty
directories still persist; a marker that records a mode, owner or xattrs of
its own stays.
"""

from __future__ import annotations

import os

from lakemount.app import App
from tests.fuse.conftest import REPO
from tests.fuse.pathfs import PathFS

MAIN = f"/{REPO}/main"


def keys(app: App) -> list[str]:
    return [item.path for item in app.catalog.list(REPO, "main")]


def test_item6_markers_go_when_a_directory_gets_a_child_and_come_back_when_it_is_empty(pfs: PathFS, app: App) -> None:
    pfs.mkdir(f"{MAIN}/tables")
    assert keys(app) == ["tables/"]
    pfs.mkdir(f"{MAIN}/tables/ds")
    pfs.mkdir(f"{MAIN}/tables/ds/p=0")
    assert keys(app) == ["tables/ds/p=0/"]
    pfs.write_file(f"{MAIN}/tables/ds/p=0/part-0.parquet", b"x")
    pfs.symlink("part-0.parquet", f"{MAIN}/tables/ds/p=0/latest")
    assert keys(app) == ["tables/ds/p=0/latest", "tables/ds/p=0/part-0.parquet"]
    assert pfs.listdir(f"{MAIN}/tables") == ["ds"] and pfs.listdir(f"{MAIN}/tables/ds") == ["p=0"]
    # A rename into a directory with a marker removes it too; the emptied source gets one back.
    pfs.mkdir(f"{MAIN}/other")
    pfs.rename(f"{MAIN}/tables/ds/p=0/latest", f"{MAIN}/other/latest")
    assert keys(app) == ["other/latest", "tables/ds/p=0/part-0.parquet"]
    pfs.unlink(f"{MAIN}/tables/ds/p=0/part-0.parquet")
    assert keys(app) == ["other/latest", "tables/ds/p=0/"]  # empty directories still persist
    pfs.write_file(f"{MAIN}/tables/ds/p=0/again", b"y")  # and lose the marker again
    assert keys(app) == ["other/latest", "tables/ds/p=0/again"]
    pfs.unlink(f"{MAIN}/tables/ds/p=0/again")
    pfs.rmdir(f"{MAIN}/tables/ds/p=0")
    assert keys(app) == ["other/latest", "tables/ds/"]
    assert pfs.listdir(f"{MAIN}/tables") == ["ds"] and pfs.listdir(f"{MAIN}/tables/ds") == []


def test_item6_a_marker_that_records_more_than_an_implicit_directory_stays(pfs: PathFS, app: App) -> None:
    pfs.mkdir(f"{MAIN}/private", 0o700)
    pfs.write_file(f"{MAIN}/private/f", b"x")
    pfs.mkdir(f"{MAIN}/tagged")
    pfs.setxattr(f"{MAIN}/tagged", "user.owner", b"ana")
    pfs.write_file(f"{MAIN}/tagged/f", b"x")
    assert keys(app) == ["private/", "private/f", "tagged/", "tagged/f"]
    assert pfs.lstat(f"{MAIN}/private").mode & 0o7777 == 0o700
    assert pfs.getxattr(f"{MAIN}/tagged", "user.owner") == b"ana"


def test_item6_a_second_mount_sees_the_directory_without_its_marker(pfs: PathFS, app: App, fs_factory: object) -> None:
    pfs.mkdir(f"{MAIN}/d")
    pfs.write_file(f"{MAIN}/d/f", b"x")
    other = PathFS(fs_factory(name="other"))  # type: ignore[operator]
    assert other.listdir(f"{MAIN}/d") == ["f"]
    assert os.path.basename("d") in other.listdir(MAIN)
