"""The catalog's key rule in the mount (issue 23 items 4 and 9).

A name that is not UTF-8 text is refused (EINVAL) by every call that makes a
key; a key stored before the rule is still listed as is and can be renamed to a
valid name or removed.  Keys under the control directory's name, written through
S3 or the API, are hidden and counted in ``.lakefs/status``.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable

import pytest

from lakemount.app import App
from lakemount.catalog.catalog import encode_path
from lakemount.catalog.model import FILE_MODE, Entry
from tests.fuse.conftest import REPO
from tests.fuse.pathfs import PathFS

MAIN = f"/{REPO}/main"
BAD = b"bad\xffname".decode("utf-8", "surrogateescape")


def _errno(call: Callable[[], object]) -> int:
    with pytest.raises(OSError) as info:
        call()
    return info.value.errno or 0


def plant(app: App, path: str, data: bytes = b"old") -> None:
    """Stage a key below the catalog's rule, as an older lakemount did (graveler directly)."""
    info = app.catalog.write_data(REPO, data)
    entry = Entry(info.address, info.size, info.etag, 1, "", (), FILE_MODE)
    app.catalog.graveler.set(REPO, "main", encode_path(path), entry.value())


def test_item4_mount_refuses_names_that_are_not_utf8(pfs: PathFS, app: App) -> None:
    pfs.write_file(f"{MAIN}/good.txt", b"g")
    pfs.mkdir(f"{MAIN}/d")
    assert _errno(lambda: pfs.write_file(f"{MAIN}/{BAD}.txt", b"x")) == errno.EINVAL
    assert _errno(lambda: pfs.mkdir(f"{MAIN}/{BAD}")) == errno.EINVAL
    assert _errno(lambda: pfs.symlink("good.txt", f"{MAIN}/{BAD}")) == errno.EINVAL
    assert _errno(lambda: pfs.rename(f"{MAIN}/good.txt", f"{MAIN}/d/{BAD}")) == errno.EINVAL
    assert _errno(lambda: pfs.open(f"{MAIN}/{BAD}2", os.O_CREAT | os.O_WRONLY)) == errno.EINVAL
    ino = pfs.ino(f"{MAIN}/good.txt")
    assert _errno(lambda: pfs._call(lambda: pfs.fs.setxattr(ino, b"user.bad\xff", b"v"))) == errno.EINVAL
    assert pfs.read_file(f"{MAIN}/good.txt") == b"g"  # the refused rename left the source alone
    assert sorted(p.path for p in app.catalog.list(REPO, "main")) == ["d/", "good.txt"]


def test_item4_mount_shows_an_old_bad_key_and_lets_it_be_fixed(pfs: PathFS, app: App) -> None:
    plant(app, f"x/{BAD}.txt")
    plant(app, f"y/{BAD}.txt")
    assert pfs.listdir(f"{MAIN}/x") == [f"{BAD}.txt"]
    assert pfs.read_file(f"{MAIN}/x/{BAD}.txt") == b"old"
    pfs.rename(f"{MAIN}/x/{BAD}.txt", f"{MAIN}/x/fixed.txt")  # renaming it away is allowed
    pfs.unlink(f"{MAIN}/y/{BAD}.txt")  # and so is removing it
    assert sorted(p.path for p in app.catalog.list(REPO, "main")) == ["x/fixed.txt", "y/"]
    status = json.loads(pfs.read_file(f"{MAIN}/.lakefs/status"))
    assert status["hidden"]["count"] == 0


def test_item9_keys_under_the_control_directory_are_counted_as_hidden(pfs: PathFS, app: App) -> None:
    # What `aws s3 cp x s3://repo/main/.lakefs/commit` and an API upload to `.lakefs` stage.
    app.catalog.put(REPO, "main", ".lakefs/commit", b"not a commit")
    app.catalog.put(REPO, "main", ".lakefs", b"a file named like the control directory")
    app.catalog.put(REPO, "main", "sub/.lakefs/x", b"shown: only the root's name is reserved")
    assert pfs.read_file(f"{MAIN}/sub/.lakefs/x").startswith(b"shown")
    assert b"not a commit" not in pfs.read_file(f"{MAIN}/.lakefs/commit")
    status = json.loads(pfs.read_file(f"{MAIN}/.lakefs/status"))
    assert status["hidden"]["count"] == 2 and status["hidden"]["complete"] is True
    assert sorted(status["hidden"]["examples"]) == [".lakefs", ".lakefs/commit"]
    assert {c["path"] for c in status["changes"]} >= {".lakefs", ".lakefs/commit"}


def test_item4_status_shows_an_old_bad_key_printable(pfs: PathFS, app: App) -> None:
    plant(app, f"a/{BAD}/../b")  # hidden (a '..' segment) and not UTF-8
    raw = pfs.read_file(f"{MAIN}/.lakefs/status")
    raw.decode("utf-8")
    status = json.loads(raw)
    assert status["hidden"]["examples"] == ["a/bad\\xffname/../b"]
