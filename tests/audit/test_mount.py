"""The mount's records: one per open handle (bytes at release) with uid, process and pid; one per listing."""

from __future__ import annotations

import errno
import os
import pwd
import subprocess
from pathlib import Path

import pytest

from lakemount.app import App
from lakemount.audit.table import Filter
from lakemount.config import load
from lakemount.fuse.core import Caller
from lakemount.fuse.runner import build_filesystem, mount_options
from tests.fuse.mounting import HAVE_FUSE, start, stop
from tests.fuse.pathfs import PathFS


def _comm() -> str:
    with open(f"/proc/{os.getpid()}/comm") as f:
        return f.read().strip()


def test_a_read_and_a_write_through_the_mount_are_one_record_per_handle(tmp_path: Path) -> None:
    app = App(load(None, env={"LAKEMOUNT_HOME": str(tmp_path / "home")}))
    cat = app.catalog
    cat.create_repository("mnt")
    cat.put("mnt", "main", "d/in.txt", b"0123456789")
    head = cat.commit("mnt", "main", "seed", committer="t").commit.id
    fs = build_filesystem(app, mount_options(app, ref=None, head_ttl=0.0))
    try:
        me = Caller(os.getuid(), os.getgid(), os.getpid())
        pfs = PathFS(fs, me)
        with pfs.opened("mnt/main/d/in.txt") as fh:  # four read calls, one record
            for off in range(0, 10, 3):
                pfs.pread(fh, off, 3)
        pfs.write_file("mnt/main/d/out.txt", b"abcdef")
        assert sorted(pfs.listdir("mnt/main/d")) == ["in.txt", "out.txt"]
        with pfs.opened("mnt/main/.lakefs/commit", os.O_WRONLY | os.O_TRUNC) as fh:  # a commit through the mount
            pfs.pwrite(fh, 0, b"from the mount\n")
        assert app.audit is not None
        app.audit.flush()
        recs = list(cat.audit_records("mnt", Filter()))
    finally:
        fs.close()
        if app.audit is not None:
            app.audit.close()
    by_op = {r.op: r for r in recs if r.frontend == "mount"}
    assert set(by_op) == {"read", "write", "list", "commit"}, recs
    user = pwd.getpwuid(os.getuid()).pw_name
    for r in by_op.values():
        assert (r.user, r.ref) == (user, "main")
        if r.op != "commit":
            assert (r.uid, r.pid, r.process) == (os.getuid(), os.getpid(), _comm())
    assert by_op["commit"].commit == cat.get_branch("mnt", "main").commit_id != head
    assert (by_op["read"].path, by_op["read"].bytes, by_op["read"].commit) == ("d/in.txt", 10, head)
    assert (by_op["write"].path, by_op["write"].bytes) == ("d/out.txt", 6)
    assert by_op["list"].path == "d/"
    assert len([r for r in recs if r.op == "read"]) == 1


def test_a_refused_open_and_a_refused_commit_through_the_mount_are_records_with_their_status(tmp_path: Path) -> None:
    app = App(load(None, env={"LAKEMOUNT_HOME": str(tmp_path / "home")}))
    cat = app.catalog
    cat.create_repository("mfail")
    cat.put("mfail", "main", "f.txt", b"123")
    head = cat.commit("mfail", "main", "seed", committer="t").commit.id
    cat.create_tag("mfail", "v1", "main")
    cat.protection.add("mfail", "main")
    fs = build_filesystem(app, mount_options(app, ref=None, head_ttl=0.0))
    try:
        pfs = PathFS(fs, Caller(os.getuid(), os.getgid(), os.getpid()))
        with pytest.raises(OSError) as tag_write:
            pfs.open("mfail/v1/f.txt", os.O_WRONLY)
        assert tag_write.value.errno == errno.EROFS
        with pfs.opened("mfail/main/.lakefs/commit", os.O_WRONLY | os.O_TRUNC) as fh, pytest.raises(OSError) as refused:
            pfs.pwrite(fh, 0, b"not allowed\n")
        assert refused.value.errno == errno.EPERM
        assert app.audit is not None
        app.audit.flush()
        recs = [r for r in cat.audit_records("mfail", Filter()) if r.frontend == "mount"]
    finally:
        fs.close()
        if app.audit is not None:
            app.audit.close()
    got = [(r.op, r.ref, r.path, r.status, r.commit, r.pid) for r in recs]
    assert got == [("write", "v1", "f.txt", 403, head, os.getpid()), ("commit", "main", "", 403, head, os.getpid())]
    assert cat.get_branch("mfail", "main").commit_id == head


