"""What an Iceberg table holds, as the web UI shows it: its tables at a ref, schema, partition spec, snapshots,
the data files of a snapshot, and what changed between two versions of a table.

The catalog's own code (``tables.py``) reads and writes metadata files; this module reads them for people.
:func:`find_tables` walks a ref's namespaces (the directories marked as such, level by level, as the REST
catalog's ``listNamespaces`` does) and their tables; :func:`detail` turns a table's metadata into plain rows
(fields with their types, required flags and, from format version 3, default values; partition fields with
their source columns; snapshots with their operation and the summary's counts); :func:`data_files` reads a
snapshot's manifest list and manifests (Avro, ``avro.py``) for its live files; :func:`schema_changes` and
:func:`snapshots_added` compare two versions of one table.  Every bound is here (``MAX_TABLES``,
``MAX_FILES``, ``MANIFEST_CAP``): a crafted table costs a bounded read and a one-line :class:`ContentsError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from lakemount.catalog.model import ResolvedRef
from lakemount.iceberg.avro import AvroError, records
from lakemount.iceberg.errors import IcebergError
from lakemount.iceberg.names import NAMESPACE_MARKER, TABLE_POINTER, Namespace, TableId, check_level, path_in
from lakemount.iceberg.tables import Loaded, Tables, TablesCatalog

MAX_TABLES: Final = 1000  # tables one listing shows (it says when there are more)
MAX_NAMESPACES: Final = 10_000  # namespaces one listing walks
MAX_FILES: Final = 100_000  # live files of one snapshot read from its manifests
MANIFEST_CAP: Final = 64 << 20  # bytes of one manifest list or manifest read
ADDED_SHOWN: Final = 10  # paths of the files a commit added that its audit record names (the summary counts them all)
ADDED_CAP: Final = 4 << 20  # bytes of one manifest list or manifest an audit record's paths are read from
SUMMARY_COUNTS: Final = ("added-data-files", "deleted-data-files", "added-records", "deleted-records",
                         "added-files-size", "removed-files-size", "total-records", "total-data-files",
                         "added-delete-files", "removed-delete-files", "total-delete-files")


class ContentsError(ValueError):
    """A table whose contents cannot be read (a missing or malformed manifest, too many files): one line."""


@dataclass(frozen=True, slots=True)
class Found:
    """A table found at a ref: its namespace levels, name and directory (with ``/``)."""

    namespace: tuple[str, ...]
    name: str
    path: str


@dataclass(frozen=True, slots=True)
class DataFile:
    """One live file of a snapshot: its path in the ref, size, rows, content (0 data, 1 position deletes,
    2 equality deletes) and partition values."""

    path: str
    size: int
    records: int
    content: int
    partition: dict[str, Any]


def table_id(repo: str, ref: str, path: str) -> TableId:
    """The table whose directory is ``path`` (``db/events`` or ``db/events/``: namespace levels, then the
    name); raises a 400 ``IcebergError`` for a path that cannot name a table."""
    levels = path.strip("/").split("/") if path.strip("/") else []
    if len(levels) < 2:
        raise IcebergError(400, "BadRequestException",
                           f"{path[:200]!r} names no table: a table's path is its namespace's levels and its name, as db/events")
    for level in levels:
        check_level(level, "path segment")
    return TableId(Namespace(repo, ref, tuple(levels[:-1])), levels[-1])


def find_tables(catalog: TablesCatalog, repo: str, at: str | ResolvedRef) -> tuple[list[Found], bool]:
    """The tables at ``at`` (a resolved ref), by namespace then name, at most ``MAX_TABLES``, and whether
    there were more."""
    found: list[Found] = []
    todo: list[str] = [""]
    walked = 0
    while todo and walked < MAX_NAMESPACES:
        prefix = todo.pop()
        walked += 1
        below: list[str] = []
        for item in catalog.list(repo, at, prefix, delimiter="/"):
            if not item.is_prefix:
                continue
            if catalog.exists(repo, at, item.path + NAMESPACE_MARKER):
                below.append(item.path)
            elif prefix and catalog.exists(repo, at, item.path + TABLE_POINTER):
                levels = tuple(prefix.rstrip("/").split("/"))
                found.append(Found(levels, item.path[len(prefix):-1], item.path))
                if len(found) > MAX_TABLES:
                    break
        todo.extend(reversed(below))
    found.sort(key=lambda f: (f.namespace, f.name))
    return found[:MAX_TABLES], len(found) > MAX_TABLES or bool(todo)


def load(catalog: TablesCatalog, table: TableId, at: str | ResolvedRef) -> Loaded | None:
    """``table`` as read at ``at``, or None when the ref has no such table (its namespace neither)."""
    try:
        return Tables(catalog).load_at(table, at)
    except IcebergError as e:
        if e.code == 404:
            return None
        raise


def type_text(t: Any) -> str:
    """An Iceberg type as one line: ``long``, ``struct<a: int, b: string>``, ``list<string>``, ``map<string, long>``."""
    if isinstance(t, str):
        return t
    if not isinstance(t, dict):
        return str(t)
    kind = t.get("type")
    if kind == "struct":
        return "struct<" + ", ".join(f"{f.get('name')}: {type_text(f.get('type'))}" for f in t.get("fields", [])) + ">"
    if kind == "list":
        return f"list<{type_text(t.get('element'))}>"
    if kind == "map":
        return f"map<{type_text(t.get('key'))}, {type_text(t.get('value'))}>"
    return str(kind)


def current_schema(meta: dict[str, Any]) -> dict[str, Any]:
    """The table's current schema (version 1 metadata may carry only ``schema``)."""
    sid = meta.get("current-schema-id")
    for s in meta.get("schemas") or []:
        if isinstance(s, dict) and s.get("schema-id") == sid:
            return s
    schema = meta.get("schema")
    return schema if isinstance(schema, dict) else {"type": "struct", "fields": []}


