"""Write-back through the kernel: kill -9 right after ``cp -r`` returns, and kill -9 during the replay.

The store is held down (tests/fuse/flaky_mount.py) while the files are copied, so the
kill lands with records journaled and not staged; a normal write-back mount of the same
mountpoint then replays them before it serves.  Each test counts acknowledged files whose
bytes are missing afterwards (0), through the mount and in the commit that follows.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from lakemount.app import App
from lakemount.block.layout import DATA_PREFIX
from tests.fuse.conftest import REPO
from tests.fuse.mounting import Mount, cleanup_mountpoint, env_for, needs_fuse, start, stop, wait_for, write_faults

pytestmark = needs_fuse

FLAKY = os.path.join(os.path.dirname(__file__), "flaky_mount.py")
FILES = 120
OBJECTS = f"/{REPO}/{DATA_PREFIX}"  # the URLs of stored objects (the faults spare the catalog's own files)


@pytest.fixture
def source(tmp_path: os.PathLike[str]) -> dict[str, bytes]:
    src = os.path.join(os.fspath(tmp_path), "src")
    os.makedirs(src)
    files = {}
    for i in range(FILES):
        data = os.urandom(512 + i * 37)
        with open(os.path.join(src, f"f{i:03d}"), "wb") as f:
            f.write(data)
        files[f"f{i:03d}"] = data
    return files


@pytest.fixture
def mounts(home: str) -> Iterator[list[Mount]]:
    made: list[Mount] = []
    try:
        yield made
    finally:
        for m in made:
            stop(m)


def wb_env(home: str) -> dict[str, str]:
    return env_for(home, LAKEMOUNT_MOUNT_WRITEBACK="true")


def store_down_mount(home: str, tmp: str, mounts: list[Mount]) -> tuple[Mount, str, str]:
    """A write-back mount at ``tmp/mnt`` whose store's uploads of objects fail from now on (small files: from
    memory), so nothing journaled gets staged; returns it, its main branch's directory and its fault file."""
    mp = os.path.join(tmp, "mnt")
    faults = os.path.join(tmp, "faults")
    open(faults, "w").close()
    m = start(home, mp, command=lambda fd: [sys.executable, FLAKY, mp, faults, str(fd)], env=wb_env(home))
    mounts.append(m)
    main = f"{mp}/{REPO}/main"
    open(f"{main}/first", "wb").close()  # the empty object a create points at is stored before the store goes down
    write_faults(faults, f"put 1000000 {OBJECTS}\nput_file 1000000 {OBJECTS}\n")
    assert wait_for(lambda: os.path.getsize(faults) == 0, timeout=30), "the mount never took the faults"
    return m, main, faults


def crash_after_cp(home: str, tmp: str, mounts: list[Mount]) -> str:
    """Copy the source into a write-back mount whose store is down, then kill -9 it; returns the mountpoint."""
    m, main, _faults = store_down_mount(home, tmp, mounts)
    mp = m.mountpoint
    subprocess.run(["cp", "-r", os.path.join(tmp, "src"), f"{main}/dst"], check=True, timeout=300)
    with open(f"{main}/.lakefs/status") as f:
        pending = json.load(f)["writeback"]["pending"]
    assert pending >= FILES, "the copy's files were staged before the kill: the fault never landed"
    os.kill(m.proc.pid, signal.SIGKILL)
    assert m.proc.wait() == -signal.SIGKILL  # the mount died of the kill
    cleanup_mountpoint(mp)
    return mp


def assert_nothing_lost(app: App, mp: str, source: dict[str, bytes], m: Mount) -> None:
    main = f"{mp}/{REPO}/main"
    read = {name: open(f"{main}/dst/{name}", "rb").read() for name in source}
    lost = [name for name, data in source.items() if read[name] != data]
    if lost:  # what a failure needs to be traced (stop 50: f000 once, 1 of ~30 runs, not reproduced since)
        staged = {name: app.catalog.get_optional(REPO, "main", f"dst/{name}") for name in lost}
        raise AssertionError(f"acknowledged files lost through the mount: {lost}; read sizes "
                             f"{[len(read[n]) for n in lost]} of {[len(source[n]) for n in lost]}; staged {staged}; "
                             f"the mount's log:\n{m.log()[-6000:]}")
    with open(f"{main}/.lakefs/commit", "w") as f:
        f.write("after the crash")
    commit = app.catalog.get_branch(REPO, "main").commit_id
    repo = app.catalog.repository(REPO)
    in_commit = {}
    for name in source:
        entry = app.catalog.get_optional(REPO, commit, f"dst/{name}")
        in_commit[name] = None if entry is None else app.catalog.read(repo, entry)
    lost = [name for name, data in source.items() if in_commit[name] != data]
    assert lost == [], f"acknowledged files missing from the next commit: {lost}"


