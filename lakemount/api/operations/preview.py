"""``GET /repositories/{repository}/refs/{ref}/objects/preview``: a bounded, typed preview of one object.

The one operation the web UI needs beyond lakeFS's API.  The kind comes from the path's
extension (and the bytes): ``parquet`` (schema and the first ``rows`` rows,
read with pyarrow batch by batch, never the whole file), ``csv`` (header and
rows), ``json`` (pretty-printed), ``image`` (the browser fetches the object
itself), ``text``; anything else, or bytes that are not UTF-8 text, is
``binary``.  At most ``TEXT_CAP`` bytes are read for text kinds (the answer
says ``truncated``); a Parquet file larger than ``PARQUET_CAP`` or an image
larger than ``IMAGE_CAP`` is ``too_large``; a Parquet page that would decode
to more than ``api.preview.max_page_bytes`` is not read (the rows before it
are shown, with a ``message`` naming the limit).  Values are returned as JSON
data; the page inserts them as text, so a preview cannot inject markup.
"""

from __future__ import annotations

import codecs
import csv
import json
from typing import Any, Final

from lakemount.api.context import Ctx, json_response, repo_of
from lakemount.api.operations.objects import PATH, check_path
from lakemount.api.routing import Param, operation
from lakemount.auth.policies import Action
from lakemount.catalog.model import object_view
from lakemount.config import PreviewConfig
from lakemount.render.parquet_pages import BadPage, pages
from lakemount.serving.http import Response

TEXT_CAP: Final = 256 * 1024
PARQUET_CAP: Final = 512 * 1024 * 1024
IMAGE_CAP: Final = 20 * 1024 * 1024
MAX_ROWS: Final = 500
MAX_CELL: Final = 1000
FOOTER_CAP: Final = 8 * 1024 * 1024  # a Parquet footer (schema and row group metadata) larger than this is not read
MAX_COLUMNS: Final = 1000  # columns a Parquet preview shows (the answer says how many there are)
DECODED_CAP: Final = 64 * 1024 * 1024  # decoded bytes after which a Parquet preview stops reading rows
PAGE_CAP: Final = PreviewConfig().max_page_bytes  # the largest Parquet page a preview decodes, unless configured
MAX_PAGES: Final = 100_000  # page headers a preview reads before it gives up checking (and shows no more rows)
READ_BUFFER: Final = 1 << 20  # pyarrow reads a column chunk through a buffer of this size, not whole
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


def parquet_preview(f: Any, rows: int, page_cap: int = PAGE_CAP) -> dict[str, Any]:
    """Schema and the first ``rows`` rows of a Parquet file (``f``: a seekable binary file), at bounded cost.

    A file of a few KiB can declare a footer of hundreds of MiB, thousands of
    columns, or values that expand to GiB (a dictionary page holding one large
    value that every row repeats: 1 KiB on disk took 1.6 GB to preview; one
    512 MiB page of a repeated byte, 16 KiB on disk, took 2.7 GB).  So a
    footer over ``FOOTER_CAP`` is refused before pyarrow reads it, at most
    ``MAX_COLUMNS`` columns are shown and read, the page headers of what will
    be read are checked first and pyarrow reads only the row groups whose pages
    each decode to at most ``page_cap`` bytes (the answer's ``message`` says
    why it stopped), rows are decoded one at a time and decoding stops
    (``truncated``) once ``DECODED_CAP`` bytes are decoded.
    """
    import pyarrow.parquet as pq

    f.seek(-8, 2)
    tail = f.read(8)
    if len(tail) == 8 and tail[4:] == b"PAR1" and int.from_bytes(tail[:4], "little") > FOOTER_CAP:
        raise ValueError(f"footer larger than {FOOTER_CAP} bytes")
    f.seek(0)
    # By default pyarrow reads every column chunk of a row group whole (pre_buffer) before its first
    # page: a 300 MB chunk held 300 MB to show one row.  Buffered, it reads READ_BUFFER at a time.
    pf = pq.ParquetFile(f, buffer_size=READ_BUFFER, pre_buffer=False)
    fields = list(pf.schema_arrow)
    schema = [{"name": fld.name, "type": str(fld.type)} for fld in fields[:MAX_COLUMNS]]
    columns = [c["name"] for c in schema]
    groups, why = _row_groups_within(f, pf, _leaves(pf, len(columns)), rows, page_cap)
    out: list[list[Any]] = []
    decoded = 0
    stopped = bool(why)
    # One row per batch: the decoded size is checked before the next row is decoded.
    batches = pf.iter_batches(batch_size=1, row_groups=groups, columns=columns if len(fields) > MAX_COLUMNS else None) if groups else ()
    for batch in batches:
        decoded += batch.get_total_buffer_size()
        if decoded > DECODED_CAP and out:
            stopped = True
            break
        for row in batch.to_pylist():
            out.append([_cell(row.get(c)) for c in columns])
        if len(out) >= rows:
            break
    num_rows = pf.metadata.num_rows
    answer = {"schema": schema, "rows": out, "num_rows": num_rows, "truncated": stopped or num_rows > len(out),
              "columns": len(fields)}
    if why:
        answer["message"] = why
    return answer


