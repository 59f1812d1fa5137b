"""The ``lakemount_check`` hook type: data checks on what an operation brings in, no code to run.

It looks at the objects the operation brings in (a commit's staged changes,
what a merge brings from its source since the merge base); paths under
``_lakefs_actions/`` are exempt.  Properties, each optional:

==================  =========================================================
allowed_paths       globs; every added or changed path must match one
denied_paths        globs; no added or changed path may match any
formats             e.g. ``[parquet, csv, json]``: every added or changed
                    object must have one of their extensions (``.parquet``,
                    ``.csv``, ``.json``, ``.jsonl``/``.ndjson``) and parse as it
max_size, min_size  bytes per object (``10MB``, ``1GiB`` and plain numbers)
required_metadata   commit metadata keys the commit or merge must carry
parquet_schema      ``compatible``: a new Parquet file keeps every column (name
                    and type) of an existing Parquet file in its directory on
                    the destination; new columns may be added
iceberg_schema      ``compatible``: an Iceberg table whose pointer the change
                    brings (``<ns>/<table>/_iceberg_table.json``) keeps, in its
                    new current schema, every required column of its current
                    schema on the destination (by field id), and changes no
                    column's type but by Iceberg's promotions (int to long,
                    float to double, a decimal's precision widened)
max_reported        how many offending paths the message lists (default 10)
==================  =========================================================
"""

from __future__ import annotations

import csv
import fnmatch
import io
import json
import posixpath
import re
from typing import Any, BinaryIO, Final

from lakemount.actions.events import Event
from lakemount.actions.hook import HookCatalog, HookContext, HookFailure, printable
from lakemount.actions.parser import ACTIONS_PREFIX, Hook
from lakemount.table_pointers import table_of

SAMPLE: Final = 1 << 20
MAX_JSON: Final = 64 << 20

EXTENSIONS: Final = {
    "parquet": (".parquet",),
    "csv": (".csv",),
    "json": (".json",),
    "jsonl": (".jsonl", ".ndjson"),
}


