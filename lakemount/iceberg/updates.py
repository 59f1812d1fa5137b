"""A table commit's updates (``add-snapshot``, ``set-snapshot-ref``, ``add-schema``, ...) applied to table metadata.

:func:`apply` takes the metadata a commit starts from and returns the new
metadata, leaving its argument untouched (a retried commit starts again from
what it then reads).  Every field a client sends is checked before use: a
malformed update is a 400 ``BadRequestException``, never a crash.  ``-1`` in
``set-current-schema``, ``set-default-spec`` and ``set-default-sort-order``
means "the one this commit added last", as the spec says.  Every update is judged by the table's format
version as it stands when the update applies (an ``upgrade-format-version`` earlier in the same commit counts):
version 3 snapshots must carry ``first-row-id`` and ``added-rows`` (row lineage), and field defaults and the
v3 types need version 3.  A ``format-version`` property is the reference's other way to upgrade: it upgrades
and is not stored.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, Final

from lakemount.iceberg.errors import bad_request
from lakemount.iceberg.metadata import (
    FORMAT_PROPERTY,
    ROW_LINEAGE_VERSION,
    check_schema,
    check_sort_order,
    check_spec,
    check_version,
    now_ms,
    shaped,
    string_map,
    want,
)

LAST_ADDED: Final = -1


class _Commit:
    """The metadata being built and what this commit added last."""

    def __init__(self, meta: dict[str, Any]) -> None:
        self.meta = meta
        self.last_schema: int | None = None
        self.last_spec: int | None = None
        self.last_order: int | None = None

    def ids(self, key: str, id_key: str) -> list[int]:
        return [x[id_key] for x in self.meta.get(key, [])]


def _assign_uuid(c: _Commit, u: dict[str, Any]) -> None:
    value = want(u, "uuid", str, "assign-uuid")
    if c.meta.get("snapshots") and value != c.meta.get("table-uuid"):
        raise bad_request("cannot change the UUID of a table with snapshots")
    c.meta["table-uuid"] = value


def _upgrade_to(c: _Commit, version: int) -> None:
    if version < c.meta["format-version"]:
        raise bad_request(f"Cannot downgrade v{c.meta['format-version']} table to v{version}")
    c.meta["format-version"] = version
    shaped(c.meta)


def _upgrade(c: _Commit, u: dict[str, Any]) -> None:
    _upgrade_to(c, check_version(want(u, "format-version", int, "upgrade-format-version"), "upgrade-format-version"))


def _add_schema(c: _Commit, u: dict[str, Any]) -> None:
    schema = want(u, "schema", dict, "add-schema")
    highest = check_schema(schema, c.meta["format-version"])
    body = {k: v for k, v in schema.items() if k != "schema-id"}
    for existing in c.meta["schemas"]:  # the same schema again is the one already there
        if {k: v for k, v in existing.items() if k != "schema-id"} == body:
            c.last_schema = existing["schema-id"]
            return
    new_id = max(c.ids("schemas", "schema-id"), default=-1) + 1
    c.meta["schemas"] = [*c.meta["schemas"], {**schema, "schema-id": new_id}]
    last = want(u, "last-column-id", int, "add-schema", optional=True)
    c.meta["last-column-id"] = max(c.meta["last-column-id"], highest, last or 0)
    c.last_schema = new_id


def _chosen(value: int, last: int | None, what: str) -> int:
    if value == LAST_ADDED:
        if last is None:
            raise bad_request(f"{what} -1 (the last added) but this commit added none")
        return last
    return value


def _set_schema(c: _Commit, u: dict[str, Any]) -> None:
    sid = _chosen(want(u, "schema-id", int, "set-current-schema"), c.last_schema, "set-current-schema")
    if sid not in c.ids("schemas", "schema-id"):
        raise bad_request(f"set-current-schema: no schema {sid}")
    c.meta["current-schema-id"] = sid


def _add_spec(c: _Commit, u: dict[str, Any]) -> None:
    spec = want(u, "spec", dict, "add-spec")
    highest = check_spec(spec, c.meta["last-partition-id"])
    fields = spec["fields"]
    for existing in c.meta["partition-specs"]:
        if existing.get("fields") == fields:
            c.last_spec = existing["spec-id"]
            return
    new_id = max(c.ids("partition-specs", "spec-id"), default=-1) + 1
    c.meta["partition-specs"] = [*c.meta["partition-specs"], {"spec-id": new_id, "fields": fields}]
    c.meta["last-partition-id"] = max(c.meta["last-partition-id"], highest)
    c.last_spec = new_id


def _set_spec(c: _Commit, u: dict[str, Any]) -> None:
    sid = _chosen(want(u, "spec-id", int, "set-default-spec"), c.last_spec, "set-default-spec")
    if sid not in c.ids("partition-specs", "spec-id"):
        raise bad_request(f"set-default-spec: no partition spec {sid}")
    c.meta["default-spec-id"] = sid


def _add_order(c: _Commit, u: dict[str, Any]) -> None:
    order = want(u, "sort-order", dict, "add-sort-order")
    check_sort_order(order)
    fields = order["fields"]
    for existing in c.meta["sort-orders"]:
        if existing.get("fields") == fields:
            c.last_order = existing["order-id"]
            return
    # Order 0 is reserved for "unsorted"; a sorted order takes the next id from 1.
    new_id = 0 if not fields else max([0, *c.ids("sort-orders", "order-id")]) + 1
    c.meta["sort-orders"] = [*c.meta["sort-orders"], {"order-id": new_id, "fields": fields}]
    c.last_order = new_id


def _set_order(c: _Commit, u: dict[str, Any]) -> None:
    oid = _chosen(want(u, "sort-order-id", int, "set-default-sort-order"), c.last_order, "set-default-sort-order")
    if oid not in c.ids("sort-orders", "order-id"):
        raise bad_request(f"set-default-sort-order: no sort order {oid}")
    c.meta["default-sort-order-id"] = oid


def _add_snapshot(c: _Commit, u: dict[str, Any]) -> None:
    snap = want(u, "snapshot", dict, "add-snapshot")
    sid = want(snap, "snapshot-id", int, "snapshot")
    want(snap, "timestamp-ms", int, "snapshot")
    want(snap, "manifest-list", str, "snapshot")
    seq = want(snap, "sequence-number", int, "snapshot", optional=True) or 0
    parent = want(snap, "parent-snapshot-id", int, "snapshot", optional=True)
    if "summary" in snap and not isinstance(snap["summary"], dict):
        raise bad_request("snapshot: 'summary' must be an object")
    if sid in c.ids("snapshots", "snapshot-id"):
        raise bad_request(f"snapshot {sid} already exists")
    version = c.meta["format-version"]
    if version >= ROW_LINEAGE_VERSION:
        first = want(snap, "first-row-id", int, "snapshot", optional=True)
        added = want(snap, "added-rows", int, "snapshot", optional=True)
        if first is None:
            raise bad_request("Cannot add a snapshot: first-row-id is null")
        if added is None or added < 0:
            raise bad_request("Cannot add a snapshot: added-rows is null or negative")
        if first < c.meta["next-row-id"]:
            raise bad_request(f"Cannot add a snapshot, first-row-id is behind table next-row-id: {first} < {c.meta['next-row-id']}")
        c.meta["next-row-id"] += added
    if version > 1:  # version 1 has no sequence numbers
        if parent is not None and seq <= c.meta["last-sequence-number"]:
            raise bad_request(f"snapshot sequence number {seq} is not after the table's last {c.meta['last-sequence-number']}")
        c.meta["last-sequence-number"] = max(c.meta["last-sequence-number"], seq)
    c.meta["snapshots"] = [*c.meta["snapshots"], snap]


RETENTION: Final = ("min-snapshots-to-keep", "max-snapshot-age-ms", "max-ref-age-ms")


def _set_ref(c: _Commit, u: dict[str, Any]) -> None:
    name = want(u, "ref-name", str, "set-snapshot-ref")
    kind = want(u, "type", str, "set-snapshot-ref")
    sid = want(u, "snapshot-id", int, "set-snapshot-ref")
    if kind not in ("branch", "tag"):
        raise bad_request("set-snapshot-ref: 'type' must be 'branch' or 'tag'")
    snap = next((s for s in c.meta["snapshots"] if s["snapshot-id"] == sid), None)
    if snap is None:
        raise bad_request(f"set-snapshot-ref: no snapshot {sid}")
    ref: dict[str, Any] = {"snapshot-id": sid, "type": kind}
    for key in RETENTION:
        if u.get(key) is not None:
            ref[key] = want(u, key, int, "set-snapshot-ref")
    c.meta["refs"] = {**c.meta.get("refs", {}), name: ref}
    if name == "main":
        if kind != "branch":
            raise bad_request("set-snapshot-ref: main must be a branch")
        c.meta["current-snapshot-id"] = sid
        c.meta["snapshot-log"] = [*c.meta.get("snapshot-log", []), {"timestamp-ms": snap["timestamp-ms"], "snapshot-id": sid}]


def _remove_snapshots(c: _Commit, u: dict[str, Any]) -> None:
    doomed = want(u, "snapshot-ids", list, "remove-snapshots")
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in doomed):
        raise bad_request("remove-snapshots: 'snapshot-ids' must be integers")
    gone = set(doomed)
    c.meta["snapshots"] = [s for s in c.meta["snapshots"] if s["snapshot-id"] not in gone]
    c.meta["refs"] = {k: v for k, v in c.meta.get("refs", {}).items() if v.get("snapshot-id") not in gone}
    c.meta["snapshot-log"] = [e for e in c.meta.get("snapshot-log", []) if e.get("snapshot-id") not in gone]
    if c.meta.get("current-snapshot-id") in gone:
        c.meta["current-snapshot-id"] = None


def _remove_ref(c: _Commit, u: dict[str, Any]) -> None:
    name = want(u, "ref-name", str, "remove-snapshot-ref")
    c.meta["refs"] = {k: v for k, v in c.meta.get("refs", {}).items() if k != name}
    if name == "main":
        c.meta["current-snapshot-id"] = None


def _set_location(c: _Commit, u: dict[str, Any]) -> None:
    want(u, "location", str, "set-location")
    # Accepted (create transactions send it) but not kept: a table's location is its place in the branch.


def _set_properties(c: _Commit, u: dict[str, Any]) -> None:
    changes = string_map(want(u, "updates", dict, "set-properties"), "updates")
    if FORMAT_PROPERTY in changes:
        _upgrade_to(c, check_version(changes.pop(FORMAT_PROPERTY), "set-properties"))
    c.meta["properties"] = {**c.meta.get("properties", {}), **changes}


def _remove_properties(c: _Commit, u: dict[str, Any]) -> None:
    gone = want(u, "removals", list, "remove-properties")
    if not all(isinstance(x, str) for x in gone):
        raise bad_request("remove-properties: 'removals' must be strings")
    c.meta["properties"] = {k: v for k, v in c.meta.get("properties", {}).items() if k not in set(gone)}


def _stats(key: str, file_key: str) -> Callable[[_Commit, dict[str, Any]], None]:
    def set_(c: _Commit, u: dict[str, Any]) -> None:
        stats = want(u, file_key, dict, u["action"])
        sid = want(stats, "snapshot-id", int, file_key)
        c.meta[key] = [*(s for s in c.meta.get(key, []) if s.get("snapshot-id") != sid), stats]
    return set_


def _remove_stats(key: str) -> Callable[[_Commit, dict[str, Any]], None]:
    def remove(c: _Commit, u: dict[str, Any]) -> None:
        sid = want(u, "snapshot-id", int, u["action"])
        c.meta[key] = [s for s in c.meta.get(key, []) if s.get("snapshot-id") != sid]
    return remove


def _remove_ids(key: str, id_key: str, current: str, field: str) -> Callable[[_Commit, dict[str, Any]], None]:
    def remove(c: _Commit, u: dict[str, Any]) -> None:
        ids = want(u, field, list, u["action"])
        if c.meta.get(current) in ids:
            raise bad_request(f"{u['action']}: cannot remove the table's current one ({c.meta.get(current)})")
        c.meta[key] = [x for x in c.meta.get(key, []) if x.get(id_key) not in ids]
    return remove


APPLY: Final[dict[str, Callable[[_Commit, dict[str, Any]], None]]] = {
    "assign-uuid": _assign_uuid,
    "upgrade-format-version": _upgrade,
    "add-schema": _add_schema,
    "set-current-schema": _set_schema,
    "add-spec": _add_spec,
    "set-default-spec": _set_spec,
    "add-sort-order": _add_order,
    "set-default-sort-order": _set_order,
    "add-snapshot": _add_snapshot,
    "set-snapshot-ref": _set_ref,
    "remove-snapshots": _remove_snapshots,
    "remove-snapshot-ref": _remove_ref,
    "set-location": _set_location,
    "set-properties": _set_properties,
    "remove-properties": _remove_properties,
    "set-statistics": _stats("statistics", "statistics"),
    "remove-statistics": _remove_stats("statistics"),
    "set-partition-statistics": _stats("partition-statistics", "partition-statistics"),
    "remove-partition-statistics": _remove_stats("partition-statistics"),
    "remove-partition-specs": _remove_ids("partition-specs", "spec-id", "default-spec-id", "spec-ids"),
    "remove-schemas": _remove_ids("schemas", "schema-id", "current-schema-id", "schema-ids"),
}


def parse(updates: Any) -> list[dict[str, Any]]:
    """The updates of a commit request, each of an action this catalog applies; 400 otherwise."""
    if not isinstance(updates, list):
        raise bad_request("'updates' must be a list")
    for u in updates:
        action = want(u, "action", str, "an update")
        if action not in APPLY:
            raise bad_request(f"unsupported update action {action[:60]!r}")
    return updates


def apply(meta: dict[str, Any], updates: list[dict[str, Any]]) -> dict[str, Any]:
    """New metadata: ``updates`` applied in order to a copy of ``meta``; 400 for one that cannot apply."""
    c = _Commit(copy.deepcopy(meta))
    for u in updates:
        try:
            APPLY[u["action"]](c, u)
        except (KeyError, TypeError, AttributeError) as e:
            # Only stored metadata the catalog did not write can lack what an update reads (a registered
            # file): the update cannot apply to it, which is the client's to know, not a server fault.
            raise bad_request(f"{u['action']}: the table's metadata lacks or mistypes {str(e)[:80]}") from None
    if updates:
        c.meta["last-updated-ms"] = max(now_ms(), c.meta.get("last-updated-ms", 0))
    return shaped(c.meta)
