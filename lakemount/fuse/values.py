"""The plain values the filesystem core takes and returns, free of pyfuse3 types.

The adapter converts them to and from pyfuse3's ``EntryAttributes``,
``FileInfo``, ``SetattrFields`` and ``StatvfsData``; tests use them as they are.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import NamedTuple


@dataclass(frozen=True, slots=True)
class Caller:
    """Who asks: the requesting process's credentials (from the FUSE request)."""

    uid: int = 0
    gid: int = 0
    pid: int = 0


class Attr(NamedTuple):
    """The attributes of one inode, and how long the kernel may cache them and the name.

    A named tuple, not a dataclass: readdir builds one per entry, and a frozen
    dataclass costs three times as much to construct.
    """

    ino: int
    mode: int
    nlink: int
    uid: int
    gid: int
    size: int
    atime_ns: int
    mtime_ns: int
    ctime_ns: int
    timeout: float
    # st_blksize: cp and most tools size their buffers by it, so 1 MiB makes one FUSE write of 1 MiB (the
    # kernel's largest, max_pages 256) where 128 KiB made eight, each a round trip through the mount.
    blksize: int = 1 << 20
    rdev: int = 0  # device number of a character or block device node
    stored: int | None = None  # bytes the content takes where it is held, if not ``size`` (an open write buffer with holes)

    @property
    def blocks(self) -> int:
        """``st_blocks``: 512-byte units of what is stored, so ``du`` counts a sparse file's written bytes only."""
        return ((self.size if self.stored is None else self.stored) + 511) // 512


@dataclass(frozen=True, slots=True)
class SetAttr:
    """Attributes to change (None: unchanged)."""

    size: int | None = None
    mode: int | None = None
    uid: int | None = None
    gid: int | None = None
    atime_ns: int | None = None
    mtime_ns: int | None = None
    # Clear set-user-ID (and set-group-ID of a group-executable file), as a write, truncation or chown by a
    # process without CAP_FSETID does: the kernel leaves that to the mount under HANDLE_KILLPRIV_V2 (kflags).
    kill_suidgid: bool = False


@dataclass(frozen=True, slots=True)
class Opened:
    """The reply to open/create: the handle and the kernel cache flags for it."""

    fh: int
    keep_cache: bool = False
    direct_io: bool = False
    noflush: bool = False  # close(2) needs no FLUSH: nothing can be written through the handle
    backing: int = 0  # a passthrough open of this backing id (fuse/passthrough.py): the kernel writes the temp file


class DirItem(NamedTuple):
    """One readdir entry; ``counted`` items raised their inode's lookup count."""

    name: bytes
    attr: Attr
    next_id: int
    counted: bool


@dataclass(frozen=True, slots=True)
class StatFs:
    """The reply to statfs: block and inode counts as statvfs(3) reports them."""

    bsize: int
    frsize: int
    blocks: int
    bfree: int
    bavail: int
    files: int
    ffree: int
    favail: int
    namemax: int


@dataclass(frozen=True)
class MountOptions:
    """How one mount behaves; built by the CLI from flags and configuration."""

    spool_dir: str
    ref: tuple[str, str] | None = None  # (repo, ref): mount that ref as the root
    head_ttl: float = 1.0
    immutable_ttl: float = 86400.0
    uid: int = dataclasses.field(default_factory=os.getuid)
    gid: int = dataclasses.field(default_factory=os.getgid)
    recovered_dir: str = ""  # where content that could not be saved is kept
    read_ahead_kb: int = 1024  # the kernel's read-ahead window for the mount (0: the kernel's default)
    notify: bool = True  # follow other nodes' branch changes as pushed by the ref store (PostgreSQL)
    writeback: bool = False  # close returns once the file is in the node's journal (fuse/writeback.py)
    journal_dir: str = ""  # the write-back journal of this mountpoint (its spool dir is inside)
    journal_bytes: int = 1 << 30  # journaled bytes not yet uploaded, at most
    journal_fsync: bool = False  # each close waits for an fsync of its data and record
    writeback_retry: float = 300.0  # seconds the pipeline retries an unavailable store before keeping a file aside
    passthrough: str = "off"  # FUSE passthrough of write-only opens: auto, on, off (fuse/passthrough.py)
