"""Where an upload's bytes land while they are verified, and how they become a stored object.

A body is written to a *landing file* as it arrives; only when every check
passed is the file turned into the object (content-addressed, or a part), and
on any failure it is removed.  For a repository on the local block store the
landing file lies inside the storage namespace itself, named ``.tmp-...`` (the
prefix ``LocalAdapter`` reserves for files not yet in place, and skips when
listing), and becoming the object is a rename: the bytes are written to disk
once, and flushed while the upload is still arriving rather than all at the
end.  On any other block store the landing file is a local temporary file
handed to ``put_file``.

This belongs in the block adapter (a streaming writer that commits on exit,
STYLE §7); it lives here until ``BlockAdapter`` has one.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Final

from lakemount.block.local import TEMP_PREFIX, LocalAdapter
from lakemount.block.urls import scheme_of
from lakemount.catalog.catalog import Catalog
from lakemount.errors import ObjectNotFound
from lakemount.graveler.model import Repository

FLUSH_EVERY: Final = 16 * 1024 * 1024
_flusher = ThreadPoolExecutor(4, thread_name_prefix="lm-gw-flush")


class Landing:
    """A file being filled with an upload; ``store_as`` makes it an object, ``discard`` drops it."""

    def __init__(self, path: str, *, local_namespace: bool) -> None:
        self.path = path
        self.local_namespace = local_namespace
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        self._written = 0
        self._unflushed = 0
        self._flush: Future[None] | None = None
        self._lock = threading.Lock()

    def write(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
        self._written += len(data)
        self._unflushed += len(data)
        if self.local_namespace and self._unflushed >= FLUSH_EVERY and (self._flush is None or self._flush.done()):
            # Start writing back what we have while the rest arrives; the final
            # fsync then has little left to do.
            self._unflushed = 0
            self._flush = _flusher.submit(os.fdatasync, self._fd)

    def close(self) -> None:
        with self._lock:
            if self._fd < 0:
                return
            if self._flush is not None:
                with contextlib.suppress(OSError):
                    self._flush.result()
            os.close(self._fd)
            self._fd = -1

    def sync_and_close(self) -> None:
        if self._flush is not None:
            self._flush.result()
        os.fsync(self._fd)
        self.close()

    def discard(self) -> None:
        self.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


def _local_dir(catalog: Catalog, repo: Repository, sub: str) -> str | None:
    """The directory of ``<namespace>/<sub>`` when the namespace is on the local block store."""
    root = catalog.physical_url(repo, sub)
    if scheme_of(root) != "local":
        return None
    return LocalAdapter.path_of(root)


@contextlib.contextmanager
def landing(catalog: Catalog, repo: Repository, tmpdir: str | None, sub: str = "data") -> Iterator[Landing]:
    """A landing file for an upload into ``repo``; removed on exit unless it became an object."""
    directory = _local_dir(catalog, repo, sub)
    name = f"{TEMP_PREFIX}gw-{secrets.token_hex(8)}"
    if directory is not None:
        os.makedirs(directory, exist_ok=True)
        land = Landing(os.path.join(directory, name), local_namespace=True)
    else:
        land = Landing(os.path.join(tmpdir or "/tmp", name), local_namespace=False)
    try:
        yield land
    finally:
        land.discard()


def store_as(catalog: Catalog, land: Landing, url: str) -> None:
    """Make the landing file the object ``url`` (replacing any object there)."""
    if land.local_namespace and scheme_of(url) == "local":
        land.sync_and_close()
        dest = LocalAdapter.path_of(url)
        directory = os.path.dirname(dest)
        os.makedirs(directory, exist_ok=True)
        os.replace(land.path, dest)
        _fsync_dir(directory)
        return
    land.close()
    catalog.adapter.put_file(url, land.path)


def store_content(catalog: Catalog, repo: Repository, land: Landing, sha256: str) -> str:
    """Make the landing file the repository's content-addressed object; returns its address."""
    address = f"data/{sha256[:2]}/{sha256}"
    url = catalog.physical_url(repo, address)
    if not _exists(catalog, url):
        store_as(catalog, land, url)
    return address


def _exists(catalog: Catalog, url: str) -> bool:
    # As Catalog.write_data does: an existing object has its mtime refreshed so
    # that a garbage collection that began earlier keeps it.
    touch = getattr(catalog.adapter, "touch", None)
    if touch is not None:
        try:
            touch(url)
            return True
        except ObjectNotFound:
            return False
    return catalog.adapter.exists(url)


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on directories
    finally:
        os.close(fd)
