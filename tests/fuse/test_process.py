"""Starting a mount process: a start that fails or never reports leaves no mount behind."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import threading

import pytest

from lakemount.errors import Unavailable
from lakemount.fuse import process, runner
from tests.fuse.mounting import Mount, cleanup_mountpoint, env_for, needs_fuse


def _stuck_lookup(m: Mount) -> tuple[threading.Thread, list[int]]:
    """Stop mount ``m``'s process (SIGSTOP: it answers nothing) and start a lookup in it on a thread: the
    thread and the errno list its lookup fills once freed.  Asserts the lookup is stuck a second later."""
    import signal

    got: list[int] = []

    def look() -> None:
        try:
            os.stat(f"{m.mountpoint}/repo/main/never-looked-up")
        except OSError as exc:
            got.append(exc.errno)

    os.kill(m.proc.pid, signal.SIGSTOP)
    waiting = threading.Thread(target=look, daemon=True)
    waiting.start()
    waiting.join(1.0)
    assert waiting.is_alive(), f"the lookup returned ({got}) from a mount that answers nothing: nothing is stuck"
    return waiting, got


@needs_fuse[0]
@needs_fuse[1]
@pytest.mark.parametrize("on_term", ["unmounts", "is killed"])
def test_a_mount_that_never_reports_is_stopped_and_unmounted(
    home: str, tmp_path: os.PathLike[str], on_term: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    mp = os.path.join(os.fspath(tmp_path), "mnt")
    os.makedirs(mp)
    mount = shlex.join([sys.executable, "-m", "lakemount.cli.main", "mount", mp, "--foreground", "--ready-fd", "7"])
    # The mount reports "ok" to /dev/null, so the parent never hears it, though it mounts.
    # "is killed": a wrapper that answers SIGTERM with SIGKILL, leaving a dead mount to detach.
    script = (f"exec {mount} 7>/dev/null" if on_term == "unmounts"
              else f"{mount} 7>/dev/null & child=$!; trap 'kill -9 $child; wait $child; exit 1' TERM; wait $child")
    seen = threading.Event()
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if runner.find_mount(mp) is not None:
                seen.set()
            done.wait(0.05)

    # The parent's wait for the report ends (a short timeout) only once the child has mounted: the case is a mount
    # made but never reported, and waiting out a long timeout for it to happen cost 20 s a run.
    read_ready = process._read_ready

    def once_mounted(fd: int, proc: subprocess.Popen[bytes], timeout: float) -> str:
        assert seen.wait(60), "the child did not mount within 60 s"
        return read_ready(fd, proc, timeout)

    monkeypatch.setattr(process, "_read_ready", once_mounted)
    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with open(mp + ".log", "ab") as log, pytest.raises(Unavailable, match="did not report"):
            process.start(lambda fd: ["sh", "-c", script], mp, detach=False, log=log, env=env_for(home), timeout=1)
        assert seen.is_set(), "the child never mounted: the test proves nothing"
        assert runner.find_mount(mp) is None
    finally:
        done.set()
        watcher.join()
        cleanup_mountpoint(mp)


def test_aborting_the_connection_frees_a_syscall_the_mount_can_never_answer(
    home: str, tmp_path: os.PathLike[str]
) -> None:
    """runner.abort_connection: what frees a mount whose process cannot exit (tests/fuse/mounting.py's reap).
    A stopped mount answers nothing, so a lookup waits in the kernel; the abort fails it and the mount goes."""
    import errno
    import signal

    from lakemount.app import App
    from tests.fuse.mounting import reap, start, stop

    App.from_config().catalog.create_repository("repo")
    m = start(home, os.path.join(os.fspath(tmp_path), "mnt"))
    try:
        waiting, got = _stuck_lookup(m)
        assert runner.abort_connection(m.mountpoint)
        waiting.join(30)
        assert not waiting.is_alive() and got == [errno.ECONNABORTED], got
        assert runner.is_stale(m.mountpoint)
        m.proc.kill()
        reap(m)
        assert m.proc.returncode == -signal.SIGKILL
    finally:
        if m.proc.poll() is None:
            os.kill(m.proc.pid, signal.SIGCONT)
        stop(m)


@needs_fuse[0]
@needs_fuse[1]
def test_umount_of_a_mount_that_answers_nothing_aborts_its_connection(home: str, tmp_path: os.PathLike[str]) -> None:
    """``lakemount umount`` of a stuck mount (its process stopped, a lookup waiting in the kernel for it): before,
    the unmount was refused as busy (or the CLI's own stat of the mountpoint waited forever); now the mount's
    connection is aborted after ``--abort-after``, the waiting lookup fails, the CLI returns and the mount
    point is an empty folder again."""
    import errno
    import json
    import signal

    from lakemount.app import App
    from tests.fuse.mounting import lakemount_cmd, reap, start, stop

    App.from_config().catalog.create_repository("repo")
    m = start(home, os.path.join(os.fspath(tmp_path), "mnt"))
    try:
        waiting, got = _stuck_lookup(m)
        done = subprocess.run(lakemount_cmd("umount", m.mountpoint, "--abort-after", "2", "--json"), env=env_for(home),
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        out = json.loads(done.stdout)
        assert out["aborted"] is True and out["pid"] == m.proc.pid and out["finished"] is False, out  # it is stopped
        waiting.join(30)
        assert not waiting.is_alive() and got == [errno.ECONNABORTED], got  # the abort is what freed the lookup
        assert runner.find_mount(m.mountpoint) is None
        with open(os.path.join(m.mountpoint, "local"), "w") as f:  # a folder of this disk again
            f.write("x")
        assert os.listdir(m.mountpoint) == ["local"]
        m.proc.kill()
        reap(m)
        assert m.proc.returncode == -signal.SIGKILL
    finally:
        if m.proc.poll() is None:
            os.kill(m.proc.pid, signal.SIGCONT)
        stop(m)


@needs_fuse[0]
@needs_fuse[1]
def test_umount_of_a_mount_that_answers_unmounts_it_as_before(home: str, tmp_path: os.PathLike[str]) -> None:
    """A mount that answers is unmounted, never aborted, however short ``--abort-after`` is."""
    import json

    from lakemount.app import App
    from tests.fuse.mounting import lakemount_cmd, start, stop

    App.from_config().catalog.create_repository("repo")
    m = start(home, os.path.join(os.fspath(tmp_path), "mnt"))
    try:
        with open(f"{m.mountpoint}/repo/main/kept", "w") as f:
            f.write("kept")
        done = subprocess.run(lakemount_cmd("umount", m.mountpoint, "--abort-after", "5", "--json"), env=env_for(home),
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        out = json.loads(done.stdout)
        assert out["aborted"] is False and out["finished"] is True, out
        assert m.proc.wait(30) == 0
    finally:
        stop(m)
