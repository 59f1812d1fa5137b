"""What the processes of one node share through its disk: the mounts' pid files, and the frame of their
write-back journals, which a commit or merge from another process of the node waits for (issue 36).

Light on purpose (the CLI's quick verbs load it): the journal itself, which writes and replays, is
``lakemount/fuse/journal.py``; this module holds what any process reads of it.

A mount's pid file is ``LAKEMOUNT_HOME/run/mount-<slug>.pid``; with write-back its journal is
``<mount.journal_dir or LAKEMOUNT_HOME/journal>/<slug>/`` (``runner.mount_options``).  A commit or
merge through the CLI or the API on the node first waits until no live mount of the node holds an
unstaged record for the branch (:func:`wait_for_mounts`), so "my commit holds what I wrote" holds for
every front end of the host, as it does for the mount's own control files.  A journal whose mount is
not running is not waited for (its records are staged when it mounts again, after a replay): the
commit says so in the log.  Past ``timeout`` (the mount's store is down) the commit is refused.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import struct
import time
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from lakemount.errors import Unavailable
from lakemount.pids import alive

if TYPE_CHECKING:
    from lakemount.app import App

log = logging.getLogger(__name__)

MAGIC: Final = b"LMJ1"
HEADER: Final = struct.Struct("<4sII")  # magic, payload length, CRC-32 of the payload
MAX_RECORD: Final = 16 << 20

WAIT_MARGIN = 30.0  # beyond ``mount.writeback_retry``: by then the pipeline staged the records or kept them aside
POLL = 0.05


def pid_file(home: str, mountpoint: str) -> str:
    """The pid file path under ``home/run`` for a mount at ``mountpoint`` (unique per absolute path)."""
    mp = os.path.abspath(mountpoint)
    slug = mp.strip("/").replace("/", "-")[-80:] or "root"
    return os.path.join(home, "run", f"mount-{slug}-{hashlib.sha1(mp.encode()).hexdigest()[:8]}.pid")


def read_pid(path: str) -> int | None:
    """The pid recorded in ``path`` if that process is alive, else None (missing or bad file, dead process)."""
    try:
        with open(path) as f:
            pid = int(f.read().strip() or 0)
    except (OSError, ValueError):
        return None
    return pid if pid > 0 and alive(pid) else None


def wait_for_mounts(
    home: str, journal_root: str, repo: str, branch: str, *, timeout: float,
    sleep: Callable[[float], None] = time.sleep, now: Callable[[], float] = time.monotonic,
) -> int:
    """Wait until no live mount of this node holds unstaged writes to ``repo``/``branch``; returns how
    many records were waited for.  Raises ``Unavailable`` when some are still there after ``timeout``."""
    root = journal_root or os.path.join(home, "journal")
    try:
        slugs = sorted(os.listdir(root))
    except (FileNotFoundError, NotADirectoryError):
        return 0
    deadline = now() + timeout
    waited = 0
    for slug in slugs:
        log_path = os.path.join(root, slug, "log")
        left = unstaged(log_path, repo, branch)
        if not left:
            continue
        if read_pid(os.path.join(home, "run", f"mount-{slug}.pid")) is None:
            log.warning("the write-back journal %s holds %d unstaged write(s) to %s/%s, but its mount is not running: "
                        "they are staged when it mounts again, not in this commit", os.path.join(root, slug), left, repo, branch)
            continue
        waited = max(waited, left)
        log.warning("waiting for the mount %s: %d write(s) to %s/%s not yet staged", slug, left, repo, branch)
        while left:
            if now() >= deadline:
                raise Unavailable(
                    f"a mount of this node ({slug}) still holds {left} write(s) to {repo}/{branch} that are not staged "
                    f"after {timeout:.0f}s (is its block store down? see its .lakefs/status): refused, since the "
                    "commit would not hold them"
                )
            sleep(POLL)
            left = unstaged(log_path, repo, branch)
    return waited


def settle(app: App, repo: str, branch: str) -> None:
    """Before a commit or merge into ``branch`` from the CLI or the API: wait for this node's mounts' journals."""
    cfg = app.config.mount
    waited = wait_for_mounts(app.config.home, cfg.journal_dir, repo, branch, timeout=cfg.writeback_retry + WAIT_MARGIN)
    if waited:
        log.info("waited for %d write(s) to %s/%s in this node's write-back journals", waited, repo, branch)


def unstaged(log_path: str, repo: str, branch: str) -> int:
    """How many records of the journal log at ``log_path`` for ``repo``/``branch`` are not yet staged.

    Read-only, for another process of the node (a commit from the CLI or the API waits for it to reach 0):
    the log is read as it is, a torn or corrupt tail is skipped, and a missing log holds nothing.  The
    mount appends to the log without syncing each record, so what it wrote is in the page cache, which
    every process of the node reads.
    """
    try:
        with open(log_path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return 0
    done, seqs, pos = 0, [], 0
    while pos + HEADER.size <= len(data):
        magic, length, crc = HEADER.unpack_from(data, pos)
        end = pos + HEADER.size + length
        if magic != MAGIC or length > MAX_RECORD or end > len(data):
            break  # the rest is being written, or damaged: the mount's replay judges it
        payload = data[pos + HEADER.size : end]
        pos = end
        if zlib.crc32(payload) != crc:
            continue
        try:
            body = json.loads(payload)
        except ValueError:
            continue
        if body.get("op") == "done":
            done = max(done, int(body.get("upto", 0)))
        elif body.get("repo") == repo and body.get("branch") == branch:
            seqs.append(int(body.get("seq", 0)))
    return sum(1 for seq in seqs if seq > done)