def parse_size(value: object) -> int:
    """Bytes in ``1048576``, ``10MB``, ``1.5GiB``; raises ``HookFailure``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?i?B?)\s*", str(value), re.IGNORECASE)
    if not m:
        raise HookFailure(f"bad size {value!r}: use bytes or a number with KB, MB, GB, KiB, MiB, GiB")
    unit = m.group(2).upper().rstrip("B")
    base = 1024 if unit.endswith("I") else 1000
    power = "KMGT".find(unit[:1]) + 1 if unit else 0
    return int(float(m.group(1)) * base**power)


def _globs(props: Any, key: str) -> list[str]:
    value = props.get(key)
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise HookFailure(f"'{key}' must be a list of globs")
    return value


def _offenders(kind: str, paths: list[str], limit: int) -> str:
    shown = ", ".join(paths[:limit]) + (f" (+{len(paths) - limit} more)" if len(paths) > limit else "")
    return f"{len(paths)} path(s) {kind}: {shown}"


def run_check(hook: Hook, event: Event, payload: dict[str, Any], ctx: HookContext) -> str:
    """Check the changes ``event`` brings in against the hook's properties; raises ``HookFailure``."""
    props = hook.properties
    known = {"allowed_paths", "denied_paths", "formats", "max_size", "min_size", "required_metadata", "parquet_schema",
             "iceberg_schema", "max_reported"}
    unknown = sorted(set(props) - known)
    if unknown:
        raise HookFailure(f"unknown lakemount_check properties: {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    limit = int(props.get("max_reported", 10))
    problems: list[str] = []
    required = props.get("required_metadata") or []
    if required:
        if not isinstance(required, list):
            raise HookFailure("'required_metadata' must be a list of keys")
        missing = [k for k in required if k not in event.commit_metadata]
        if missing:
            problems.append(f"missing commit metadata: {', '.join(map(str, missing))}")
    allowed, denied = _globs(props, "allowed_paths"), _globs(props, "denied_paths")
    formats = props.get("formats") or []
    if isinstance(formats, str):
        formats = [formats]
    bad_formats = [f for f in formats if f not in EXTENSIONS]
    if bad_formats:
        raise HookFailure(f"unknown formats {bad_formats}: use {', '.join(EXTENSIONS)}")
    max_size = parse_size(props["max_size"]) if "max_size" in props else None
    min_size = parse_size(props["min_size"]) if "min_size" in props else None
    schema_mode = props.get("parquet_schema")
    if schema_mode not in (None, "compatible"):
        raise HookFailure("'parquet_schema' must be 'compatible'")
    table_mode = props.get("iceberg_schema")
    if table_mode not in (None, "compatible"):
        raise HookFailure("'iceberg_schema' must be 'compatible'")
    checked = 0
    outside: list[str] = []
    forbidden: list[str] = []
    wrong_ext: list[str] = []
    unreadable: list[str] = []
    too_big: list[str] = []
    too_small: list[str] = []
    schema: list[str] = []
    tables: list[str] = []
    reader = ObjectReader(ctx.catalog, event)
    for change in event.changes() if event.changes is not None else iter(()):
        if change.kind == "removed" or change.path.startswith(ACTIONS_PREFIX):
            continue
        checked += 1
        p = change.path
        if allowed and not any(fnmatch.fnmatchcase(p, g) for g in allowed):
            outside.append(p)
        if any(fnmatch.fnmatchcase(p, g) for g in denied):
            forbidden.append(p)
        size = change.size or 0
        if max_size is not None and size > max_size:
            too_big.append(f"{p} ({size} bytes)")
        if min_size is not None and size < min_size:
            too_small.append(f"{p} ({size} bytes)")
        if formats:
            fmt = next((f for f in formats if p.lower().endswith(EXTENSIONS[f])), None)
            if fmt is None:
                wrong_ext.append(p)
            else:
                error = reader.format_error(p, fmt)
                if error:
                    unreadable.append(f"{p} ({error})")
        if schema_mode and p.lower().endswith(".parquet"):
            error = reader.schema_error(p)
            if error:
                schema.append(f"{p} ({error})")
        if table_mode and (table := table_of(p)) is not None:
            error = reader.table_schema_error(p)
            if error:
                tables.append(f"table {table} ({error})")
    for kind, paths in (
        ("outside allowed_paths", outside), ("match denied_paths", forbidden),
        (f"not of formats {', '.join(formats)}", wrong_ext), ("do not parse as their format", unreadable),
        (f"larger than {max_size} bytes", too_big), (f"smaller than {min_size} bytes", too_small),
        ("change the Parquet schema incompatibly", schema),
    ):
        if paths:
            problems.append(_offenders(kind, paths, limit))
    for kind, paths in (
        ("change the schema incompatibly with the destination's", tables),
    ):
        if paths:
            problems.append(_offenders(kind, paths, limit))
    if problems:
        raise HookFailure("; ".join(problems))
    return f"{checked} object(s) checked: ok"


class ObjectReader:
    """Reads the objects a check looks at: the new versions at ``event.read_ref``, the old ones at ``event.dest_ref``."""

    def __init__(self, catalog: HookCatalog, event: Event) -> None:
        self.catalog = catalog
        self.event = event
        self.repository = catalog.repository(event.repo)
        self._dest_schemas: dict[str, Any] = {}

    def _open(self, ref: str, path: str) -> BinaryIO:
        entry = self.catalog.stat(self.event.repo, ref, path)
        return self.catalog.open(self.repository, entry)

    def _head(self, ref: str, path: str, n: int) -> bytes:
        entry = self.catalog.stat(self.event.repo, ref, path)
        return bytes(self.catalog.read(self.repository, entry, 0, n))

    def format_error(self, path: str, fmt: str) -> str:
        """Why the object at ``path`` does not parse as ``fmt`` ('' if it does)."""
        ref = self.event.read_ref or self.event.branch
        try:
            if fmt == "parquet":
                schema_of(self._open(ref, path))
                return ""
            if fmt == "json":
                entry = self.catalog.stat(self.event.repo, ref, path)
                if entry.size > MAX_JSON:
                    return f"JSON larger than {MAX_JSON} bytes is not checked"
                json.loads(self.catalog.read(self.repository, entry))
                return ""
            head = self._head(ref, path, SAMPLE)
            text = head.decode("utf-8")
            if fmt == "jsonl":
                lines = text.splitlines()
                for line in lines[:-1] if len(head) == SAMPLE else lines:
                    if line.strip():
                        json.loads(line)
                return ""
            rows = list(csv.reader(io.StringIO(text)))
            if len(head) == SAMPLE and rows:
                rows = rows[:-1]  # the sample may cut the last row
            if rows and any(len(r) != len(rows[0]) for r in rows if r):
                return "rows have different numbers of fields"
            return ""
        except UnicodeDecodeError:
            return "not UTF-8 text"
        except json.JSONDecodeError as exc:
            return f"bad JSON: {exc.msg} at line {exc.lineno}"
        except csv.Error as exc:
            return f"bad CSV: {exc}"
        except HookFailure:
            raise
        except Exception as exc:  # pyarrow raises many types for broken files
            return printable(f"{type(exc).__name__}: {exc}".encode(), 200)

    def schema_error(self, path: str) -> str:
        """Why the new Parquet file at ``path`` is incompatible with its directory on the destination ('' if not)."""
        ref = self.event.read_ref or self.event.branch
        try:
            new = schema_of(self._open(ref, path))
        except Exception as exc:
            return printable(f"unreadable: {type(exc).__name__}: {exc}".encode(), 200)
        old = self._dest_schema(posixpath.dirname(path), path)
        if old is None:
            return ""
        missing = [f.name for f in old if new.get_field_index(f.name) < 0]
        changed = [
            f"{f.name}: {f.type} -> {new.field(f.name).type}"
            for f in old
            if new.get_field_index(f.name) >= 0 and not new.field(f.name).type.equals(f.type)
        ]
        reasons = ([f"drops column(s) {', '.join(missing)}"] if missing else []) + ([f"changes {', '.join(changed)}"] if changed else [])
        return "; ".join(reasons)

    def _table_schema(self, ref: str, pointer: str) -> dict[str, Any] | None:
        """The current schema of the table whose pointer is at ``pointer`` on ``ref`` (None if it has none there)."""
        entry = self.catalog.get_optional(self.event.repo, ref, pointer)
        if entry is None:
            return None
        target = json.loads(self.catalog.read(self.repository, entry))
        meta_entry = self.catalog.get_optional(self.event.repo, ref, target["metadata"])
        if meta_entry is None:
            raise ValueError(f"its metadata file {target['metadata']} is missing")
        meta = json.loads(self.catalog.read(self.repository, meta_entry))
        current = meta["current-schema-id"]
        for schema in meta["schemas"]:
            if schema.get("schema-id") == current:
                return schema  # type: ignore[no-any-return]
        raise ValueError(f"its current schema {current} is not among its schemas")

    def table_schema_error(self, pointer: str) -> str:
        """Why the table whose new pointer is at ``pointer`` has a schema incompatible with the destination's ('' if not)."""
        dest = self.event.dest_ref
        if not dest:
            return ""
        try:
            old = self._table_schema(dest, pointer)
            new = self._table_schema(self.event.read_ref or self.event.branch, pointer)
        except (ValueError, KeyError, TypeError) as exc:
            return printable(f"unreadable metadata: {type(exc).__name__}: {exc}".encode(), 200)
        if old is None or new is None:
            return ""
        return "; ".join(schema_changes(old, new))

    def _dest_schema(self, directory: str, exclude: str) -> Any:
        if directory in self._dest_schemas:
            return self._dest_schemas[directory]
        schema = None
        dest = self.event.dest_ref
        if dest:
            prefix = directory + "/" if directory else ""
            for item in self.catalog.list(self.event.repo, dest, prefix, delimiter="/"):
                if item.entry is not None and item.path.lower().endswith(".parquet") and item.path != exclude:
                    try:
                        schema = schema_of(self.catalog.open(self.repository, item.entry))
                        break
                    except Exception:
                        continue
        self._dest_schemas[directory] = schema
        return schema


def schema_of(stream: Any) -> Any:
    """The Arrow schema of a Parquet file (a seekable stream); raises what pyarrow raises."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise HookFailure("Parquet checks need pyarrow (pip install pyarrow)") from None
    with stream:
        return pq.ParquetFile(stream).schema_arrow


def _columns(struct: dict[str, Any], prefix: str = "") -> dict[int, tuple[str, Any, bool]]:
    """Every field of an Iceberg struct type, nested ones too: id -> (dotted name, type, required)."""
    out: dict[int, tuple[str, Any, bool]] = {}
    for f in struct.get("fields", []):
        name = prefix + str(f.get("name"))
        out[f["id"]] = (name, f.get("type"), bool(f.get("required")))
        kind = f.get("type")
        if isinstance(kind, dict) and kind.get("type") == "struct":
            out.update(_columns(kind, name + "."))
    return out


_DECIMAL = re.compile(r"decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)")
PROMOTIONS: Final = {("int", "long"), ("float", "double")}


def _promotes(old: Any, new: Any) -> bool:
    """Whether Iceberg reads values of type ``old`` as ``new`` (the same type, or one of its promotions)."""
    if old == new:
        return True
    if isinstance(old, dict) or isinstance(new, dict):  # nested: its kind must stay; its fields are checked by id
        return isinstance(old, dict) and isinstance(new, dict) and old.get("type") == new.get("type")
    if (old, new) in PROMOTIONS:
        return True
    a, b = _DECIMAL.fullmatch(str(old)), _DECIMAL.fullmatch(str(new))
    return bool(a and b and a[2] == b[2] and int(b[1]) >= int(a[1]))


def _shown(kind: Any) -> str:
    return kind if isinstance(kind, str) else str(kind.get("type") if isinstance(kind, dict) else kind)


def schema_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What makes Iceberg schema ``new`` incompatible with ``old``: dropped required columns, type changes that are
    no promotion (columns are matched by field id, so a rename is compatible)."""
    before, after = _columns(old), _columns(new)
    dropped = [name for fid, (name, _, required) in before.items() if required and fid not in after]
    changed = [f"{name}: {_shown(kind)} -> {_shown(after[fid][1])}" for fid, (name, kind, _) in before.items()
               if fid in after and not _promotes(kind, after[fid][1])]
    return ([f"drops required column(s) {', '.join(dropped)}"] if dropped else []) + (
        [f"changes {', '.join(changed)}"] if changed else [])