def _leaves(pf: Any, shown: int) -> range:
    """The Parquet leaf columns under the first ``shown`` top-level fields (all of them if they cannot be counted)."""
    import pyarrow as pa

    def count(t: Any) -> int:
        if pa.types.is_struct(t):
            return sum(count(t.field(i).type) for i in range(t.num_fields))
        if pa.types.is_map(t):
            return count(t.key_type) + count(t.item_type)
        if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            return count(t.value_type)
        return 1

    fields = list(pf.schema_arrow)
    total = pf.metadata.num_columns
    if sum(count(fld.type) for fld in fields) != total:
        return range(total)
    return range(sum(count(fld.type) for fld in fields[:shown]))


def _row_groups_within(f: Any, pf: Any, leaves: range, rows: int, page_cap: int) -> tuple[list[int], str]:
    """The first row groups, enough for ``rows`` rows, whose pages (of the ``leaves`` columns) each decode to at
    most ``page_cap`` bytes, and why the list stops early ('' if it does not).

    Of a column without repeated values only the pages holding the wanted rows, and one more, are
    checked (its values are its rows; pyarrow loads a page when it needs its first row); of any other
    column every page of the row group.
    """
    meta = pf.metadata
    chosen: list[int] = []
    covered = walked = 0
    for g in range(meta.num_row_groups):
        if covered >= rows:
            break
        group = meta.row_group(g)
        need = rows - covered
        for i in leaves:
            col = group.column(i)
            start = col.data_page_offset
            if col.has_dictionary_page and 0 < (col.dictionary_page_offset or 0) < start:
                start = col.dictionary_page_offset
            flat = pf.schema.column(i).max_repetition_level == 0
            values = 0
            try:
                for page in pages(f, start, col.total_compressed_size):
                    walked += 1
                    if walked > MAX_PAGES:
                        return chosen, f"more than {MAX_PAGES} pages to check before the first rows: rows not shown"
                    if max(page.uncompressed, page.compressed) > page_cap:
                        return chosen, (f"column {col.path_in_schema} has a page of {max(page.uncompressed, page.compressed)} bytes, "
                                        f"more than api.preview.max_page_bytes ({page_cap}): rows from there on not shown")
                    if flat and values >= need:
                        break
                    values += page.values
            except BadPage as exc:
                return chosen, f"column {col.path_in_schema}: {exc}: rows from there on not shown"
        chosen.append(g)
        covered += group.num_rows
    return chosen, ""


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
                page_cap = ctx.service.app.config.api.preview.max_page_bytes
                return json_response(200, {**base, "kind": "parquet", **parquet_preview(f, rows, page_cap)})
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


