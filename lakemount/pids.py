"""Process ids written in run files (open markers, spools, metrics shards): whether their process still lives."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host (one owned by another user counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def one_process(tid: int, other: int) -> bool:
    """Whether threads ``tid`` and ``other`` (ids as the kernel gives them, e.g. in a FUSE request) belong to one
    process; True when it cannot be told: an id unknown (0), or ``tid``'s thread gone (its process may live on)."""
    if tid <= 0 or other <= 0 or tid == other:
        return True
    try:
        os.stat(f"/proc/{tid}/task/{other}")  # /proc/<tid>/task lists every thread of tid's process
    except FileNotFoundError:
        return not os.path.exists(f"/proc/{tid}")
    except OSError:
        return True
    return True
