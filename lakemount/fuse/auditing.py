"""The mount's audit records: one per open handle (bytes read and written, at release) and one per directory listing.

Per handle, not per read call: a process streaming a file with a million
``read(2)`` calls is one record.  The caller is the local uid, its process
name and pid (from the FUSE request at open); the user is the lakemount user
``mount.users`` maps the uid to, else the local account name.  Names are looked
up once per uid and pid (small bounded caches): a warm open costs a dict
lookup and an append to the audit buffer.
"""

from __future__ import annotations

import errno
import pwd
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from lakemount.audit.record import MOUNT

if TYPE_CHECKING:
    from lakemount.audit.log import AuditLog
    from lakemount.fuse.inodes import Node

_MOST_NAMES: Final = 4096
# A failed operation's errno as the audit record's HTTP-like status (record.py), so one filter finds the
# mount's refusals with the gateway's and the API's.
STATUS_BY_ERRNO: Final = {
    errno.ENOENT: 404, errno.EACCES: 403, errno.EPERM: 403, errno.EROFS: 403, errno.EEXIST: 409, errno.EBUSY: 409,
    errno.ENOTEMPTY: 409, errno.EINVAL: 400, errno.EISDIR: 400, errno.ENOTDIR: 400, errno.ELOOP: 400,
    errno.ENAMETOOLONG: 400, errno.ENOSPC: 507, errno.EAGAIN: 503,
    errno.ENODATA: 412, errno.ECANCELED: 409,  # a control file's nothing to commit, merge conflict
}


def _process_name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", "rb") as f:
            return f.read().rstrip(b"\n").decode("utf-8", "replace")
    except OSError:
        return ""


class MountAudit:
    """Turns handles and listings of one mount into audit records."""

    def __init__(self, log: AuditLog, users: Mapping[int, str] | None = None) -> None:
        self.log = log
        self.users = dict(users or {})
        self._names: dict[int, str] = {}
        self._processes: dict[int, str] = {}

    def user(self, uid: int) -> str:
        """The lakemount user ``mount.users`` maps ``uid`` to, else its local account name (else ``uid:N``)."""
        name = self._names.get(uid)
        if name is None:
            name = self.users.get(uid)
            if name is None:
                try:
                    name = pwd.getpwuid(uid).pw_name
                except KeyError:
                    name = f"uid:{uid}"
            if len(self._names) >= _MOST_NAMES:
                self._names.clear()
            self._names[uid] = name
        return name

    def process(self, pid: int) -> str:
        """The command name of process ``pid`` ("" if it is gone), remembered per pid."""
        name = self._processes.get(pid)
        if name is None:
            name = _process_name(pid) if pid > 0 else ""
            if len(self._processes) >= _MOST_NAMES:
                self._processes.clear()
            self._processes[pid] = name
        return name

    def failed(self, node: Node, uid: int, pid: int, op: str, exc: BaseException, *, path: str | None = None) -> None:
        """A record of ``op`` on ``node`` by process ``pid`` of ``uid`` that failed with ``exc``, its status by the
        errno the caller gets."""
        from lakemount.fuse.errno import errno_of

        self.record(node, uid, pid, op, status=STATUS_BY_ERRNO.get(errno_of(exc) or errno.EIO, 500), path=path)

    def record(self, node: Node, uid: int, pid: int, op: str, *, nbytes: int = 0, status: int = 200,
               path: str | None = None) -> None:
        """One record of ``op`` on ``node`` (a file or directory of a mounted ref) by process ``pid`` of ``uid``.

        The caller as two numbers, not a :class:`~lakemount.fuse.values.Caller`: a handle's release has them
        stored, and building a frozen dataclass per record cost the request path as much as queueing it.
        """
        scope = node.scope
        if scope is None:
            return
        self.log.record(repo=scope.repo, op=op, ref=scope.name, commit=scope.resolved.commit_id,
                        path=node.path if path is None else path, nbytes=nbytes, status=status,
                        user=self.user(uid), frontend=MOUNT, client="", uid=uid,
                        process=self.process(pid), pid=pid)
