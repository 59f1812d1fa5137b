"""``PathFS``: drive the kernel-free core with path-based, os-module-like calls (tests only).

Each call resolves its path with ``lookup`` like the kernel would and turns
any error into ``OSError`` with the errno the mount would return, so a test can
run the same operation against the core and against ``os`` on a real
directory and compare results and errnos.  Symlinks are never followed
(lstat semantics).
"""

from __future__ import annotations

import errno
import functools
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from lakemount.fuse.core import Attr, Caller, FileSystem, SetAttr
from lakemount.fuse.errno import errno_of
from lakemount.fuse.inodes import ROOT_INODE

T = TypeVar("T")


def _split(path: str) -> list[bytes]:
    return [p.encode("utf-8", "surrogateescape") for p in path.strip("/").split("/") if p]


class PathFS:
    """os-like calls on a ``FileSystem``; ``caller`` is who asks."""

    def __init__(self, fs: FileSystem, caller: Caller | None = None) -> None:
        self.fs = fs
        self.caller = caller or Caller()

    @staticmethod
    def _call(fn: Callable[[], T]) -> T:
        try:
            return fn()
        except OSError as exc:
            if type(exc) is not OSError or exc.errno is None:
                raise OSError(exc.errno, exc.strerror) from exc  # the errno's own subclass
            raise
        except Exception as exc:
            code = errno_of(exc)
            if code is None:
                raise
            raise OSError(code, f"{os.strerror(code)}: {exc}") from exc

    def ino(self, path: str) -> int:
        def walk() -> int:
            ino = ROOT_INODE
            for part in _split(path):
                ino = self.fs.lookup(ino, part).ino
            return ino

        return self._call(walk)

    def _parent(self, path: str) -> tuple[int, bytes]:
        parts = _split(path)
        if not parts:
            raise OSError(errno.EBUSY, "the root")
        parent = "/".join(p.decode("utf-8", "surrogateescape") for p in parts[:-1])
        ino = self.ino(parent)
        if not stat.S_ISDIR(self._call(lambda: self.fs.getattr(ino)).mode):
            raise OSError(errno.ENOTDIR, parent)  # the kernel's path walk says so before any request
        return ino, parts[-1]

    # --- metadata ------------------------------------------------------------
    def lstat(self, path: str) -> Attr:
        ino = self.ino(path)
        return self._call(lambda: self.fs.getattr(ino))

    def exists(self, path: str) -> bool:
        try:
            self.lstat(path)
            return True
        except FileNotFoundError:
            return False

    def listdir(self, path: str) -> list[str]:
        ino = self.ino(path)
        fh = self._call(lambda: self.fs.opendir(ino, self.caller))
        names: list[str] = []
        try:
            pos = 0
            while True:
                items = self._call(functools.partial(self.fs.readdir, fh, pos))
                if not items:
                    break
                for it in items:
                    if it.name not in (b".", b".."):
                        names.append(it.name.decode("utf-8", "surrogateescape"))
                    pos = it.next_id
        finally:
            self.fs.releasedir(fh)
        return names

    def mkdir(self, path: str, mode: int = 0o755) -> Attr:
        parent, name = self._parent(path)
        return self._call(lambda: self.fs.mkdir(parent, name, mode, self.caller))

    def rmdir(self, path: str) -> None:
        parent, name = self._parent(path)
        self._call(lambda: self.fs.rmdir(parent, name))

    def unlink(self, path: str) -> None:
        parent, name = self._parent(path)
        self._call(lambda: self.fs.unlink(parent, name))

    def rename(self, src: str, dst: str, flags: int = 0) -> None:
        sp, sn = self._parent(src)
        dp, dn = self._parent(dst)
        self._call(lambda: self.fs.rename(sp, sn, dp, dn, flags))

    def link(self, src: str, dst: str) -> Attr:
        """A hard link ``dst`` to ``src`` (``os.link``, symlinks not followed)."""
        ino = self.ino(src)
        parent, name = self._parent(dst)
        return self._call(lambda: self.fs.link(ino, parent, name))

    def symlink(self, target: str, path: str) -> None:
        parent, name = self._parent(path)
        self._call(lambda: self.fs.symlink(parent, name, target.encode(), self.caller))

    def readlink(self, path: str) -> str:
        ino = self.ino(path)
        return self._call(lambda: self.fs.readlink(ino)).decode()

    def setattr(self, path: str, changes: SetAttr) -> Attr:
        ino = self.ino(path)
        return self._call(lambda: self.fs.setattr(ino, changes, None, self.caller))

    def chmod(self, path: str, mode: int) -> Attr:
        return self.setattr(path, SetAttr(mode=mode))

    def truncate(self, path: str, size: int) -> Attr:
        return self.setattr(path, SetAttr(size=size))

    def setxattr(self, path: str, name: str, value: bytes) -> None:
        ino = self.ino(path)
        self._call(lambda: self.fs.setxattr(ino, name.encode(), value))

    def getxattr(self, path: str, name: str) -> bytes:
        ino = self.ino(path)
        return self._call(lambda: self.fs.getxattr(ino, name.encode()))

    def listxattr(self, path: str) -> list[str]:
        ino = self.ino(path)
        return [n.decode() for n in self._call(lambda: self.fs.listxattr(ino))]

    def removexattr(self, path: str, name: str) -> None:
        ino = self.ino(path)
        self._call(lambda: self.fs.removexattr(ino, name.encode()))

    # --- content -------------------------------------------------------------
    def open(self, path: str, flags: int = os.O_RDONLY, mode: int = 0o644) -> int:
        """A file handle; O_CREAT/O_EXCL/O_TRUNC behave as open(2) does through the kernel."""
        if flags & os.O_CREAT:
            parent, name = self._parent(path)
            try:
                ino = self._call(lambda: self.fs.lookup(parent, name).ino)
            except FileNotFoundError:
                opened, _attr = self._call(lambda: self.fs.create(parent, name, mode, flags & ~os.O_CREAT, self.caller))
                return opened.fh
            if flags & os.O_EXCL:
                raise OSError(errno.EEXIST, path)
        else:
            ino = self.ino(path)
        attr = self._call(lambda: self.fs.getattr(ino))
        if stat.S_ISDIR(attr.mode) and flags & os.O_ACCMODE != os.O_RDONLY:
            raise OSError(errno.EISDIR, path)
        return self._call(lambda: self.fs.open(ino, flags, self.caller)).fh

    def pread(self, fh: int, offset: int, size: int) -> bytes:
        return self._call(lambda: self.fs.read(fh, offset, size))

    def pwrite(self, fh: int, offset: int, data: bytes) -> int:
        return self._call(lambda: self.fs.write(fh, offset, data))

    def fsync(self, fh: int) -> None:
        self._call(lambda: self.fs.fsync(fh))

    def close(self, fh: int) -> None:
        try:
            self._call(lambda: self.fs.flush(fh))
        finally:
            self._call(lambda: self.fs.release(fh))

    @contextmanager
    def opened(self, path: str, flags: int = os.O_RDONLY, mode: int = 0o644) -> Iterator[int]:
        fh = self.open(path, flags, mode)
        try:
            yield fh
        finally:
            self.close(fh)

    def read_file(self, path: str) -> bytes:
        with self.opened(path) as fh:
            out = []
            offset = 0
            while True:
                chunk = self.pread(fh, offset, 1 << 20)
                if not chunk:
                    return b"".join(out)
                out.append(chunk)
                offset += len(chunk)

    def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        with self.opened(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode) as fh:
            if data:
                self.pwrite(fh, 0, data)

    def append(self, path: str, data: bytes) -> None:
        with self.opened(path, os.O_WRONLY | os.O_APPEND) as fh:
            size = self.fs.getattr(self.ino(path)).size
            self.pwrite(fh, size, data)

    def write_at(self, path: str, offset: int, data: bytes) -> None:
        with self.opened(path, os.O_RDWR) as fh:
            self.pwrite(fh, offset, data)


# The operations the pyfuse3 adapter first runs without blocking (``fast=True`` in lakemount/fuse/adapter.py).
FAST_OPS = frozenset({"lookup", "getattr", "readlink", "statfs", "link", "open", "create", "read", "write", "flush",
                      "release", "opendir", "listxattr"})


class FastFirst:
    """A ``FileSystem`` called as the adapter calls it: each fast operation first under ``nonblocking`` and,
    if it raises ``NeedsThread``, again as a worker thread would.  ``threaded`` counts those second calls per
    operation.  An operation that changed anything before raising ``NeedsThread`` shows here as a wrong result
    of its second call (EEXIST from a create, a write applied twice...)."""

    def __init__(self, fs: FileSystem) -> None:
        self.fs = fs
        self.threaded: dict[str, int] = {}

    def __getattr__(self, name: str) -> object:
        attr = getattr(self.fs, name)
        if name not in FAST_OPS:
            return attr

        @functools.wraps(attr)
        def call(*args: object) -> object:
            from lakemount.fuse.core import NeedsThread

            try:
                with self.fs.nonblocking():
                    return attr(*args)
            except NeedsThread:
                self.threaded[name] = self.threaded.get(name, 0) + 1
                return attr(*args)

        return call