def fields(schema: dict[str, Any], parent: str = "") -> list[dict[str, Any]]:
    """A schema's fields, nested ones after their struct with dotted names: id, name, type, required, doc and
    the version 3 defaults (``initial_default``, ``write_default``; absent when the field has none)."""
    out: list[dict[str, Any]] = []
    for f in schema.get("fields") or []:
        if not isinstance(f, dict):
            continue
        name = f"{parent}{f.get('name')}"
        one: dict[str, Any] = {"id": f.get("id"), "name": name, "type": type_text(f.get("type")),
                               "required": bool(f.get("required"))}
        if f.get("doc"):
            one["doc"] = f["doc"]
        for key in ("initial-default", "write-default"):
            if key in f:
                one[key.replace("-", "_")] = f[key]
        out.append(one)
        t = f.get("type")
        if isinstance(t, dict) and t.get("type") == "struct":
            out += fields(t, name + ".")
    return out


def partition_spec(meta: dict[str, Any]) -> dict[str, Any]:
    """The default partition spec: its id and fields (name, transform, source column, field id)."""
    sid = meta.get("default-spec-id", 0)
    spec_fields: list[Any] = meta.get("partition-spec") or []
    for s in meta.get("partition-specs") or []:
        if isinstance(s, dict) and s.get("spec-id") == sid:
            spec_fields = s.get("fields") or []
    names = {f["id"]: f["name"] for f in fields(current_schema(meta))}
    return {"spec_id": sid, "fields": [
        {"name": f.get("name"), "transform": f.get("transform"), "source_id": f.get("source-id"),
         "source": names.get(f.get("source-id"), f"(field {f.get('source-id')})"), "field_id": f.get("field-id")}
        for f in spec_fields if isinstance(f, dict)]}


def snapshot_view(snap: dict[str, Any]) -> dict[str, Any]:
    """A snapshot as the UI lists it: ids, time, operation, the summary's counts (as integers) and the whole summary."""
    raw = snap.get("summary")
    summary: dict[str, Any] = raw if isinstance(raw, dict) else {}
    counts = {}
    for key in SUMMARY_COUNTS:
        value = summary.get(key)
        if isinstance(value, str) and value.isdigit():
            counts[key.replace("-", "_")] = int(value)
    return {"snapshot_id": id_text(snap.get("snapshot-id")), "parent_snapshot_id": id_text(snap.get("parent-snapshot-id")),
            "sequence_number": snap.get("sequence-number"), "timestamp_ms": snap.get("timestamp-ms"),
            "operation": summary.get("operation", ""), "schema_id": snap.get("schema-id"), "counts": counts,
            "summary": summary}