def test_kill_9_right_after_cp_r_loses_no_acknowledged_file(
    app: App, home: str, tmp_path: os.PathLike[str], source: dict[str, bytes], mounts: list[Mount],
) -> None:
    tmp = os.fspath(tmp_path)
    mp = crash_after_cp(home, tmp, mounts)
    m = start(home, mp, ["--writeback"])  # replays the journal before it serves
    mounts.append(m)
    assert "replaying" in m.log() and "replay done" in m.log()
    assert_nothing_lost(app, mp, source, m)


def test_kill_9_during_the_replay_loses_no_acknowledged_file(
    app: App, home: str, tmp_path: os.PathLike[str], source: dict[str, bytes], mounts: list[Mount],
) -> None:
    tmp = os.fspath(tmp_path)
    mp = crash_after_cp(home, tmp, mounts)
    faults = os.path.join(tmp, "faults")
    write_faults(faults, f"put 1000000 {OBJECTS}\nput_file 1000000 {OBJECTS}\n")  # the replay cannot finish: it retries the store
    log_path = os.path.join(tmp, "replay.log")
    read_end, write_end = os.pipe()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, FLAKY, mp, faults, str(write_end)], env=wb_env(home), stdout=log, stderr=log,
                                pass_fds=(write_end,))
    os.close(write_end)
    try:
        def replaying() -> bool:
            text = open(log_path, errors="replace").read()
            return "replaying" in text and "injected fault: put" in text

        assert wait_for(replaying, timeout=60), "the replay never hit the store fault: " + open(log_path).read()
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(30) == -signal.SIGKILL
        assert "replay done" not in open(log_path).read()  # killed in the middle of it
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(read_end)
        cleanup_mountpoint(mp)
    m = start(home, mp, ["--writeback"])
    mounts.append(m)
    assert "replay done" in m.log()
    assert_nothing_lost(app, mp, source, m)


def test_a_cli_commit_on_the_node_waits_for_the_mounts_journal(
    app: App, home: str, tmp_path: os.PathLike[str], mounts: list[Mount],
) -> None:
    """`lakemount commit` in another process of the node holds what the write-back mount acknowledged:
    it waits (saying so) while the mount's store is down, and commits the file once it is staged."""
    tmp = os.fspath(tmp_path)
    _m, main, faults = store_down_mount(home, tmp, mounts)
    with open(f"{main}/late.txt", "wb") as f:
        f.write(b"acknowledged before the commit")
    err_path = os.path.join(tmp, "cli.err")
    with open(err_path, "w") as err:
        cli = subprocess.Popen([sys.executable, "-m", "lakemount.cli.main", "commit", f"lakefs://{REPO}/main", "-m", "from the cli"],
                               env=env_for(home), stdout=subprocess.DEVNULL, stderr=err)
    try:
        assert wait_for(lambda: "not yet staged" in open(err_path).read(), timeout=60), open(err_path).read()
        assert cli.poll() is None  # still waiting: the file is journaled, not staged
        # Its content is not staged; its journaled create may be (an empty entry: test_writeback.py's first test).
        early = app.catalog.get_optional(REPO, "main", "late.txt")
        assert early is None or early.size == 0, early
        write_faults(faults, "heal\n")
        assert cli.wait(timeout=120) == 0, open(err_path).read()
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
    commit = app.catalog.get_branch(REPO, "main").commit_id
    entry = app.catalog.get_optional(REPO, commit, "late.txt")
    assert entry is not None and app.catalog.read(app.catalog.repository(REPO), entry) == b"acknowledged before the commit"
