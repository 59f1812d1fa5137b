"""lakemount records as lakeFS's JSON objects (``Repository``, ``Ref``, ``Commit``, ``ObjectStats``, ``Diff``).

The shapes themselves live in ``lakemount.catalog.shapes``, shared with the
CLI's --json and the mount's control files (one shape per object everywhere).

Times are whole unix seconds, as lakeFS sends them; commit and object
metadata are string maps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lakemount.catalog import shapes
from lakemount.catalog.catalog import Entry, Repository

if TYPE_CHECKING:
    from lakemount.api.context import ApiCatalog


def repository_json(r: Any) -> dict[str, Any]:
    """A repository in lakeFS's ``Repository`` shape."""
    return shapes.repository_json(r)


def ref_json(name: str, commit_id: str) -> dict[str, Any]:
    """A branch or tag in lakeFS's ``Ref`` shape."""
    return shapes.ref_json(name, commit_id)


def commit_json(c: Any) -> dict[str, Any]:
    """A commit in lakeFS's ``Commit`` shape."""
    return shapes.commit_json(c)


def object_json(catalog: ApiCatalog, repo: Repository, path: str, entry: Entry | None) -> dict[str, Any]:
    """An object's ``ObjectStats``, or a common prefix's (``entry`` None)."""
    if entry is None:
        return shapes.prefix_json(path)
    return shapes.object_stats_json(path, entry, physical_address=catalog.physical_url(repo, entry.address), extras=False)


def diff_json(path: str, kind: str, size: int | None, *, prefix: bool = False) -> dict[str, Any]:
    """One ``Diff`` record: ``path`` changed by ``kind``, of ``size`` bytes (``Difference.size``); ``prefix``
    marks a grouped common prefix, which has no size."""
    return shapes.diff_json(kind, path, is_prefix=prefix, size_bytes=size)
