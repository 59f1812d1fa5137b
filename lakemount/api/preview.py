"""``GET /repositories/{repository}/refs/{ref}/objects/preview``: a bounded, typed preview of one object.

The one operation the web UI needs beyond lakeFS's API.  The kind comes from the path's
extension (and the bytes): ``parquet`` (schema and the first ``rows`` rows,
read with pyarrow batch by batch, never the whole file), ``csv`` (header and
rows), ``json`` (pretty-printed), ``image`` (the browser fetches the object
itself), ``text``; anything else, or bytes that are not UTF-8 text, is
``binary``.  At most ``TEXT_CAP`` bytes are read for text kinds (the answer
says ``truncated``); a Parquet file larger than ``PARQUET_CAP`` or an image
larger than ``IMAGE_CAP`` is ``too_large``.  Values are returned as JSON
data; the page inserts them as text, so a preview cannot inject markup.
"""

from __future__ import annotations

import codecs
import csv
import json
from typing import Any, Final

from lakemount.api.branches import repo_of
from lakemount.api.context import Ctx, json_response
from lakemount.api.objects import PATH, check_path
from lakemount.api.routing import Param, operation
from lakemount.auth.policies import Action
from lakemount.catalog.model import object_view
from lakemount.serving.http import Response

TEXT_CAP: Final = 256 * 1024
PARQUET_CAP: Final = 512 * 1024 * 1024
IMAGE_CAP: Final = 20 * 1024 * 1024
MAX_ROWS: Final = 500
MAX_CELL: Final = 1000
FOOTER_CAP: Final = 8 * 1024 * 1024  # a Parquet footer (schema and row group metadata) larger than this is not read
MAX_COLUMNS: Final = 1000  # columns a Parquet preview shows (the answer says how many there are)
DECODED_CAP: Final = 64 * 1024 * 1024  # decoded bytes after which a Parquet preview stops reading rows
IMAGES: Final = frozenset({"png", "jpg", "jpeg", "gif", "webp", "bmp", "svg"})
TEXTS: Final = frozenset({"txt", "md", "log", "py", "yaml", "yml", "toml", "ini", "cfg", "sh", "sql", "xml", "html", "tsv"})


def kind_of(path: str) -> str:
    """The preview kind an object's name suggests (``text`` when it has no known extension)."""
    name = path.rsplit("/", 1)[-1]
    ext = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    if ext == "parquet":
        return "parquet"
    if ext == "csv":
        return "csv"
    if ext in ("json", "jsonl", "ndjson"):
        return "json"
    if ext in IMAGES:
        return "image"
    return "text"


def looks_binary(data: bytes) -> bool:
    """True when ``data`` has a NUL byte or is not UTF-8 (a cut multi-byte character at the end is allowed)."""
    if b"\x00" in data[:8192]:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start < len(data) - 3
    return False


def _cell(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float)):
        return v
    s = v.hex() if isinstance(v, bytes) else str(v)
    return s if len(s) <= MAX_CELL else s[:MAX_CELL] + "…"


def parquet_preview(f: Any, rows: int) -> dict[str, Any]:
    """Schema and the first ``rows`` rows of a Parquet file (``f``: a seekable binary file), at bounded cost.

    A file of a few KiB can declare a footer of hundreds of MiB, thousands of
    columns, or values that expand to GiB (a dictionary page holding one large
    value that every row repeats: 1 KiB on disk took 1.6 GB to preview).  So a
    footer over ``FOOTER_CAP`` is refused before pyarrow reads it, at most
    ``MAX_COLUMNS`` columns are shown and read, rows are decoded one at a time
    and decoding stops (``truncated``) once ``DECODED_CAP`` bytes are decoded.
    """
    import pyarrow.parquet as pq

    f.seek(-8, 2)
    tail = f.read(8)
    if len(tail) == 8 and tail[4:] == b"PAR1" and int.from_bytes(tail[:4], "little") > FOOTER_CAP:
        raise ValueError(f"footer larger than {FOOTER_CAP} bytes")
    f.seek(0)
    pf = pq.ParquetFile(f)
    fields = list(pf.schema_arrow)
    schema = [{"name": fld.name, "type": str(fld.type)} for fld in fields[:MAX_COLUMNS]]
    columns = [c["name"] for c in schema]
    out: list[list[Any]] = []
    decoded = 0
    stopped = False
    # One row per batch: the decoded size is checked before the next row is decoded.
    for batch in pf.iter_batches(batch_size=1, columns=columns if len(fields) > MAX_COLUMNS else None):
        decoded += batch.get_total_buffer_size()
        if decoded > DECODED_CAP and out:
            stopped = True
            break
        for row in batch.to_pylist():
            out.append([_cell(row.get(c)) for c in columns])
        if len(out) >= rows:
            break
    num_rows = pf.metadata.num_rows
    return {"schema": schema, "rows": out, "num_rows": num_rows, "truncated": stopped or num_rows > len(out),
            "columns": len(fields)}