def id_text(value: Any) -> str | None:
    """A snapshot id as the UI's JSON carries it: decimal text (ids are 64-bit, past a JavaScript number's exact
    integers), None for none."""
    return None if value is None or value == -1 else str(value)


def snapshots(meta: dict[str, Any]) -> list[dict[str, Any]]:
    """The table's snapshots, newest first."""
    snaps = [snapshot_view(s) for s in meta.get("snapshots") or [] if isinstance(s, dict)]
    return sorted(snaps, key=lambda s: (s["timestamp_ms"] or 0, s["sequence_number"] or 0), reverse=True)


def detail(loaded: Loaded) -> dict[str, Any]:
    """Everything the table page shows but its rows."""
    meta = loaded.metadata
    schema = current_schema(meta)
    return {"namespace": list(loaded.table.namespace.levels), "name": loaded.table.name, "path": loaded.table.path,
            "format_version": meta.get("format-version"), "table_uuid": meta.get("table-uuid"),
            "metadata_path": loaded.metadata_path, "last_updated_ms": meta.get("last-updated-ms"),
            "properties": meta.get("properties") or {}, "current_snapshot_id": id_text(current_snapshot(meta)),
            "schema": {"schema_id": schema.get("schema-id", 0), "fields": fields(schema)},
            "schemas": len(meta.get("schemas") or []) or 1, "partition_spec": partition_spec(meta),
            "snapshots": snapshots(meta)}


def current_snapshot(meta: dict[str, Any]) -> int | None:
    """The current snapshot's id; None for a table without one (version 1 writers say -1)."""
    sid = meta.get("current-snapshot-id")
    return None if sid in (None, -1) else int(sid)


def _read(catalog: TablesCatalog, repo: str, at: str | ResolvedRef, location: str, what: str, cap: int = MANIFEST_CAP) -> bytes:
    try:
        path = path_in(repo, location)
    except IcebergError as e:
        raise ContentsError(f"{what}: {e.message}") from None
    entry = catalog.get_optional(repo, at, path)
    if entry is None:
        raise ContentsError(f"{what} is missing: {path[:200]}")
    if entry.size > cap:
        raise ContentsError(f"{what} is larger than {cap} bytes: {path[:200]}")
    return bytes(catalog.read(catalog.repository(repo), entry))


def data_files(catalog: TablesCatalog, repo: str, at: str | ResolvedRef, meta: dict[str, Any], snapshot_id: int | None) -> list[DataFile]:
    """The live files (data and delete files) of snapshot ``snapshot_id`` (None: none, no files), in manifest
    order; raises ``ContentsError``."""
    if snapshot_id is None:
        return []
    snap = next((s for s in meta.get("snapshots") or [] if isinstance(s, dict) and s.get("snapshot-id") == snapshot_id), None)
    if snap is None:
        raise ContentsError(f"the table has no snapshot {snapshot_id}")
    manifests: list[str] = []
    try:
        if isinstance(snap.get("manifest-list"), str):
            for m in records(_read(catalog, repo, at, snap["manifest-list"], "the snapshot's manifest list")):
                if isinstance(m.get("manifest_path"), str):
                    manifests.append(m["manifest_path"])
        else:  # version 1 may list its manifests in the snapshot itself
            manifests = [m for m in snap.get("manifests") or [] if isinstance(m, str)]
        out: list[DataFile] = []
        for location in manifests:
            for e in records(_read(catalog, repo, at, location, "a manifest")):
                if e.get("status") == 2:  # deleted in this snapshot: not live
                    continue
                f = e.get("data_file")
                if not isinstance(f, dict) or not isinstance(f.get("file_path"), str):
                    raise ContentsError("a manifest entry without its data file's path")
                try:
                    path = path_in(repo, f["file_path"])
                except IcebergError as err:
                    raise ContentsError(f"a data file: {err.message}") from None
                raw = f.get("partition")
                part: dict[str, Any] = raw if isinstance(raw, dict) else {}
                out.append(DataFile(path, int(f.get("file_size_in_bytes") or 0), int(f.get("record_count") or 0),
                                    int(f.get("content") or 0), part))
                if len(out) > MAX_FILES:
                    raise ContentsError(f"the snapshot has more than {MAX_FILES} files")
    except AvroError as e:
        raise ContentsError(f"a manifest cannot be read: {e}") from None
    return out


