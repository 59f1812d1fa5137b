"""Table metadata (the Iceberg spec's ``TableMetadata``, format versions 1, 2 and 3) as JSON dicts: a new table's,
the served view of a stored one, and the checks every field read from a client goes through.

Metadata is kept as the JSON the spec defines (dicts and lists), not a class
tree: the catalog reads a handful of fields and must hand every other one back
untouched, whatever a newer client put there.  The stored ``location`` is the
table's address at the ref that wrote it; :func:`served` gives every load the
address at the ref it was loaded from, so a table merged into ``main`` writes
its next files to ``main``.

The versions differ in a few fields, which :func:`shaped` keeps as the spec has them after every change:
version 1 also carries the current ``schema`` and the default spec's fields as ``partition-spec`` (and no
sequence numbers); version 2 has ``last-sequence-number``; version 3 adds ``next-row-id`` (row lineage)
and accepts field defaults (``initial-default``, ``write-default``) and its new types.  A new table gets
the reference implementation's default properties (:data:`NEW_TABLE_PROPERTIES`).
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Final

from lakemount.iceberg.errors import bad_request

FORMAT_VERSION: Final = 2
SUPPORTED_VERSIONS: Final = (1, 2, 3)
ROW_LINEAGE_VERSION: Final = 3  # first version with next-row-id, first-row-id and field defaults
# What the Java reference sets on every new table unless the request does (TableMetadata.persistedProperties).
NEW_TABLE_PROPERTIES: Final = {"write.parquet.compression-codec": "zstd"}
FORMAT_PROPERTY: Final = "format-version"  # a reserved property: it picks the version, it is never stored
# Types a schema may use only from version 3 on (the spec's "added in v3").
V3_TYPES: Final = ("timestamp_ns", "timestamptz_ns", "variant", "unknown", "geometry", "geography")
NO_PARTITION_ID: Final = 999  # last-partition-id of a table without partition fields (as the spec's writers use)
PREVIOUS_VERSIONS_MAX: Final = "write.metadata.previous-versions-max"
DEFAULT_PREVIOUS_VERSIONS: Final = 100


def now_ms() -> int:
    """Now, in milliseconds since the epoch (the spec's timestamps)."""
    return int(time.time() * 1000)


def want(obj: Any, name: str, kind: type | tuple[type, ...], what: str, *, optional: bool = False) -> Any:
    """``obj[name]`` if it has the JSON type ``kind`` (a bool is no int); raises a 400 ``IcebergError``."""
    if not isinstance(obj, dict):
        raise bad_request(f"{what} must be a JSON object")
    if name not in obj or (optional and obj[name] is None):
        if optional:
            return None
        raise bad_request(f"{what} needs {name!r}")
    value = obj[name]
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,))):
        raise bad_request(f"{what}: {name!r} has the wrong type")
    return value


def string_map(obj: Any, what: str) -> dict[str, str]:
    """A ``{string: string}`` object (properties); 400 otherwise."""
    if obj is None:
        return {}
    if not isinstance(obj, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in obj.items()):
        raise bad_request(f"{what} must map strings to strings")
    return dict(obj)


def _field_ids(node: Any, what: str) -> list[int]:
    """Every field id of a schema type, nested ones included; 400 for a malformed type."""
    if isinstance(node, str):
        return []
    if not isinstance(node, dict):
        raise bad_request(f"{what}: a type must be a string or an object")
    kind = node.get("type")
    if kind == "struct":
        out: list[int] = []
        for f in want(node, "fields", list, what):
            out.append(want(f, "id", int, f"{what} field"))
            want(f, "name", str, f"{what} field")
            if "type" not in f:
                raise bad_request(f"{what} field needs 'type'")
            out += _field_ids(f["type"], what)
        return out
    if kind == "list":
        return [want(node, "element-id", int, what), *_field_ids(node.get("element"), what)]
    if kind == "map":
        return [want(node, "key-id", int, what), want(node, "value-id", int, what),
                *_field_ids(node.get("key"), what), *_field_ids(node.get("value"), what)]
    raise bad_request(f"{what}: unknown nested type {str(kind)[:40]!r}")


