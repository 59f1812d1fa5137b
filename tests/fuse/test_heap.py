"""The mount process's heap (lakemount/fuse/heap.py): a large write's request buffers reuse freed memory."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from lakemount.app import App
from lakemount.config import load
from lakemount.fuse.writes import HASH_QUEUE
from tests.fuse.conftest import REPO
from tests.fuse.mounting import env_for, needs_fuse, start, stop

pytestmark = needs_fuse

MiB = 1 << 20
SIZE = 512 * MiB  # 131,072 pages: without the kept heap, 17,000-37,000 of them faulted in


def minor_faults(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rpartition(")")[2].split()[7])  # minflt, the 10th field


def test_a_large_cp_takes_no_fresh_pages_for_its_requests_once_the_mount_is_warm(home: str, tmp_path: Path) -> None:
    """Each 1 MiB WRITE is a new ``bytes`` in the mount; freed, it must serve the next request, not go back to the
    kernel (before stop 56: 35,000-74,000 page faults in the mount per GiB copied).  After a first copy the heap may
    still grow by the hashing queue's ``HASH_QUEUE`` MiB (4,096 pages), if this copy's hashing lags further behind
    its writes than the first one's did (a busy machine), and by little else, however large the copy."""
    App(load(env={"LAKEMOUNT_HOME": home})).catalog.create_repository(REPO)
    src = tmp_path / "src.bin"
    with open(src, "wb") as f:
        for _ in range(SIZE // MiB):
            f.write(os.urandom(MiB))
    m = start(home, str(tmp_path / "mnt"), env=env_for(home))
    try:
        branch = f"{m.mountpoint}/{REPO}/main"
        subprocess.run(["cp", str(src), f"{branch}/warm.bin"], check=True)  # the heap grows to what a copy holds
        os.unlink(f"{branch}/warm.bin")
        before = minor_faults(m.proc.pid)
        subprocess.run(["cp", str(src), f"{branch}/copy.bin"], check=True)
        faults = minor_faults(m.proc.pid) - before
        assert os.path.getsize(f"{branch}/copy.bin") == SIZE
        assert faults < HASH_QUEUE * MiB // 4096 + 1024, f"the mount faulted in {faults} pages for a {SIZE // MiB} MiB copy"
    finally:
        stop(m)
