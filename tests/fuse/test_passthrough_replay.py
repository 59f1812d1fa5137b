"""kill -9 during the replay of a record journaled unhashed (replay55, stop 55's write-back with passthrough).

A large file copied through passthrough into a write-back mount is journaled at its close without its hash; the
mount is killed (-9) before its pipeline stages it, so the next mount's replay must hash it before it serves.  That
replay is killed (-9) while it hashes (its log names the file it hashes, before and after: the kill lands between the
two lines), and a third mount replays it again: the file reads back byte for byte, the next commit holds it under
its content address, nothing is kept aside, and no stored object is corrupt.  Acknowledged writes lost: 0."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lakemount.app import App
from lakemount.config import load
from lakemount.fuse import process
from tests.fuse.conftest import REPO
from tests.fuse.mounting import cleanup_mountpoint, start, stop, wait_for, write_faults
from tests.fuse.test_passthrough_mount import _journal_bodies, _read_back_and_committed, _wb_pt_env
from tests.fuse.test_passthrough_mount import pytestmark as _passthrough_marks
from tests.fuse.test_writeback_mount import FLAKY, OBJECTS
from tests.fuse.test_writes_mount import stat_counter

pytestmark = _passthrough_marks

MiB = 1 << 20
SIZE = 512 * MiB + 3  # its hash takes a few hundred milliseconds at least: the kill lands inside it


def test_kill_9_while_the_replay_hashes_a_record_journaled_unhashed_loses_nothing(home: str, tmp_path: Path) -> None:
    app = App(load(env={"LAKEMOUNT_HOME": home}))
    app.catalog.create_repository(REPO)
    body = os.urandom(SIZE)
    (tmp_path / "src-whole").write_bytes(body)  # not */whole: cp holds it open while it closes the copy
    digest = hashlib.sha256(body).hexdigest()
    mp = str(tmp_path / "mnt")
    m = start(home, mp, env=_wb_pt_env(home))
    try:
        subprocess.run(["cp", str(tmp_path / "src-whole"), f"{mp}/{REPO}/main/whole"], check=True)
        os.kill(m.proc.pid, signal.SIGKILL)
        assert m.proc.wait() == -signal.SIGKILL
    finally:
        stop(m)
    (record,) = [r for r in map(json.loads, _journal_bodies(home)) if r.get("op") == "put"]
    assert record["sha256"] == "" and record["size"] == SIZE  # journaled unhashed, not staged before the kill

    # The replay, killed while it hashes.
    log_path = str(tmp_path / "replay.log")
    read_end, write_end = os.pipe()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(process.mount_command(None, mp, ["--head-ttl", "0.2", "--writeback"], write_end),
                                env=_wb_pt_env(home), stdout=log, stderr=log, pass_fds=(write_end,))
    os.close(write_end)
    try:
        deadline = time.monotonic() + 120
        while "write-back replay: hashing whole" not in (text := Path(log_path).read_text(errors="replace")):
            assert time.monotonic() < deadline and proc.poll() is None, "the replay never hashed the record:\n" + text
            time.sleep(0.002)
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(30) == -signal.SIGKILL  # the mount died of the kill
        text = Path(log_path).read_text(errors="replace")
        assert "write-back replay: hashed whole" not in text, "the kill landed after the hash, not during it:\n" + text
        assert "replay done" not in text
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(read_end)
        cleanup_mountpoint(mp)
    assert [r for r in map(json.loads, _journal_bodies(home)) if r.get("op") == "put"] == [record]  # still journaled

    m = start(home, mp, ["--writeback"])  # replays again before it serves
    try:
        log_text = m.log()
        assert "write-back replay: hashed whole" in log_text and "replay done" in log_text
        main = f"{mp}/{REPO}/main"
        with open(f"{main}/whole", "rb") as f:
            lost = 0 if f.read() == body else 1
        assert lost == 0, "the acknowledged file is not there byte for byte after the replay"
        with open(f"{main}/.lakefs/status") as f:
            wb = json.load(f)["writeback"]
        assert wb["pending"] == 0 and wb["kept_aside_count"] == 0, wb
        with open(f"{main}/.lakefs/commit", "w") as f:
            f.write("after the kill during the replay")
        head = next(iter(app.catalog.log(REPO, "main", limit=1)))
        assert head.message == "after the kill during the replay"
        entry = app.catalog.get_optional(REPO, head.id, "whole")
        assert entry is not None and entry.address.endswith(digest) and entry.size == SIZE
        assert app.catalog.read(app.catalog.repository(REPO), entry) == body
        changed = [(d.key, d.kind) for d in app.catalog.diff(REPO, head.parents[0], head.id)]
        assert changed == [(b"whole", "added")], changed  # the one file, staged once, nothing else
    finally:
        stop(m)
    data = Path(app.catalog.repository(REPO).storage_namespace.removeprefix("local://")) / "data"
    for obj in data.rglob("*"):
        if obj.is_file():
            assert not obj.name.startswith(".tmp-"), f"a half-stored object was left: {obj}"
            if obj.stat().st_size == SIZE:
                assert obj.name == digest, f"corrupt object {obj}"


def test_kill_9_with_the_store_down_after_a_passthrough_close_loses_nothing(home: str, tmp_path: Path) -> None:
    """The store down (tests/fuse/flaky_mount.py, with passthrough on: the kernel writes the file), a 64 MiB file is
    copied through passthrough, journaled unhashed and not staged (its upload fails); the mount is killed (-9).  The
    next mount's replay hashes the record (its log says so) and stages it: byte for byte, in the next commit."""
    app = App(load(env={"LAKEMOUNT_HOME": home}))
    app.catalog.create_repository(REPO)
    body = os.urandom(64 * MiB + 1)
    (tmp_path / "src-big").write_bytes(body)
    mp, faults = str(tmp_path / "mnt"), str(tmp_path / "faults")
    open(faults, "w").close()
    m = start(home, mp, command=lambda fd: [sys.executable, FLAKY, mp, faults, str(fd)], env=_wb_pt_env(home))
    try:
        main = f"{mp}/{REPO}/main"
        open(f"{main}/first", "wb").close()  # the empty object a create points at is stored before the store goes down
        write_faults(faults, f"put 1000000 {OBJECTS}\nput_file 1000000 {OBJECTS}\n")
        assert wait_for(lambda: os.path.getsize(faults) == 0, timeout=30), "the mount never took the faults"
        replies = stat_counter(mp, "kernel_passthrough_replies")
        subprocess.run(["cp", str(tmp_path / "src-big"), f"{main}/big"], check=True)
        assert stat_counter(mp, "kernel_passthrough_replies") == replies + 1  # the kernel wrote it: passthrough
        assert stat_counter(mp, "journaled_unhashed") == 1

        def status() -> dict[str, Any]:
            with open(f"{main}/.lakefs/status") as f:
                return dict(json.load(f)["writeback"])

        # The pipeline met the store down (its upload retried), and the file is not staged.
        assert wait_for(lambda: status()["counts"].get("upload_retries", 0) >= 1, timeout=30), status()
        assert status()["pending"] >= 1
        os.kill(m.proc.pid, signal.SIGKILL)
        assert m.proc.wait() == -signal.SIGKILL
    finally:
        stop(m)
    (record,) = [r for r in map(json.loads, _journal_bodies(home)) if r.get("op") == "put" and r["path"] == "big"]
    assert record["sha256"] == ""  # journaled unhashed: whatever the killed pipeline hashed died with it
    m = start(home, mp, ["--writeback"])
    try:
        assert "write-back replay: hashed big" in m.log() and "replay done" in m.log()
        _read_back_and_committed(app, mp, "big", body, "after the store came back")
    finally:
        stop(m)