def _too_new(node: Any, path: str, version: int) -> list[str]:
    """What a schema type uses that ``version`` lacks (v3 types, non-null field defaults), as the reference words it."""
    if isinstance(node, str):
        base = node.split("(", 1)[0]
        return [f"Invalid type for {path}: {base} is not supported until v{ROW_LINEAGE_VERSION}"] if base in V3_TYPES else []
    out: list[str] = []
    kind = node.get("type")
    if kind == "struct":
        for f in node["fields"]:
            name = f"{path}.{f['name']}" if path else f["name"]
            if f.get("initial-default") is not None:
                out.append(f"Invalid initial default for {name}: non-null default ({str(f['initial-default'])[:40]}) "
                           f"is not supported until v{ROW_LINEAGE_VERSION}")
            out += _too_new(f["type"], name, version)
    elif kind == "list":
        out += _too_new(node.get("element"), f"{path}.element", version)
    elif kind == "map":
        out += _too_new(node.get("key"), f"{path}.key", version) + _too_new(node.get("value"), f"{path}.value", version)
    return out


def check_schema(schema: Any, version: int = FORMAT_VERSION) -> int:
    """The highest field id of a ``Schema`` object; 400 if it is malformed or uses what format ``version`` lacks."""
    if not isinstance(schema, dict) or schema.get("type") != "struct":
        raise bad_request("a schema must be a JSON object of type 'struct'")
    ids = _field_ids(schema, "schema")  # recursion is bounded: orjson refuses bodies nested past 255
    if len(set(ids)) != len(ids):
        raise bad_request("schema field ids must be unique")
    if version < ROW_LINEAGE_VERSION:
        problems = _too_new(schema, "", version)
        if problems:
            raise bad_request(f"Invalid schema for v{version}:\n- " + "\n- ".join(problems[:10]))
    return max(ids, default=0)


def check_version(value: Any, what: str) -> int:
    """A format version this catalog writes (an int, or its text in a property); 400 otherwise."""
    text = str(value)[:20]
    if isinstance(value, bool) or str(value).strip() not in tuple(str(v) for v in SUPPORTED_VERSIONS):
        raise bad_request(f"{what}: format-version {text!r} is not supported (this catalog writes {SUPPORTED_VERSIONS})")
    return int(value)


def shaped(meta: dict[str, Any]) -> dict[str, Any]:
    """``meta`` with the fields its ``format-version`` defines, in place: v1's ``schema`` and ``partition-spec``
    mirror the current schema and the default spec; v2+ has ``last-sequence-number``; v3 ``next-row-id``."""
    version = meta.get("format-version")
    if version not in SUPPORTED_VERSIONS or isinstance(version, bool):
        return meta  # a registered file this catalog did not write: served as it is
    if version == 1:
        meta.pop("last-sequence-number", None)
        current = next((x for x in meta.get("schemas", []) if x.get("schema-id") == meta.get("current-schema-id")), None)
        if current is not None:
            meta["schema"] = current
        spec = next((x for x in meta.get("partition-specs", []) if x.get("spec-id") == meta.get("default-spec-id")), None)
        if spec is not None:
            meta["partition-spec"] = spec.get("fields", [])
    else:
        meta.pop("schema", None)
        meta.pop("partition-spec", None)
        meta.setdefault("last-sequence-number", 0)
    if version >= ROW_LINEAGE_VERSION:
        meta.setdefault("next-row-id", 0)
    else:
        meta.pop("next-row-id", None)
    return meta


def check_spec(spec: Any, last: int = NO_PARTITION_ID) -> int:
    """The highest partition field id of a ``PartitionSpec``; 400 if malformed.  A field without an id (version 1
    writers may leave them out) gets the next one after ``last`` and the spec's own, in order, as the reference
    assigns them (1000, 1001, ... in a new table)."""
    fields = want(spec, "fields", list, "partition spec")
    ids = []
    for f in fields:
        want(f, "source-id", int, "partition field")
        want(f, "transform", str, "partition field")
        want(f, "name", str, "partition field")
        given = want(f, "field-id", int, "partition field", optional=True)
        if given is not None:
            ids.append(given)
    for f in fields:
        if f.get("field-id") is None:
            f["field-id"] = max([last, *ids]) + 1
            ids.append(f["field-id"])
    return max(ids, default=NO_PARTITION_ID)


