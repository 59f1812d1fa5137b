"""What lakemount keeps on the local disk is readable by the user running it alone.

LAKEMOUNT_HOME holds the ref store (SQLite: every branch, user and policy), the
local block store (every object of every repository), the caches, open files'
spools, recovered files, logs and the server key.  A local user who could read
them would bypass every policy, so:

- :func:`keep_private` sets the process umask to ``077`` once, in the CLI's
  ``main``; every process lakemount starts (the mount, the gateway's and the
  API's workers, Spark) inherits it, so whatever any of them creates (the
  database and its ``-wal``/``-shm``, data objects, ranges, cache files, logs)
  is ``0600`` and every directory ``0700``, with no mode to remember at each
  place that creates one.
- :func:`prepare_home` (run by the composition root, ``App``) creates the home
  ``0700`` and tightens one made by an older version, which left it ``0755``
  with the database ``0644``: the home and its top-level entries lose every
  group and other bit, with a warning naming them.  Deeper entries need no
  visit: nobody else can reach them through a ``0700`` home.
- Files written *for* the user outside the home (``fs download``) take the
  umask the user ran lakemount with (:func:`user_mode`), as any tool's output.
"""

from __future__ import annotations

import os
import stat
from typing import Final

PRIVATE_UMASK: Final = 0o077
# What an older version created in the home that may be open to others (the mount point is
# left alone: while mounted, a chmod there would go to the mount, not to the directory).
HOME_ENTRIES: Final = (
    "lakemount.db", "lakemount.db-wal", "lakemount.db-shm", "lakemount.db-journal", "server.key",
    "data", "cache", "recovered", "log", "run", "tmp", "spool",
)

_user_umask: int | None = None


def keep_private() -> None:
    """Make every file and directory this process (and its children) creates private to its user."""
    global _user_umask
    previous = os.umask(PRIVATE_UMASK)
    if _user_umask is None:
        _user_umask = previous


def user_mode(mode: int) -> int:
    """``mode`` under the umask the user started lakemount with, for files it writes for the user."""
    umask = _user_umask
    if umask is None:  # keep_private was not called: the process umask is still the user's
        umask = os.umask(0)
        os.umask(umask)
    return mode & ~umask


def user_makedirs(path: str) -> None:
    """``os.makedirs(path, exist_ok=True)``, with the directories it makes under :func:`user_mode`."""
    missing = []
    head = os.path.abspath(path)
    while not os.path.exists(head):
        missing.append(head)
        head = os.path.dirname(head)
    os.makedirs(path, exist_ok=True)
    for made in reversed(missing):
        os.chmod(made, user_mode(0o777))


def prepare_home(home: str, others: tuple[str, ...] = ()) -> None:
    """Create ``home`` ``0700``, or tighten it, its top-level entries and ``others`` (the
    database, data and cache paths when configured outside it) if group or others may use them.

    Logs one warning naming what was tightened.  A path that cannot be changed
    (owned by someone else) is left as it is, named in the warning too.
    """
    os.makedirs(home, mode=0o700, exist_ok=True)
    tightened: list[str] = []
    failed: list[str] = []
    for path in (home, *(os.path.join(home, name) for name in HOME_ENTRIES), *others):
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISLNK(st.st_mode) or not st.st_mode & 0o077:
            continue
        try:
            os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o077)
            tightened.append(f"{path} ({stat.S_IMODE(st.st_mode):o})")
        except OSError as exc:
            failed.append(f"{path} ({exc.strerror})")
    if tightened or failed:
        import logging  # only to warn: every CLI verb, ``--help`` too, imports this module (issue 41)

        log = logging.getLogger(__name__)
        if tightened:
            log.warning("made private to this user (they were open to others): %s", ", ".join(tightened))
        if failed:
            log.warning("could not make private (others may read them): %s", ", ".join(failed))
