"""lakemount records as lakeFS's JSON objects (``Repository``, ``Ref``, ``Commit``, ``ObjectStats``, ``Diff``).

Times are whole unix seconds, as lakeFS sends them; commit and object
metadata are string maps.
"""

from __future__ import annotations

from typing import Any

from lakemount.catalog.catalog import Catalog, Entry


def repository_json(r: Any) -> dict[str, Any]:
    return {
        "id": r.name,
        "creation_date": int(r.creation_date),
        "default_branch": r.default_branch,
        "storage_namespace": r.storage_namespace,
        "read_only": False,
        "storage_id": "",
    }


def ref_json(name: str, commit_id: str) -> dict[str, Any]:
    return {"id": name, "commit_id": commit_id}


def commit_json(c: Any) -> dict[str, Any]:
    return {
        "id": c.id,
        "parents": list(c.parents),
        "committer": c.committer,
        "message": c.message,
        "creation_date": int(c.creation_date),
        "meta_range_id": c.metarange_id,
        "metadata": dict(c.metadata),
        "generation": c.generation,
        "version": 1,
    }


def object_json(catalog: Catalog, repo: Any, path: str, entry: Entry | None) -> dict[str, Any]:
    """An object's ``ObjectStats``, or a common prefix's (``entry`` None)."""
    if entry is None:
        return {"path": path, "path_type": "common_prefix", "physical_address": "", "checksum": "", "mtime": 0}
    return {
        "path": path,
        "path_type": "object",
        "physical_address": catalog.physical_url(repo, entry.address),
        "checksum": entry.etag,
        "size_bytes": entry.size,
        "mtime": entry.mtime_ns // 1_000_000_000,
        "metadata": dict(entry.metadata),
        "content_type": entry.content_type or "application/octet-stream",
    }


def diff_json(path: str, kind: str, entry: Entry | None, *, prefix: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"type": kind, "path": path, "path_type": "common_prefix" if prefix else "object"}
    if entry is not None:
        out["size_bytes"] = entry.size
    return out
