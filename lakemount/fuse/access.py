"""The mount's access control when it is shared with other local users (``allow_other``).

The rule (docs/SEMANTICS.md, "The mount's access control"):

- The mount's own user (the uid running the mount process) and root act as the
  mount itself, as without ``allow_other``: no policy applies to them.  Both
  can read LAKEMOUNT_HOME (the ref store, the objects) directly, so a policy
  would not bind them anyway.
- Every other uid must be mapped to a lakemount user in ``mount.users``
  (``{local user name or uid: lakemount user id}``); that user's policies
  decide, per repository, as in the S3 gateway and the REST API: reading
  anything of a repository (lookup, stat, list, open for reading, read a link
  or an xattr) needs ``ReadRepo``, changing anything (create, write, truncate,
  rename, remove, chmod, xattrs, a control file such as ``.lakefs/commit``)
  needs ``WriteRepo``.  The mount root and its ``.lakefs`` (repository names,
  statistics) are open to every mapped user.
- An unmapped uid gets EACCES on everything.

A decision is cached for ``TTL`` seconds per (uid, repository, read or write),
so a changed policy takes effect within it and a request usually costs a dict
lookup.  Files already open keep the access they were opened with.
"""

from __future__ import annotations

import errno
import os
import pwd
from collections.abc import Callable, Mapping
from typing import Any, Final

from lakemount.auth.cache import TtlCache
from lakemount.auth.policies import Action
from lakemount.errors import InvalidArgument
from lakemount.fuse.errno import FsError

TTL: Final = 5.0
KEY: Final = "mount.users"


def parse_users(raw: Any, *, owners: frozenset[int]) -> dict[int, str]:
    """``mount.users`` as ``{uid: lakemount user id}``: a mapping, or ``name=user,1001=user`` text.

    Raises ``InvalidArgument`` (one line) for a malformed value, a local user
    name that does not exist, or a uid in ``owners`` (they act as the mount).
    """
    if not raw:
        return {}
    if isinstance(raw, str):
        pairs = [p.split("=", 1) for p in raw.split(",") if p.strip()]
        if any(len(p) != 2 for p in pairs):
            raise InvalidArgument(f"{KEY} must look like localuser=lakemountuser,...")
        raw = {k.strip(): v.strip() for k, v in pairs}
    if not isinstance(raw, Mapping):
        raise InvalidArgument(f"{KEY} must map local user names or uids to lakemount user ids")
    out: dict[int, str] = {}
    for local, user in raw.items():
        local, user = str(local).strip(), str(user).strip()
        if not local or not user:
            raise InvalidArgument(f"{KEY}: {local or '(empty)'} needs a lakemount user id")
        if local.isdigit():
            uid = int(local)
        else:
            try:
                uid = pwd.getpwnam(local).pw_uid
            except KeyError:
                raise InvalidArgument(f"{KEY}: no local user named {local!r}") from None
        if uid in owners:
            raise InvalidArgument(f"{KEY}: {local} is the mount's own user or root, which act as the mount itself")
        out[uid] = user
    return out


class MountAccess:
    """Decides whether a uid may read or change a repository through the mount (see the module docstring).

    ``authorize(user_id, action, repo)`` is the auth store's decision (it may
    query the ref store, and raise what that raises).
    """

    def __init__(
        self, users: Mapping[int, str], authorize: Callable[[str, Action, str], bool], *,
        owners: frozenset[int] | None = None, ttl: float = TTL,
    ) -> None:
        self.owners = frozenset({os.getuid(), 0}) if owners is None else owners
        self.users = dict(users)
        self._authorize = authorize
        self._decisions = TtlCache(ttl)

    def is_owner(self, uid: int) -> bool:
        """Whether ``uid`` acts as the mount itself (no policy applies)."""
        return uid in self.owners

    def cached(self, uid: int, repo: str | None, write: bool) -> bool | None:
        """The decision without I/O, or None if it must be asked (:meth:`decide`)."""
        if uid in self.owners:
            return True
        user = self.users.get(uid)
        if user is None:
            return False
        if repo is None:
            return True
        hit = self._decisions.get((uid, repo, write))
        return None if hit is None else bool(hit)

    def decide(self, uid: int, repo: str | None, write: bool) -> bool:
        """Whether ``uid`` may read (or, with ``write``, change) ``repo`` (None: nothing of a repository)."""
        known = self.cached(uid, repo, write)
        if known is not None:
            return known
        assert repo is not None
        allowed = self._authorize(self.users[uid], Action.WRITE_REPO if write else Action.READ_REPO, repo)
        self._decisions.put((uid, repo, write), allowed)
        return allowed

    def check(self, uid: int, repo: str | None, write: bool) -> None:
        """Raise ``FsError(EACCES)`` unless :meth:`decide` allows."""
        if not self.decide(uid, repo, write):
            raise FsError(errno.EACCES, f"uid {uid} may not {'change' if write else 'read'} {repo or 'this mount'}")
