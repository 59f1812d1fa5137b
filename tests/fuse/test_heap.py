"""The mount process's heap (lakemount/fuse/heap.py): a large write's request buffers reuse freed memory."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from lakemount.app import App
from lakemount.config import load
from tests.fuse.conftest import REPO
from tests.fuse.mounting import env_for, needs_fuse, start, stop

pytestmark = needs_fuse

MiB = 1 << 20


def minor_faults(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rpartition(")")[2].split()[7])  # minflt, the 10th field


def test_a_large_cp_takes_no_fresh_pages_for_its_requests_once_the_mount_is_warm(home: str, tmp_path: Path) -> None:
    """Each 1 MiB WRITE is a new ``bytes`` in the mount; freed, it must serve the next request, not go back to the
    kernel (before stop 56: 10,000-15,000 page faults in the mount per 128 MiB copied, 32,768 pages in all)."""
    App(load(env={"LAKEMOUNT_HOME": home})).catalog.create_repository(REPO)
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(128 * MiB))
    m = start(home, str(tmp_path / "mnt"), env=env_for(home))
    try:
        branch = f"{m.mountpoint}/{REPO}/main"
        subprocess.run(["cp", str(src), f"{branch}/warm.bin"], check=True)  # the heap grows to what a copy holds
        before = minor_faults(m.proc.pid)
        subprocess.run(["cp", str(src), f"{branch}/copy.bin"], check=True)
        faults = minor_faults(m.proc.pid) - before
        assert os.path.getsize(f"{branch}/copy.bin") == 128 * MiB
        assert faults < 2000, f"the mount faulted in {faults} pages for a 128 MiB copy"
    finally:
        stop(m)
