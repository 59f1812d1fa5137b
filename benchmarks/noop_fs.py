"""A pyfuse3 file system that keeps names in memory and does nothing else: how many requests a loop serves here.

    .venv/bin/python benchmarks/noop_fs.py MOUNTPOINT [--shim]

Enough for ``cp -r`` of flat files: lookup, getattr, mkdir, create, write (counted, dropped), flush, release.
Without ``--shim`` every request goes through pyfuse3's trio loop, as in benchmarks/passthrough_fs.py but with
no system call behind it; with ``--shim`` LOOKUP, CREATE, WRITE, FLUSH and RELEASE are answered through
lakemount's kflags shim (``kflags.set_fast``: the C wrapper calls a plain method and drains the requests
waiting), as the mount answers a small file's requests.  Either is a ceiling for ``cp -r`` through FUSE on
this machine: the kernel's and the copy's own work, and the least Python a request can cost on that path
(stop 56).  It prints ``ready`` once mounted and serves until unmounted (``fusermount3 -u``).
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import time
from typing import Any

if "--shim" in sys.argv:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from lakemount.fuse import kflags  # before pyfuse3: the shim is the definition pyfuse3 binds to

import pyfuse3
from passthrough_fs import serve  # benchmarks/, the script's own folder: after the shim, as pyfuse3

TTL = 1.0


class Noop(pyfuse3.Operations):  # type: ignore[misc]
    """Inodes numbered from 2 in creation order; a name maps to its inode, an inode to its mode."""

    def __init__(self) -> None:
        super().__init__()
        self.names: dict[tuple[int, bytes], int] = {}
        self.modes: dict[int, int] = {pyfuse3.ROOT_INODE: stat.S_IFDIR | 0o755}
        self.uid, self.gid = os.getuid(), os.getgid()

    def _new(self, parent: int, name: bytes, mode: int) -> int:
        ino = len(self.modes) + 1
        self.names[(parent, name)] = ino
        self.modes[ino] = mode
        return ino

    def _attr(self, ino: int) -> pyfuse3.EntryAttributes:
        a = pyfuse3.EntryAttributes()
        a.st_ino, a.st_mode, a.st_nlink, a.st_uid, a.st_gid = ino, self.modes[ino], 1, self.uid, self.gid
        a.st_size, a.st_blksize, a.entry_timeout, a.attr_timeout = 0, 1 << 20, TTL, TTL
        a.st_atime_ns = a.st_mtime_ns = a.st_ctime_ns = time.time_ns()
        return a

    async def lookup(self, parent: int, name: bytes, ctx: Any = None) -> pyfuse3.EntryAttributes:
        ino = self.names.get((parent, name))
        if ino is None:
            raise pyfuse3.FUSEError(errno.ENOENT)
        return self._attr(ino)

    async def getattr(self, ino: int, ctx: Any = None) -> pyfuse3.EntryAttributes:
        return self._attr(ino)

    async def setattr(self, ino: int, attr: Any, fields: Any, fh: Any, ctx: Any) -> pyfuse3.EntryAttributes:
        return self._attr(ino)

    async def mkdir(self, parent: int, name: bytes, mode: int, ctx: Any) -> pyfuse3.EntryAttributes:
        return self._attr(self._new(parent, name, stat.S_IFDIR | 0o755))

    async def create(self, parent: int, name: bytes, mode: int, flags: int, ctx: Any) -> tuple[pyfuse3.FileInfo, Any]:
        ino = self._new(parent, name, stat.S_IFREG | 0o644)
        return pyfuse3.FileInfo(fh=ino), self._attr(ino)

    async def open(self, ino: int, flags: int, ctx: Any) -> pyfuse3.FileInfo:
        return pyfuse3.FileInfo(fh=ino)

    async def write(self, fh: int, off: int, buf: bytes) -> int:
        return len(buf)

    async def flush(self, fh: int) -> None:
        return None

    async def release(self, fh: int) -> None:
        return None

    async def opendir(self, ino: int, ctx: Any) -> int:
        return ino

    async def readdir(self, fh: int, start_id: int, token: Any) -> None:
        return None

    async def releasedir(self, fh: int) -> None:
        return None

    # The shim's fast path (kflags.set_fast): plain arguments in, what the shim replies with out.
    def _fields(self, ino: int) -> tuple[Any, ...]:
        t = time.time_ns()
        return (ino, TTL, TTL, self.modes[ino], 1, self.uid, self.gid, 0, 0, 1 << 20, 0, t, t, t)

    def fast_lookup(self, parent: int, name: bytes, uid: int, gid: int, pid: int) -> tuple[Any, ...] | int:
        ino = self.names.get((parent, name))
        return -errno.ENOENT if ino is None else self._fields(ino)

    def fast_create(self, parent: int, name: bytes, mode: int, flags: int, uid: int, gid: int, pid: int) -> tuple[Any, ...]:
        ino = self._new(parent, name, stat.S_IFREG | 0o644)
        return (*self._fields(ino), ino, False, False)

    def fast_write(self, fh: int, off: int, buf: bytes) -> int:
        return len(buf)

    def fast_flush(self, fh: int, closer: int) -> int:
        return 0

    def fast_release(self, fh: int) -> int:
        return 0

    def hand_flush(self, request: object, fh: int, closer: int) -> bool:
        return False  # never reached: fast_flush answers every FLUSH


def main() -> None:
    ops = Noop()

    def shim() -> None:
        if "--shim" in sys.argv and not kflags.set_fast(ops):
            print("the kflags shim is not loaded: no fast path", file=sys.stderr)
            sys.exit(1)

    serve(ops, sys.argv[1], "noop", shim)


if __name__ == "__main__":
    main()
