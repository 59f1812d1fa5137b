"""The web UI's Iceberg table pages (lakemount's own operations): a ref's tables, one table, its rows, and what
changed in each table between two refs.

``.../refs/{ref}/iceberg/tables`` lists the tables of a ref by namespace; ``.../iceberg/table?path=db/events`` is
one table's schema (fields, types, required, version 3 defaults), partition spec and snapshots (``contents.py``);
``.../iceberg/table/rows`` the first rows of its current snapshot, read file by file through the object
preview's bounded Parquet reader (``preview.parquet_preview``), each file's columns matched to the current
schema by field id (a column a file lacks is its ``initial-default``, else null).  Under
``.../refs/{leftRef}/diff/{rightRef}/iceberg``, with ``type`` as ``diffRefs`` takes it, ``tables`` lists the
tables whose pointer differs, each with the snapshots added, the schema changes and whether a row diff may be
had; ``table/rows`` is that row diff: both sides' current snapshots read whole and compared by the Parquet
table diff (``table_diff.py``), when each side is at most ``ROW_DIFF_BYTES`` of data files and has no delete
files.  Bad input is a one-line 400 (a path that names no table, a type, a table too large to compare), a
table or ref that does not exist a 404.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

from lakemount.api.context import ApiCatalog, Ctx, json_response, repo_of
from lakemount.api.errors import ApiError, bad_request, not_found
from lakemount.api.operations.object_diff import RECENT, TYPE, compared_refs
from lakemount.api.operations.preview import MAX_ROWS, parquet_preview
from lakemount.api.pagination import MAX_AMOUNT, page
from lakemount.api.routing import AMOUNT, Param, operation
from lakemount.auth.policies import Action
from lakemount.catalog.model import ResolvedRef
from lakemount.iceberg import contents
from lakemount.iceberg.contents import ContentsError, DataFile
from lakemount.iceberg.errors import IcebergError
from lakemount.iceberg.names import TableId
from lakemount.iceberg.tables import Loaded
from lakemount.serving.http import Response

TAG = "tables"
ROW_DIFF_BYTES: Final = 64 << 20  # data file bytes of one side a row diff reads
ROW_DIFF_ROWS: Final = 1_000_000  # rows of one side a row diff compares
FIELD_ID: Final = b"PARQUET:field_id"
TABLE_PATH = Param("path", required=True, description="the table's directory: its namespace levels and name, as db/events")
BASE = "/repositories/{repository}/refs/{ref}/iceberg"
DIFF = "/repositories/{repository}/refs/{leftRef}/diff/{rightRef}/iceberg"


@contextmanager
def _answers() -> Iterator[None]:
    """The Iceberg side's refusals as the API's: a path naming no table (400), no table (404); a table whose
    pointer, metadata or manifests cannot be read is a 400 naming the fault (its objects are data anyone with
    WriteRepo may have written through S3, not the server's own state)."""
    try:
        yield
    except IcebergError as e:
        raise ApiError(e.code if e.code < 500 else 400, e.message) from None
    except ContentsError as e:
        raise bad_request(str(e)) from None
    except (TypeError, AttributeError, KeyError, ValueError) as e:  # a field of the wrong JSON type
        raise bad_request(f"the table's metadata is malformed: {type(e).__name__}: {str(e)[:200]}") from None


def _table(ctx: Ctx, repo: str, at: Any) -> Loaded:
    path = ctx.q_required("path")
    with _answers():
        table = contents.table_id(repo, ctx.params["ref"], path)
        loaded = contents.load(ctx.catalog, table, at)
    if loaded is None:
        raise not_found(f"no Iceberg table at {table.path} in {repo}/{ctx.params['ref']}")
    return loaded


@operation("GET", BASE + "/tables", "listIcebergTables", tag=TAG, response="IcebergTableList",
           summary="the Iceberg tables of a ref, by namespace")
def list_tables(ctx: Ctx) -> Response:
    """listIcebergTables: every table of the ref (at most ``contents.MAX_TABLES``, ``truncated`` when there are
    more) with its format version, current snapshot and last update; 404 for a ref that does not exist."""
    repo = repo_of(ctx, Action.READ_REPO)
    cat = ctx.catalog
    at = cat.resolve(repo, ctx.params["ref"])
    found, truncated = contents.find_tables(cat, repo, at)
    out = []
    for f in found:
        one: dict[str, Any] = {"namespace": list(f.namespace), "name": f.name, "path": f.path}
        try:
            with _answers():
                loaded = contents.load(cat, contents.table_id(repo, ctx.params["ref"], f.path), at)
                if loaded is None:
                    continue
                meta = loaded.metadata
                one.update(format_version=meta.get("format-version"),
                           current_snapshot_id=contents.id_text(contents.current_snapshot(meta)),
                           snapshots=len(meta.get("snapshots") or []), last_updated_ms=meta.get("last-updated-ms"))
        except ApiError as e:  # one unreadable table is said in its row; the others are listed
            one["error"] = e.message
        out.append(one)
    return json_response(200, {"results": out, "truncated": truncated})


@operation("GET", BASE + "/table", "getIcebergTable", tag=TAG, response="IcebergTable", params=(TABLE_PATH,),
           summary="an Iceberg table at a ref: schema, partition spec, snapshots")
def get_table(ctx: Ctx) -> Response:
    """getIcebergTable: the table's current schema (fields with type, required, doc and version 3 defaults),
    default partition spec and snapshots (newest first, with the summary's counts); 400 for a path that names no
    table, 404 for no table there or a ref that does not exist."""
    repo = repo_of(ctx, Action.READ_REPO)
    at = ctx.catalog.resolve(repo, ctx.params["ref"])
    loaded = _table(ctx, repo, at)
    with _answers():
        return json_response(200, contents.detail(loaded))


def _field_names(meta: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[int, str]]:
    """The current schema's top-level fields and {field id: name}."""
    top = [f for f in contents.current_schema(meta).get("fields") or [] if isinstance(f, dict)]
    return top, {f["id"]: f["name"] for f in top if isinstance(f.get("id"), int)}


def _file_names(schema: Any, ids: dict[int, str]) -> dict[str, str]:
    """{a data file's column name: the current schema's name for it}, by the field ids the file was written with
    (a file without ids keeps its names)."""
    out = {}
    for fld in schema:
        raw = (fld.metadata or {}).get(FIELD_ID)
        fid = int(raw) if raw is not None and raw.isdigit() else None
        out[fld.name] = ids.get(fid, fld.name) if fid is not None else fld.name
    return out


@contextmanager
def _opened(ctx: Ctx, repo: str, at: Any, f: DataFile) -> Iterator[Any]:
    cat = ctx.catalog
    entry = cat.get_optional(repo, at, f.path)
    if entry is None:
        raise bad_request(f"a data file of the snapshot is missing: {f.path[:200]}")
    fh = cat.open(cat.repository(repo), entry)
    try:
        yield fh
    finally:
        fh.close()


@operation("GET", BASE + "/table/rows", "previewIcebergTable", tag=TAG, response="IcebergTableRows",
           params=(TABLE_PATH, Param("rows", "integer", minimum=1, maximum=MAX_ROWS, description="rows to show (default 100)")),
           summary="the first rows of an Iceberg table's current snapshot")
def preview_rows(ctx: Ctx) -> Response:
    """previewIcebergTable: the current schema's columns and the first ``rows`` rows of the current snapshot's data
    files, in manifest order (``num_rows``: the files' total; ``delete_files``: how many delete files the snapshot
    has, whose deletes the preview does not apply); 400/404 as ``getIcebergTable``, 400 for an unreadable file."""
    import pyarrow.parquet as pq

    repo = repo_of(ctx, Action.READ_REPO)
    want = ctx.q_int("rows", 100) or 100
    cat = ctx.catalog
    at = cat.resolve(repo, ctx.params["ref"])
    loaded = _table(ctx, repo, at)
    meta = loaded.metadata
    top, ids = _field_names(meta)
    columns = [f["name"] for f in top]
    defaults = [f.get("initial-default") for f in top]
    with _answers():
        files = contents.data_files(cat, repo, at, meta, contents.current_snapshot(meta))
    data = [f for f in files if f.content == 0]
    rows: list[list[Any]] = []
    message = ""
    page_cap = ctx.service.app.config.api.preview.max_page_bytes
    for f in data:
        if len(rows) >= want:
            break
        with _opened(ctx, repo, at, f) as fh:
            try:
                got = parquet_preview(fh, want - len(rows), page_cap)
                fh.seek(0)
                names = _file_names(pq.read_schema(fh), ids)
            except Exception as e:  # noqa: BLE001 - pyarrow's many errors on a bad file: said, not a 500
                raise bad_request(f"data file {f.path[:200]} is no readable Parquet file: {str(e)[:200]}") from None
        at_col = {names.get(c["name"], c["name"]): i for i, c in enumerate(got["schema"])}
        for r in got["rows"]:
            rows.append([r[at_col[c]] if c in at_col else d for c, d in zip(columns, defaults, strict=True)])
        if got.get("message"):
            message = got["message"]
            break
    return json_response(200, {
        "path": loaded.table.path, "snapshot_id": contents.id_text(contents.current_snapshot(meta)),
        "schema": [{"name": f["name"], "type": contents.type_text(f.get("type"))} for f in top], "rows": rows[:want],
        "num_rows": sum(f.records for f in data), "data_files": len(data), "delete_files": len(files) - len(data),
        "truncated": len(rows) < sum(f.records for f in data), **({"message": message} if message else {})})


# ---- compare ------------------------------------------------------------------------------------------------


def _side(loaded: Loaded | None) -> dict[str, Any]:
    if loaded is None:
        return {"exists": False}
    meta = loaded.metadata
    snap = contents.current_snapshot(meta)
    summary: dict[str, Any] = {}
    for s in meta.get("snapshots") or []:
        if isinstance(s, dict) and s.get("snapshot-id") == snap and isinstance(s.get("summary"), dict):
            summary = s["summary"]
    return {"exists": True, "format_version": meta.get("format-version"), "current_snapshot_id": contents.id_text(snap),
            "schema_id": contents.current_schema(meta).get("schema-id", 0), "metadata_path": loaded.metadata_path,
            "total_records": int(summary.get("total-records", "0") or 0) if str(summary.get("total-records", "0")).isdigit() else None,
            "total_files_size": int(summary["total-files-size"]) if str(summary.get("total-files-size", "")).isdigit() else None,
            "delete_files": int(summary["total-delete-files"]) if str(summary.get("total-delete-files", "")).isdigit() else 0}


def _row_diff_refusal(side: dict[str, Any], which: str) -> str:
    """Why a side's snapshot is no row diff's (empty when it may be compared), from its summary's totals."""
    if not side["exists"]:
        return ""
    if side["delete_files"]:
        return f"the {which} side has delete files (merge-on-read): no row diff"
    if side["total_files_size"] is not None and side["total_files_size"] > ROW_DIFF_BYTES:
        return f"the {which} side is {side['total_files_size']} bytes of data files (a row diff reads at most {ROW_DIFF_BYTES})"
    if side["total_records"] is not None and side["total_records"] > ROW_DIFF_ROWS:
        return f"the {which} side has {side['total_records']} rows (a row diff compares at most {ROW_DIFF_ROWS})"
    return ""


def _table_change(cat: ApiCatalog, table: TableId, la: ResolvedRef, ra: ResolvedRef) -> dict[str, Any] | None:
    """How ``table`` differs from ``la`` to ``ra`` (resolved refs), None when its pointer is the same."""
    a, b = contents.load(cat, table, la), contents.load(cat, table, ra)
    if a is None and b is None or a is not None and b is not None and a.pointer.address == b.pointer.address:
        return None
    added, dropped = contents.snapshots_added(None if a is None else a.metadata, None if b is None else b.metadata)
    left, right = _side(a), _side(b)
    refused = "" if b is not None else "the table was removed"
    refused = refused or _row_diff_refusal(left, "left") or _row_diff_refusal(right, "right")
    one = {"path": table.path, "namespace": list(table.namespace.levels), "name": table.name,
           "status": "added" if a is None else "removed" if b is None else "changed",
           "left": left, "right": right, "snapshots_added": added, "snapshots_removed": dropped,
           "schema_changes": contents.schema_changes(None if a is None else contents.current_schema(a.metadata),
                                                     None if b is None else contents.current_schema(b.metadata)),
           "row_diff": not refused}
    if refused:
        one["row_diff_refused"] = refused
    return one


@operation("GET", DIFF + "/tables", "diffIcebergTables", tag=TAG, response="IcebergTableDiffList", params=(TYPE,),
           summary="the Iceberg tables that differ between two refs: snapshots added, schema changes")
def diff_tables(ctx: Ctx) -> Response:
    """diffIcebergTables: each table whose pointer differs (``added``, ``removed``, ``changed``), by path, with
    both sides' current snapshot and schema, the snapshots added (and how many the right side no longer has),
    the schema changes by field id, and whether a row diff may be had (``row_diff``, else ``row_diff_refused``
    says why); 400 for a bad type, 404 for a ref that does not exist."""
    repo = repo_of(ctx, Action.READ_REPO)
    cat = ctx.catalog
    lref, rref = compared_refs(ctx, repo)
    la, ra = cat.resolve(repo, lref), cat.resolve(repo, rref)
    lfound, ltrunc = contents.find_tables(cat, repo, la)
    rfound, rtrunc = contents.find_tables(cat, repo, ra)
    paths = sorted({f.path for f in lfound} | {f.path for f in rfound})
    out = []
    for path in paths:
        with _answers():
            table = contents.table_id(repo, ctx.params["rightRef"], path)
        try:
            with _answers():
                one = _table_change(cat, table, la, ra)
        except ApiError as e:  # one unreadable table is said in its entry; the others are compared
            one = {"path": path, "namespace": list(table.namespace.levels), "name": table.name, "status": "unreadable",
                   "error": e.message, "row_diff": False, "row_diff_refused": e.message}
        if one is not None:
            out.append(one)
    return json_response(200, {"left": lref, "right": rref, "results": out, "truncated": ltrunc or rtrunc})


def _rows_of(ctx: Ctx, repo: str, at: Any, loaded: Loaded | None, which: str) -> Any:
    """One side's current snapshot as an Arrow table in its current schema's columns (None when absent)."""
    import pyarrow as pa

    from lakemount.render.table_diff import TableDiffError, load_table

    if loaded is None:
        return None
    meta = loaded.metadata
    with _answers():
        files = contents.data_files(ctx.catalog, repo, at, meta, contents.current_snapshot(meta))
    if any(f.content != 0 for f in files):
        raise bad_request(f"the {which} side has delete files (merge-on-read): no row diff")
    size, count = sum(f.size for f in files), sum(f.records for f in files)
    if size > ROW_DIFF_BYTES or count > ROW_DIFF_ROWS:
        raise bad_request(f"too large for a row diff: the {which} side is {count} rows in {size} bytes of data files "
                          f"(at most {ROW_DIFF_ROWS} rows, {ROW_DIFF_BYTES} bytes)")
    top, ids = _field_names(meta)
    parts = []
    for f in files:
        with _opened(ctx, repo, at, f) as fh:
            try:
                t = load_table(fh, "parquet", f.size)
            except TableDiffError as e:
                raise bad_request(f"data file {f.path[:200]}: {e}") from None
        names = _file_names(t.schema, ids)
        t = t.rename_columns([names[n] for n in t.column_names])
        cols = []
        for fld in top:
            if fld["name"] in t.column_names:
                cols.append(t[fld["name"]])
            else:
                cols.append(pa.array([fld.get("initial-default")] * t.num_rows))
        parts.append(pa.table(cols, names=[fld["name"] for fld in top]))
    if not parts:
        return pa.table({fld["name"]: pa.array([], pa.null()) for fld in top})
    try:
        return pa.concat_tables(parts, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise bad_request(f"the {which} side's data files do not share one schema: {str(e)[:200]}") from None


@operation("GET", DIFF + "/table/rows", "diffIcebergTableRows", tag=TAG, response="TableDiff",
           params=(TABLE_PATH, TYPE, Param("key", array=True, description="key column(s) rows are matched by; none: whole rows"),
                   Param("after", description="the previous page's next_offset"), AMOUNT),
           summary="a row diff of an Iceberg table between two refs: schema changes, rows added, removed, changed")
def diff_table_rows(ctx: Ctx) -> Response:
    """diffIcebergTableRows: the Parquet table diff (``diffObjectTable``'s answer, ``format`` ``iceberg``) of the
    table's current snapshots on the two sides; 400 for a path naming no table, a side with delete files or over
    ``ROW_DIFF_BYTES`` / ``ROW_DIFF_ROWS``, a bad key; 404 when neither side has the table."""
    from lakemount.render.table_diff import TableDiffError, page_of, table_diff

    repo = repo_of(ctx, Action.READ_REPO)
    cat = ctx.catalog
    after = ctx.q("after") or "0"
    if not after.isdigit():
        raise bad_request("after must be the next_offset of a previous page")
    start, n, key = int(after), ctx.page_size(), ctx.q_list("key")
    lref, rref = compared_refs(ctx, repo)
    la, ra = cat.resolve(repo, lref), cat.resolve(repo, rref)
    path = ctx.q_required("path")
    with _answers():
        table = contents.table_id(repo, ctx.params["rightRef"], path)
        a, b = contents.load(cat, table, la), contents.load(cat, table, ra)
    if a is None and b is None:
        raise not_found(f"no Iceberg table at {table.path} on either side")
    ident = tuple(None if x is None else (x.pointer.address, x.metadata_path) for x in (a, b))
    cache_key = (cat.repository(repo).storage_namespace, ident, "iceberg", tuple(key))
    compared = RECENT.get(cache_key)
    if compared is None:
        left, right = _rows_of(ctx, repo, la, a, "left"), _rows_of(ctx, repo, ra, b, "right")
        try:
            compared = table_diff(right.schema.empty_table() if left is None else left,
                                  left.schema.empty_table() if right is None else right, key)
        except TableDiffError as e:
            raise bad_request(str(e)) from None
        RECENT.put(cache_key, compared)
    columns, results = page_of(compared, start, n)
    body = page(results, start + n < len(compared.types), str(start + n))
    body["pagination"]["max_per_page"] = MAX_AMOUNT
    side = lambda ref, x, t: {"ref": ref, "exists": x is not None, "num_rows": t.num_rows}  # noqa: E731
    return json_response(200, {
        "path": table.path, "format": "iceberg", "key": key, "mode": "key" if key else "row_hash",
        "left": side(lref, a, compared.left), "right": side(rref, b, compared.right),
        "schema": {"added": compared.added_columns, "dropped": compared.dropped_columns, "retyped": compared.retyped_columns},
        "counts": compared.totals, "columns": columns, **body})
