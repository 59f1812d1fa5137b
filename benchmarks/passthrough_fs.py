"""A minimal pyfuse3 file system passing every call to a local directory: the ceiling a FUSE mount reaches here.

    .venv/bin/python benchmarks/passthrough_fs.py SOURCE_DIR MOUNTPOINT

Enough for ``cp -r``, ``ls`` and reads: lookup, getattr, setattr, mkdir, create,
open, read, write, flush, release, opendir, readdir, unlink, rmdir.  Each inode is
the local file's own; a path per inode is kept to reach it.  It prints ``ready``
once mounted and serves until unmounted (``fusermount3 -u``).  writeback_bench.py
measures a copy into it beside the same copy into lakemount.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable
from typing import Any

import pyfuse3
import trio


class Passthrough(pyfuse3.Operations):  # type: ignore[misc]
    """Inode numbers are the local files' (the root is pyfuse3's ROOT_INODE)."""

    def __init__(self, source: str) -> None:
        super().__init__()
        self.paths: dict[int, str] = {pyfuse3.ROOT_INODE: source}

    def _path(self, ino: int) -> str:
        try:
            return self.paths[ino]
        except KeyError:
            raise pyfuse3.FUSEError(errno.ENOENT) from None

    def _attr(self, path: str, ino: int | None = None) -> pyfuse3.EntryAttributes:
        try:
            st = os.lstat(path)
        except OSError as exc:
            raise pyfuse3.FUSEError(exc.errno) from None
        attr = pyfuse3.EntryAttributes()
        attr.st_ino = ino or st.st_ino
        for name in ("st_mode", "st_nlink", "st_uid", "st_gid", "st_rdev", "st_size", "st_atime_ns", "st_mtime_ns",
                     "st_ctime_ns"):
            setattr(attr, name, getattr(st, name))
        attr.st_blksize, attr.st_blocks = 1 << 20, st.st_blocks  # lakemount's: cp writes in 1 MiB requests
        attr.entry_timeout = attr.attr_timeout = 1.0
        if ino is None:
            self.paths[st.st_ino] = path
        return attr

    async def lookup(self, parent: int, name: bytes, ctx: Any = None) -> pyfuse3.EntryAttributes:
        return self._attr(os.path.join(self._path(parent), os.fsdecode(name)))

    async def getattr(self, ino: int, ctx: Any = None) -> pyfuse3.EntryAttributes:
        return self._attr(self._path(ino), ino)

    async def setattr(self, ino: int, attr: Any, fields: Any, fh: Any, ctx: Any) -> pyfuse3.EntryAttributes:
        path = self._path(ino)
        if fields.update_size:
            os.truncate(path, attr.st_size)
        if fields.update_mode:
            os.chmod(path, attr.st_mode & 0o7777)
        if fields.update_mtime or fields.update_atime:
            st = os.lstat(path)
            os.utime(path, ns=(attr.st_atime_ns if fields.update_atime else st.st_atime_ns,
                               attr.st_mtime_ns if fields.update_mtime else st.st_mtime_ns))
        return self._attr(path, ino)

    async def mkdir(self, parent: int, name: bytes, mode: int, ctx: Any) -> pyfuse3.EntryAttributes:
        path = os.path.join(self._path(parent), os.fsdecode(name))
        os.mkdir(path, mode & 0o7777)
        return self._attr(path)

    async def create(self, parent: int, name: bytes, mode: int, flags: int, ctx: Any) -> tuple[pyfuse3.FileInfo, Any]:
        path = os.path.join(self._path(parent), os.fsdecode(name))
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_TRUNC, mode & 0o7777)
        except OSError as exc:
            raise pyfuse3.FUSEError(exc.errno) from None
        return pyfuse3.FileInfo(fh=fd), self._attr(path)

    async def open(self, ino: int, flags: int, ctx: Any) -> pyfuse3.FileInfo:
        try:
            return pyfuse3.FileInfo(fh=os.open(self._path(ino), flags & ~os.O_CREAT))
        except OSError as exc:
            raise pyfuse3.FUSEError(exc.errno) from None

    async def read(self, fh: int, off: int, size: int) -> bytes:
        return os.pread(fh, size, off)

    async def write(self, fh: int, off: int, buf: bytes) -> int:
        return os.pwrite(fh, buf, off)

    async def flush(self, fh: int) -> None:
        return None

    async def release(self, fh: int) -> None:
        os.close(fh)

    async def opendir(self, ino: int, ctx: Any) -> int:
        return ino

    async def readdir(self, fh: int, start_id: int, token: Any) -> None:
        base = self._path(fh)
        names = sorted(os.listdir(base))
        for i, name in enumerate(names[start_id:], start_id + 1):
            if not pyfuse3.readdir_reply(token, os.fsencode(name), self._attr(os.path.join(base, name)), i):
                return

    async def unlink(self, parent: int, name: bytes, ctx: Any) -> None:
        os.unlink(os.path.join(self._path(parent), os.fsdecode(name)))

    async def rmdir(self, parent: int, name: bytes, ctx: Any) -> None:
        os.rmdir(os.path.join(self._path(parent), os.fsdecode(name)))


def serve(ops: pyfuse3.Operations, mountpoint: str, fsname: str, ready: Callable[[], None] = lambda: None) -> None:
    """Mount ``ops`` at ``mountpoint``, call ``ready`` (after the kernel's init), say "ready" and serve until unmounted."""
    pyfuse3.init(ops, mountpoint, set(pyfuse3.default_options) | {f"fsname={fsname}"})
    ready()
    print("ready", flush=True)
    try:
        trio.run(pyfuse3.main)
    finally:
        pyfuse3.close(unmount=True)


def main() -> None:
    source, mountpoint = sys.argv[1], sys.argv[2]
    serve(Passthrough(os.path.abspath(source)), mountpoint, "passthrough")


if __name__ == "__main__":
    main()