def test_the_mount_stats_show_the_audit_counters(tmp_path: Path) -> None:
    app = App(load(None, env={"LAKEMOUNT_HOME": str(tmp_path / "home")}))
    app.catalog.create_repository("sta")
    fs = build_filesystem(app, mount_options(app, ref=None, head_ttl=0.0))
    try:
        PathFS(fs, Caller(os.getuid(), 0, os.getpid())).listdir("sta/main")
        text = fs.render_stats()
    finally:
        fs.close()
        assert app.audit is not None
        app.audit.close()
    assert "lakemount_audit_recorded_total 1" in text and "lakemount_audit_lost_intervals_total 0" in text


@pytest.mark.fuse
@pytest.mark.skipif(not HAVE_FUSE, reason="needs /dev/fuse and fusermount3")
def test_through_the_kernel_the_record_names_the_reading_process(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    app = App(load(None, env={"LAKEMOUNT_HOME": home}))
    app.catalog.create_repository("kern")
    app.catalog.put("kern", "main", "k.txt", b"kernel!")
    app.metastore.engine.dispose()
    mp = str(tmp_path / "mnt")
    m = start(home, mp)
    try:
        reader = subprocess.run(["cat", f"{mp}/kern/main/k.txt"], capture_output=True, check=True)
        assert reader.stdout == b"kernel!"
        with open(f"{mp}/kern/main/w.txt", "wb") as f:
            f.write(b"12345")
    finally:
        stop(m)  # a clean stop writes what is still buffered
    assert m.proc.returncode == 0, m.log()
    recs = [r for r in app.catalog.audit_records("kern", Filter()) if r.frontend == "mount"]
    read = [r for r in recs if r.op == "read" and r.path == "k.txt"]
    assert len(read) == 1 and (read[0].process, read[0].bytes, read[0].uid) == ("cat", 7, os.getuid())
    assert read[0].pid != os.getpid() and read[0].pid > 0
    written = [r for r in recs if r.op == "write" and r.path == "w.txt"]
    assert len(written) == 1 and (written[0].pid, written[0].bytes) == (os.getpid(), 5)


def test_two_mounts_writing_one_path_the_later_staging_wins_and_both_writes_are_on_the_trail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 36's "two hosts writing one path": two write-back mounts each acknowledge a write of one path;
    whichever pipeline stages later wins (here the first writer's, held back on purpose), and the trail
    has both writes, each with its process, so the overwritten one is never silent."""
    import threading

    app = App(load(None, env={"LAKEMOUNT_HOME": str(tmp_path / "home")}))
    cat = app.catalog
    cat.create_repository("two")
    one = build_filesystem(app, mount_options(app, ref=None, head_ttl=0.0, writeback=True, mountpoint=str(tmp_path / "one")))
    two = build_filesystem(app, mount_options(app, ref=None, head_ttl=0.0, writeback=True, mountpoint=str(tmp_path / "two")))
    assert one.writeback is not None and two.writeback is not None
    gate, held = threading.Event(), threading.Event()
    stage_run = one.writeback._stage_run

    def held_back(items: list[object]) -> None:
        held.set()
        assert gate.wait(60), "the test never let the first mount stage"
        stage_run(items)  # type: ignore[arg-type]

    monkeypatch.setattr(one.writeback, "_stage_run", held_back)
    try:
        me = os.getuid(), os.getgid()
        PathFS(one, Caller(*me, os.getpid())).write_file("two/main/same.txt", b"from one")
        assert held.wait(60), "the first mount's pipeline never came to stage"
        PathFS(two, Caller(*me, os.getppid())).write_file("two/main/same.txt", b"from two, written later")
        two.writeback.drain(None)
        staged = cat.get_optional("two", "main", "same.txt")
        assert staged is not None and cat.read(cat.repository("two"), staged) == b"from two, written later"
        gate.set()
        one.writeback.drain(None)  # staged last: the first write wins, as the later staging
        staged = cat.get_optional("two", "main", "same.txt")
        assert staged is not None and cat.read(cat.repository("two"), staged) == b"from one"
        assert app.audit is not None
        app.audit.flush()
        writes = [(r.pid, r.bytes, r.path) for r in cat.audit_records("two", Filter()) if r.op == "write"]
    finally:
        gate.set()
        one.close()
        two.close()
        if app.audit is not None:
            app.audit.close()
    assert sorted(writes) == sorted([(os.getpid(), 8, "same.txt"), (os.getppid(), 23, "same.txt")])
