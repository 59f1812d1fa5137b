"""What the kernel holds of a file in its page cache, for tests of writes that drop it (stop 51)."""

from __future__ import annotations

import ctypes
import mmap
import os


def resident_pages(fd: int, size: int) -> int:
    """How many of the file's first ``size`` bytes' pages the kernel holds in its page cache (mincore(2))."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    assert addr not in (None, ctypes.c_void_p(-1).value), os.strerror(ctypes.get_errno())
    try:
        pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
        vec = ctypes.create_string_buffer(pages)
        assert libc.mincore(addr, size, vec) == 0, os.strerror(ctypes.get_errno())
        return sum(b & 1 for b in vec.raw)
    finally:
        libc.munmap(addr, size)


def filesystem_of(path: str) -> str:
    """The type of the file system ``path`` is on (the longest mount point above it in /proc/self/mounts)."""
    best, kind = "", ""
    with open("/proc/self/mounts") as f:
        for line in f:
            _, point, fstype, *_ = line.split()
            if (path == point or path.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
                best, kind = point, fstype
    return kind