def added_files(catalog: TablesCatalog, repo: str, at: str | ResolvedRef, snap: dict[str, Any]) -> list[str]:
    """The paths in the ref of the first ``ADDED_SHOWN`` files snapshot ``snap`` added (an audit record's summary),
    read from the manifests the snapshot itself wrote (each at most ``ADDED_CAP`` bytes); raises ``ContentsError``.

    A version 2 manifest list names the snapshot that added each manifest, so only this commit's manifests are read
    (usually one); an entry added by this snapshot has status 1 and its snapshot id, or none (inherited).
    """
    sid = snap.get("snapshot-id")
    location = snap.get("manifest-list")
    if not isinstance(location, str):
        return []  # version 1 may list manifests in the snapshot itself: no manifest list to read
    out: list[str] = []
    try:
        for m in records(_read(catalog, repo, at, location, "the snapshot's manifest list", ADDED_CAP)):
            if m.get("added_snapshot_id") not in (None, sid) or not isinstance(m.get("manifest_path"), str):
                continue
            if m.get("added_files_count", m.get("added_data_files_count")) == 0:  # v2 and v1 names of the count
                continue
            for e in records(_read(catalog, repo, at, m["manifest_path"], "a manifest", ADDED_CAP)):
                f = e.get("data_file")
                if e.get("status") != 1 or e.get("snapshot_id") not in (None, sid) or not isinstance(f, dict):
                    continue
                try:
                    out.append(path_in(repo, str(f.get("file_path"))))
                except IcebergError as err:
                    raise ContentsError(f"a data file: {err.message}") from None
                if len(out) == ADDED_SHOWN:
                    return out
    except AvroError as e:
        raise ContentsError(f"a manifest cannot be read: {e}") from None
    return out


def schema_changes(old: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, list[dict[str, Any]]]:
    """What changed from schema ``old`` to ``new`` (None: the table is absent on that side), field by field id:
    fields added and dropped, renamed, retyped, made optional or required, and default values changed."""
    a = {f["id"]: f for f in fields(old)} if old is not None else {}
    b = {f["id"]: f for f in fields(new)} if new is not None else {}
    out: dict[str, list[dict[str, Any]]] = {"added": [], "dropped": [], "renamed": [], "retyped": [], "required": [],
                                            "defaults": []}
    if old is None or new is None:
        return out  # a table added or dropped: its schema is on the table page, not a change
    for fid, f in b.items():
        if fid not in a:
            out["added"].append(f)
            continue
        g = a[fid]
        if g["name"] != f["name"]:
            out["renamed"].append({"id": fid, "from": g["name"], "to": f["name"]})
        if g["type"] != f["type"]:
            out["retyped"].append({"id": fid, "name": f["name"], "from": g["type"], "to": f["type"]})
        if g["required"] != f["required"]:
            out["required"].append({"id": fid, "name": f["name"], "from": g["required"], "to": f["required"]})
        for key in ("initial_default", "write_default"):
            if g.get(key) != f.get(key):
                out["defaults"].append({"id": fid, "name": f["name"], "which": key, "from": g.get(key), "to": f.get(key)})
    out["dropped"] = [g for fid, g in a.items() if fid not in b]
    return out


def snapshots_added(old: dict[str, Any] | None, new: dict[str, Any] | None) -> tuple[list[dict[str, Any]], int]:
    """The snapshots of ``new`` that ``old`` has not (newest first), and how many of ``old``'s ``new`` has not."""
    a = {s["snapshot_id"] for s in snapshots(old)} if old is not None else set()
    b = snapshots(new) if new is not None else []
    ids = {s["snapshot_id"] for s in b}
    return [s for s in b if s["snapshot_id"] not in a], len(a - ids)
