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
from lakemount.serving.http import Response

TEXT_CAP: Final = 256 * 1024
PARQUET_CAP: Final = 512 * 1024 * 1024
IMAGE_CAP: Final = 20 * 1024 * 1024
MAX_ROWS: Final = 500
MAX_CELL: Final = 1000
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
    """Schema and the first ``rows`` rows of a Parquet file (``f``: a seekable binary file)."""
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(f)
    schema = [{"name": fld.name, "type": str(fld.type)} for fld in pf.schema_arrow]
    out: list[list[Any]] = []
    for batch in pf.iter_batches(batch_size=min(rows, 1024) or 1):
        for row in batch.to_pylist():
            out.append([_cell(row.get(c["name"])) for c in schema])
            if len(out) >= rows:
                break
        if len(out) >= rows:
            break
    return {"schema": schema, "rows": out, "num_rows": pf.metadata.num_rows, "truncated": pf.metadata.num_rows > len(out)}


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
    base: dict[str, Any] = {"path": path, "size_bytes": entry.size, "content_type": entry.content_type or ""}
    if kind == "image":
        return json_response(200, {**base, "kind": "image" if entry.size <= IMAGE_CAP else "too_large"})
    if kind == "parquet" and entry.size > PARQUET_CAP:
        return json_response(200, {**base, "kind": "too_large"})
    repo_rec = cat.repository(repo)
    cat.check_source(entry)
    if entry.size == 0:
        return json_response(200, {**base, "kind": "text", "text": "", "truncated": False})
    f = cat.adapter.open(cat.physical_url(repo_rec, entry.address))
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
        return json_response(200, {**base, "kind": "csv", **csv_preview(text, rows, truncated)})
    if kind == "json" and not truncated:
        try:
            return json_response(200, {**base, "kind": "json", "text": json.dumps(json.loads(text), indent=2, ensure_ascii=False), "truncated": False})
        except (ValueError, RecursionError):
            pass  # shown as text (a file nested too deeply for the parser as well)
    return json_response(200, {**base, "kind": "text", "text": text, "truncated": truncated})


