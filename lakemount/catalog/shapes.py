"""The one JSON shape of each object, as lakeFS's REST API draws it.

Every front end that prints or serves an object as JSON builds it here: the
CLI's ``--json`` output, the mount's ``.lakefs/`` control files and the REST
API.  Field names and types follow lakeFS's ``api/swagger.yml`` (schemas
Repository, Commit, Ref, Diff, ObjectStats, User, Credentials,
CredentialsWithSecret, Error): dates are integer epoch seconds
(``creation_date``, ``mtime``), sizes are ``size_bytes``, a commit's metarange
is ``meta_range_id``.  lakemount's own extra fields (an entry's ``mode``, a
symlink's target) are added beside lakeFS's, never instead of them.  The
builders take records by duck type so this module imports nothing heavy.
"""

from __future__ import annotations

import stat
from datetime import UTC, datetime
from typing import Any

from lakemount.catalog.model import object_view
from lakemount.errors import InvalidArgument

PATH_TYPE_OBJECT = "object"
PATH_TYPE_PREFIX = "common_prefix"


def epoch_seconds(when: float | datetime | None) -> int:
    """Integer epoch seconds of a float timestamp or an aware datetime (lakeFS's ``int64`` dates)."""
    if when is None:
        return 0
    if isinstance(when, datetime):
        return int(when.timestamp())
    return int(when)


def parse_since(text: str | None, what: str) -> float | None:
    """Epoch seconds of an ISO 8601 date/time, for a ``since`` filter; None for None or "".

    A time without an offset is UTC, as ``log`` prints times (not the zone of
    whichever host parses it).  Raises ``InvalidArgument`` naming ``what`` (the
    option or parameter) when ``text`` is not such a time.
    """
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidArgument(f"{what} must be an ISO 8601 date/time, got {text!r}") from None
    return (when if when.tzinfo is not None else when.replace(tzinfo=UTC)).timestamp()


def repository_json(repo: Any) -> dict[str, Any]:
    """lakeFS ``Repository`` of a graveler ``Repository`` (``name``, ``storage_namespace``, ...)."""
    return {
        "id": repo.name,
        "creation_date": epoch_seconds(repo.creation_date),
        "default_branch": repo.default_branch,
        "storage_namespace": repo.storage_namespace,
        "read_only": False,
        "storage_id": "",
    }


def commit_json(c: Any) -> dict[str, Any]:
    """lakeFS ``Commit`` of a graveler ``Commit``; ``metarange_checksum`` stays internal."""
    return {
        "id": c.id,
        "parents": list(c.parents),
        "committer": c.committer,
        "message": c.message,
        "creation_date": epoch_seconds(c.creation_date),
        "meta_range_id": c.metarange_id,
        "metadata": dict(c.metadata),
        "generation": c.generation,
        "version": 1,
    }


def ref_json(name: str, commit_id: str) -> dict[str, Any]:
    """lakeFS ``Ref``: a branch or tag name and the commit it points at."""
    return {"id": name, "commit_id": commit_id}


def diff_json(kind: str, path: str, *, is_prefix: bool = False, size_bytes: int | None = None) -> dict[str, Any]:
    """lakeFS ``Diff``: ``kind`` is one of added, removed, changed, conflict, prefix_changed."""
    out: dict[str, Any] = {
        "type": kind,
        "path": path,
        "path_type": PATH_TYPE_PREFIX if is_prefix else PATH_TYPE_OBJECT,
    }
    if size_bytes is not None:
        out["size_bytes"] = size_bytes
    return out


def object_stats_json(path: str, e: Any, *, physical_address: str | None = None, extras: bool = True) -> dict[str, Any]:
    """lakeFS ``ObjectStats`` of a graveler ``Entry``.

    Size, checksum, content type and metadata are the entry's object view
    (:func:`~lakemount.catalog.model.object_view`): a directory marker or a
    symlink is 0 bytes with the empty checksum, its content type says what it
    is, and it has no physical address.  ``physical_address``: the object's
    URL (default: the entry's address as stored).  ``extras``: add lakemount's ``mode`` (octal string) and, for a
    symlink, its ``target``, which tell apart directory markers and symlinks
    written through the mount (objects to lakeFS); the REST API leaves them out.
    """
    view = object_view(e)
    if not view.has_data:
        physical_address = ""
    out: dict[str, Any] = {
        "path": path,
        "path_type": PATH_TYPE_OBJECT,
        "physical_address": e.address if physical_address is None else physical_address,
        "checksum": view.etag,
        "size_bytes": view.size,
        "mtime": e.mtime_ns // 1_000_000_000,
        "metadata": dict(view.metadata),
        "content_type": view.content_type or "application/octet-stream",
    }
    if extras:
        out["mode"] = oct(e.mode)
        if stat.S_ISLNK(e.mode):
            out["target"] = e.target
    return out


def prefix_json(path: str) -> dict[str, Any]:
    """A common prefix in a listing, as lakeFS lists one (``ObjectStats`` with ``path_type`` common_prefix)."""
    return {"path": path, "path_type": PATH_TYPE_PREFIX, "physical_address": "", "checksum": "", "mtime": 0}


def user_json(u: Any) -> dict[str, Any]:
    """lakeFS ``User`` of an auth ``User`` (``id``, ``created_at``)."""
    return {
        "id": u.id,
        "creation_date": epoch_seconds(u.created_at),
        "friendly_name": getattr(u, "friendly_name", None) or u.id,
        "email": getattr(u, "email", None) or "",
    }


def group_json(g: Any) -> dict[str, Any]:
    """lakeFS ``Group`` of an auth ``Group`` (``id``, ``name`` = id, ``description``, ``creation_date``)."""
    return {"id": g.id, "name": g.id, "description": g.description, "creation_date": epoch_seconds(g.created_at)}


def credentials_json(k: Any, *, with_secret: bool = False) -> dict[str, Any]:
    """lakeFS ``Credentials`` (or ``CredentialsWithSecret``) of an access key."""
    out: dict[str, Any] = {"access_key_id": k.access_key_id, "creation_date": epoch_seconds(k.created_at)}
    if with_secret:
        out["secret_access_key"] = k.secret_access_key
    user_id = getattr(k, "user_id", None)
    if user_id is not None:
        out["user_id"] = user_id
    return out


def error_json(message: str, *, code: int | None = None, category: str | None = None) -> dict[str, Any]:
    """lakeFS ``Error`` (``message``), with lakemount's exit ``code`` and error ``category`` when known."""
    out: dict[str, Any] = {"message": message}
    if category is not None:
        out["category"] = category
    if code is not None:
        out["code"] = code
    return out
