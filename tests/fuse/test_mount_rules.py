"""Repository rules through a real mount: branch protection (EPERM) and, below, pre-hooks rejecting commits."""

from __future__ import annotations

import errno
import os

from lakemount.app import App
from lakemount.fuse.control import RESET_ALL
from tests.fuse.conftest import REPO
from tests.fuse.mounting import needs_fuse
from tests.fuse.test_mount import MountFactory, oserror, sh, write_control

pytestmark = needs_fuse  # the mounts fixture is tests/fuse/conftest.py's


def test_a_protected_branch_refuses_writes_but_takes_merges(app: App, mounts: MountFactory) -> None:
    app.catalog.put(REPO, "main", "kept.txt", b"kept\n")
    app.catalog.commit(REPO, "main", "seed")
    app.catalog.create_branch(REPO, "dev", "main")
    app.catalog.protection.add(REPO, "main")
    m = mounts()
    main, dev = f"{m.mountpoint}/{REPO}/main", f"{m.mountpoint}/{REPO}/dev"
    assert open(f"{main}/kept.txt").read() == "kept\n"  # reads are fine
    assert oserror(lambda: open(f"{main}/new.txt", "w")) == errno.EPERM
    assert oserror(lambda: open(f"{main}/kept.txt", "a")) == errno.EPERM
    assert oserror(lambda: os.unlink(f"{main}/kept.txt")) == errno.EPERM
    assert oserror(lambda: os.mkdir(f"{main}/d")) == errno.EPERM
    assert oserror(lambda: os.rename(f"{main}/kept.txt", f"{main}/moved.txt")) == errno.EPERM
    assert oserror(lambda: os.chmod(f"{main}/kept.txt", 0o600)) == errno.EPERM
    assert oserror(lambda: os.setxattr(f"{main}/kept.txt", "user.k", b"v")) == errno.EPERM
    proc = sh(f"echo x > {main}/shell.txt", check=False)
    assert proc.returncode != 0 and "not permitted" in proc.stderr
    assert oserror(lambda: write_control(f"{main}/.lakefs/commit", "direct")) == errno.EPERM
    assert "protected" in open(f"{main}/.lakefs/error").read()
    assert oserror(lambda: write_control(f"{main}/.lakefs/reset", RESET_ALL)) == errno.EPERM
    assert sorted(os.listdir(main)) == [".lakefs", "kept.txt"]
    # The way in: write on dev, commit, merge into main through its control file.
    sh(f"echo fresh > {dev}/fresh.txt")
    write_control(f"{dev}/.lakefs/commit", "on dev")
    write_control(f"{main}/.lakefs/merge", "dev")
    assert open(f"{main}/fresh.txt").read() == "fresh\n"
    assert app.catalog.stat(REPO, "main", "fresh.txt").size == 6


def one_write(path: str, data: bytes) -> None:
    """One write(2) call (a buffered file retries a failed flush when it is collected: a second command)."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


GUARD = """name: guard
on:
  pre-commit: {branches: [main]}
hooks:
  - id: csv_only
    type: lakemount_check
    properties: {formats: [csv]}
"""


def test_a_pre_commit_hook_fails_the_control_write_with_its_reason(app: App, mounts: MountFactory) -> None:
    m = mounts()
    main = f"{m.mountpoint}/{REPO}/main"
    os.makedirs(f"{main}/_lakefs_actions")
    with open(f"{main}/_lakefs_actions/guard.yaml", "w") as f:
        f.write(GUARD)
    sh(f"printf 'a,b\\n1,2\\n' > {main}/ok.csv && printf 'not csv' > {main}/notes.txt")
    head = open(f"{main}/.lakefs/head").read()
    assert oserror(lambda: one_write(f"{main}/.lakefs/commit", b"try")) == errno.EPERM
    error = open(f"{main}/.lakefs/error").read()
    assert "commit: pre-commit rejected by hook guard/csv_only: 1 path(s) not of formats csv: notes.txt" in error
    assert open(f"{main}/.lakefs/head").read() == head
    assert open(f"{main}/notes.txt").read() == "not csv"  # nothing lost
    os.unlink(f"{main}/notes.txt")
    write_control(f"{main}/.lakefs/commit", "csv only")
    assert open(f"{main}/.lakefs/head").read() != head
    assert [r.status for r in app.catalog.actions.store.list_runs(REPO)] == ["completed", "failed"]
