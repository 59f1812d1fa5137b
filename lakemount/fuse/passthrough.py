"""FUSE passthrough for write-only opens: the kernel writes the temp file itself (issue 36, stop 54).

Linux 6.9 on can send an open's reads and writes straight to a file the daemon holds (a *backing file*),
with no request to the daemon: the mount registers the open's temp file on the session fd (a backing id,
``kflags.backing_open``) and answers the OPEN or CREATE with ``FOPEN_PASSTHROUGH`` and that id (the shim in
``_kflags.c`` asks for passthrough in the INIT reply and writes the id into the open reply).  A 1 MiB
write then costs what a write to a local file costs: no copy through ``/dev/fuse``, no request, no Python.

The mount uses it (``mount.passthrough``: ``auto``, ``on``, ``off``; with write-back too since stop 55: the
journal takes a large temp file over at close unhashed and unsynced, and its pipeline hashes it) for an open that:

* is write-only (``cp``, ``dd``, Spark's output streams), of a regular file on a repository whose store keeps the
  temp file itself as the object (the local block store, ``in_place``): on S3 the mount's own writes send each
  part as it fills, which a write the mount never sees cannot;
* needs no copy of stored content first (``O_TRUNC``, an empty file, or one already being written);
* is the file's only open handle.  While a passthrough open is left, every other open of the file is one too,
  of the same backing id, whatever its flags: the kernel refuses (EIO at open) an open of such an inode without
  passthrough, cached or ``direct_io``, and a second backing file for it; a reader's reads then come from the
  temp file in the kernel, as the writer's bytes are.

What the mount no longer sees it reads from the temp file (``DirtyFile.pass_begin``/``catch_up``: size, mtime
and ctime), and a save hashes the file then (``writes.hash_fd``); with write-back a large one is journaled unhashed
and the pipeline hashes it (stop 55).  A save while a passthrough open is left
(``fsync(2)``, or the close(2) of one descriptor of several) stores a private copy, unless no process holds a
descriptor of the file any more (:func:`descriptors_open`, asked for a file of ``SCAN_FROM`` bytes or more: the
descriptor closed by that close(2) is gone from its table when the FLUSH is sent), so a write that follows
never changes a stored object.  When the kernel refuses a backing file (``backing_open``'s errno), the open goes
on without passthrough, counted and logged once.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable
from typing import Final

from lakemount.fuse import kflags

log = logging.getLogger(__name__)

MODES: Final = ("auto", "on", "off")
SCAN_FROM: Final = 16 << 20  # below this a save while a passthrough open is left copies the file (cheaper than a scan)

_refused_logged = False


def wanted(mode: str) -> bool:
    """Whether a mount with ``mount.passthrough`` = ``mode`` asks the kernel for passthrough (with or without
    write-back: stop 55).  Raises ValueError for an unknown mode."""
    if mode not in MODES:
        raise ValueError(f"mount.passthrough must be one of {', '.join(MODES)}, not {mode!r}")
    return mode != "off"


def granted(mode: str) -> bool:
    """After INIT: True if the kernel took passthrough; with ``on``, a refusal is logged as a warning."""
    offered, asked = kflags.passthrough()
    if mode == "on" and not asked:
        log.warning("mount.passthrough is on but the kernel %s: writes go through the mount",
                    "did not offer FUSE passthrough (Linux >= 6.9)" if not offered else "or the shim refused it")
    return asked


def refused(exc: OSError) -> None:
    """A backing file the kernel refused: logged once per process (the open goes on without passthrough)."""
    global _refused_logged
    if not _refused_logged:
        _refused_logged = True
        log.warning("FUSE passthrough refused by the kernel (%s): such opens go through the mount", exc)


def register(fd: int) -> int:
    """A backing id for the temp file ``fd`` (``kflags.backing_open``; OSError with the kernel's errno)."""
    return kflags.backing_open(fd)


def close_backing(backing_id: int) -> None:
    """Unregister a backing id (the opens using it keep their file); an ended session has none left."""
    with contextlib.suppress(OSError):
        kflags.backing_close(backing_id)


def descriptors_open(paths: Iterable[str], proc: str = "/proc") -> bool:
    """True if some process holds a descriptor whose path ends with one of ``paths`` (a file's names inside the
    mount: a conservative match, any mount namespace's prefix), or if the process table cannot be read whole."""
    tails = tuple("/" + p.lstrip("/") for p in paths if p)
    if not tails:
        return True
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return True
    me = str(os.getpid())
    for pid in pids:
        if pid == me:
            continue
        fd_dir = f"{proc}/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except FileNotFoundError:  # gone meanwhile
            continue
        except OSError:  # not ours to read: it may hold one
            return True
        for fd in fds:
            try:
                target = os.readlink(f"{fd_dir}/{fd}")
            except OSError:
                continue
            target = target.removesuffix(" (deleted)")
            if target.endswith(tails):
                return True
    return False