def csv_preview(text: str, rows: int, truncated: bool) -> dict[str, Any]:
    """Header and up to ``rows`` rows of CSV text (a last line cut by the byte cap is dropped)."""
    lines = text.splitlines()
    if truncated and lines:
        lines = lines[:-1]
    reader = csv.reader(lines)
    parsed = []
    for rec in reader:
        parsed.append([_cell(c) for c in rec])
        if len(parsed) > rows:
            truncated = True
            break
    header = parsed[0] if parsed else []
    return {"schema": [{"name": h, "type": "string"} for h in header], "rows": parsed[1 : rows + 1], "truncated": truncated}


@operation("GET", "/repositories/{repository}/refs/{ref}/objects/preview", "previewObject", tag="objects",
           summary="a bounded preview of an object for the web UI: text, CSV, JSON, Parquet (schema and rows), image",
           params=(PATH, Param("rows", "integer", minimum=1, maximum=MAX_ROWS, description="rows of a table (default 100)")))
def preview_object(ctx: Ctx) -> Response:
    """The preview of ``path`` at ``ref`` (see the module docstring); 404 for a missing object, 400 for a bad path."""
    repo = repo_of(ctx, Action.READ_REPO)
    path = check_path(ctx.q_required("path"))
    rows = ctx.q_int("rows", 100) or 100
    cat = ctx.catalog
    entry = cat.stat(repo, ctx.params["ref"], path)
    kind = kind_of(path)
    view = object_view(entry)
    base: dict[str, Any] = {"path": path, "size_bytes": view.size, "content_type": view.content_type}
    if not view.has_data or view.size == 0:  # markers and symlinks are 0 bytes (their address is no data)
        return json_response(200, {**base, "kind": "text", "text": "", "truncated": False})
    if kind == "image":
        return json_response(200, {**base, "kind": "image" if entry.size <= IMAGE_CAP else "too_large"})
    if kind == "parquet" and entry.size > PARQUET_CAP:
        return json_response(200, {**base, "kind": "too_large"})
    repo_rec = cat.repository(repo)
    f = cat.open(repo_rec, entry)
    try:
        if kind == "parquet":
            try:
                return json_response(200, {**base, "kind": "parquet", **parquet_preview(f, rows)})
            except Exception as e:  # noqa: BLE001 - pyarrow's many errors on a bad file: shown, not a 500
                return json_response(200, {**base, "kind": "error", "message": f"not a readable Parquet file: {str(e)[:300]}"})
        data = f.read(TEXT_CAP + 1)
    finally:
        f.close()
    truncated = len(data) > TEXT_CAP or entry.size > TEXT_CAP
    data = data[:TEXT_CAP]
    if looks_binary(data):
        return json_response(200, {**base, "kind": "binary"})
    # Cut at TEXT_CAP, the last character may be cut in two: dropped, not shown as U+FFFD.
    text = codecs.getincrementaldecoder("utf-8")("replace").decode(data, final=not truncated)
    if kind == "csv":
        try:
            return json_response(200, {**base, "kind": "csv", **csv_preview(text, rows, truncated)})
        except csv.Error:
            pass  # a field over csv's limit (128 KiB): shown as text, not a 500
    if kind == "json" and not truncated:
        try:
            return json_response(200, {**base, "kind": "json", "text": json.dumps(json.loads(text), indent=2, ensure_ascii=False), "truncated": False})
        except (ValueError, RecursionError):
            pass  # shown as text (a file nested too deeply for the parser as well)
    return json_response(200, {**base, "kind": "text", "text": text, "truncated": truncated})