def check_sort_order(order: Any) -> None:
    """400 unless ``order`` is a ``SortOrder`` object."""
    for f in want(order, "fields", list, "sort order"):
        want(f, "source-id", int, "sort field")
        want(f, "transform", str, "sort field")
        want(f, "direction", str, "sort field")
        want(f, "null-order", str, "sort field")


def empty(location: str, version: int = FORMAT_VERSION) -> dict[str, Any]:
    """The metadata a create transaction's updates start from: no schema, spec or order yet, the reference's
    default properties, format ``version`` (the reference takes the transaction's first upgrade-format-version)."""
    return shaped({
        "format-version": version, "table-uuid": str(uuid.uuid4()), "location": location,
        "last-sequence-number": 0, "last-updated-ms": now_ms(), "last-column-id": 0,
        "schemas": [], "current-schema-id": -1, "partition-specs": [], "default-spec-id": -1,
        "last-partition-id": NO_PARTITION_ID, "sort-orders": [], "default-sort-order-id": -1,
        "properties": dict(NEW_TABLE_PROPERTIES), "current-snapshot-id": None, "snapshots": [], "snapshot-log": [],
        "metadata-log": [], "refs": {}, "statistics": [], "partition-statistics": [],
    })


def new_table(request: dict[str, Any], location: str) -> dict[str, Any]:
    """The first metadata of a table from a ``CreateTableRequest`` (schema, spec, order and properties as given:
    clients assign fresh ids; the ``format-version`` property picks the version, default 2); 400 for a malformed
    request, an unsupported format version or a schema that version cannot hold."""
    props = string_map(request.get("properties"), "properties")
    version = check_version(props.pop(FORMAT_PROPERTY, FORMAT_VERSION), "create table request")
    schema = want(request, "schema", dict, "create table request")
    last_column = check_schema(schema, version)
    schema = {**schema, "schema-id": schema.get("schema-id") if isinstance(schema.get("schema-id"), int) else 0}
    spec = request.get("partition-spec") or {"spec-id": 0, "fields": []}
    last_partition = check_spec(spec)
    spec = {**spec, "spec-id": spec.get("spec-id") if isinstance(spec.get("spec-id"), int) else 0}
    order = request.get("write-order") or {"order-id": 0, "fields": []}
    check_sort_order(order)
    order = {**order, "order-id": order.get("order-id") if isinstance(order.get("order-id"), int) else 0}
    meta = empty(location, version)
    meta.update({
        "last-column-id": last_column, "schemas": [schema], "current-schema-id": schema["schema-id"],
        "partition-specs": [spec], "default-spec-id": spec["spec-id"], "last-partition-id": last_partition,
        "sort-orders": [order], "default-sort-order-id": order["order-id"], "properties": {**NEW_TABLE_PROPERTIES, **props},
    })
    return shaped(meta)


def served(meta: dict[str, Any], location: str) -> dict[str, Any]:
    """``meta`` as a client loading it at a ref sees it: located at that ref."""
    return {**meta, "location": location}


def log_previous(meta: dict[str, Any], previous_url: str | None, previous_updated_ms: int) -> None:
    """Append the metadata file a commit replaces to ``metadata-log``, keeping the most the table's property allows."""
    if previous_url is None:
        return
    log = [*meta.get("metadata-log", []), {"timestamp-ms": previous_updated_ms, "metadata-file": previous_url}]
    try:
        keep = max(1, int(meta.get("properties", {}).get(PREVIOUS_VERSIONS_MAX, DEFAULT_PREVIOUS_VERSIONS)))
    except ValueError:
        keep = DEFAULT_PREVIOUS_VERSIONS
    meta["metadata-log"] = log[-keep:]
