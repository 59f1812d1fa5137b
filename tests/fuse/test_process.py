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
from tests.fuse.mounting import cleanup_mountpoint, env_for, needs_fuse


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
