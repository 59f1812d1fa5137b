"""What changed inside one object between two refs: the web UI's content diff (lakemount's own operations).

``.../refs/{leftRef}/diff/{rightRef}/object`` says what kind of diff an object takes (``text``, ``table``
for CSV and Parquet, ``image``: both versions' URLs, shown side by side; ``binary``), ``.../object/text``
is a unified or side-by-side line diff (difflib), ``.../object/table`` the table diff of
``table_diff.py``: schema changes and rows added, removed and changed, by key columns or whole rows,
counted and paged.  The two versions are chosen as ``diffRefs`` chooses them, so a click on a row of a
compare, commit or pull request page shows that row's change: ``three_dot`` (the default) compares
``rightRef`` with its merge base with ``leftRef``, ``two_dot`` the two refs' commits, ``uncommitted``
the branch ``rightRef``'s staged object with its head commit's.  Bad input is a one-line 400: an object
that is binary or too large for a text diff, not CSV or Parquet for a table diff, an unknown or
non-unique key column.
"""

from __future__ import annotations

import codecs
import difflib
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote

from lakemount.api.context import Ctx, json_response, repo_of
from lakemount.api.errors import bad_request, not_found
from lakemount.api.operations.objects import PATH, check_path
from lakemount.api.operations.preview import IMAGE_CAP, kind_of, looks_binary
from lakemount.api.pagination import MAX_AMOUNT, page
from lakemount.api.routing import AMOUNT, Param, operation
from lakemount.auth.policies import Action
from lakemount.catalog.model import object_view
from lakemount.serving.http import Response

if TYPE_CHECKING:  # table_diff imports pyarrow: loaded on the first table diff, not when the API starts
    from lakemount.render.table_diff import Compared

TAG = "diff"
TEXT_DIFF_CAP: Final = 1 << 20  # bytes of one side a text diff reads
TEXT_DIFF_LINES: Final = 50_000  # lines of one side a text diff compares
TABLE_CAP: Final = 1 << 30  # bytes of one side's file a table diff reads
MAX_CONTEXT: Final = 100
CACHED_DIFFS: Final = 4  # table diffs kept for paging (each holds both tables)
TYPE = Param("type", description="three_dot (default): rightRef against its merge base with leftRef; two_dot: the "
             "two refs' commits; uncommitted: the branch rightRef's staged object against its head commit")
BASE = "/repositories/{repository}/refs/{leftRef}/diff/{rightRef}/object"


class _Recent:
    """The last few table diffs, by the two versions' identities and the key: paging through a diff of two
    large files computes it once.  Versions are immutable (a content address and its checksum), so an entry
    is never stale; it is kept per process, bounded, thread-safe."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._map: OrderedDict[tuple[Any, ...], Compared] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...]) -> Compared | None:
        with self._lock:
            c = self._map.get(key)
            if c is not None:
                self._map.move_to_end(key)
            return c

    def put(self, key: tuple[Any, ...], c: Compared) -> None:
        with self._lock:
            self._map[key] = c
            while len(self._map) > self.size:
                self._map.popitem(last=False)


RECENT: Final = _Recent(CACHED_DIFFS)


class _Side:
    """One version: the ref expression it is read at (a commit id, or a branch for staged changes) and its entry."""

    def __init__(self, ref: str, entry: Any) -> None:
        self.ref = ref
        self.entry = entry

    def json(self, ctx: Ctx, repo: str, path: str) -> dict[str, Any]:
        out: dict[str, Any] = {"ref": self.ref, "exists": self.entry is not None}
        if self.entry is not None:
            view = object_view(self.entry)
            out.update(size_bytes=view.size, checksum=view.etag, content_type=view.content_type or "application/octet-stream",
                       url=f"/api/v1/repositories/{quote(repo, safe='')}/refs/{quote(self.ref, safe='')}/objects?path="
                           f"{quote(path, safe='')}")
        return out


def compared_refs(ctx: Ctx, repo: str) -> tuple[str, str]:
    """The two refs the request's ``leftRef``, ``rightRef`` and ``type`` compare, as ``diffRefs`` chooses them: commit
    ids, or for ``uncommitted`` the branch's head commit and the branch itself; 400 for a bad type, 404 for a ref
    that does not exist."""
    cat = ctx.catalog
    left, right = ctx.params["leftRef"], ctx.params["rightRef"]
    kind = ctx.q("type") or "three_dot"
    lref: str
    rref: str
    if kind == "two_dot":
        lref, rref = cat.commit_of(repo, left).id, cat.commit_of(repo, right).id
    elif kind == "three_dot":
        rref = cat.commit_of(repo, right).id
        lref = cat.merge_base(repo, left, right) or cat.commit_of(repo, left).id
    elif kind == "uncommitted":
        branch = cat.get_branch(repo, right)
        lref, rref = branch.commit_id, right
    else:
        raise bad_request("type must be two_dot, three_dot or uncommitted")
    return lref, rref


def _sides(ctx: Ctx, repo: str, path: str) -> tuple[_Side, _Side]:
    """The two versions of ``path`` the request's refs and ``type`` name; 404 when neither has it."""
    cat = ctx.catalog
    lref, rref = compared_refs(ctx, repo)
    a, b = cat.get_optional(repo, lref, path), cat.get_optional(repo, rref, path)
    if a is None and b is None:
        raise not_found(f"object not found on either side: {path}")
    return _Side(lref, a), _Side(rref, b)


def _read(ctx: Ctx, repo: str, side: _Side, limit: int) -> bytes:
    """Up to ``limit`` + 1 bytes of a version (b"" when it does not exist or has no data)."""
    if side.entry is None or not object_view(side.entry).has_data or side.entry.size == 0:
        return b""
    cat = ctx.catalog
    f = cat.open(cat.repository(repo), side.entry)
    try:
        return f.read(limit + 1)  # type: ignore[no-any-return]
    finally:
        f.close()


def _kind(path: str, left: _Side, right: _Side, head: bytes) -> str:
    k = kind_of(path)
    if k in ("parquet", "csv"):
        return "table"
    if k == "image":
        sizes = [s.entry.size for s in (left, right) if s.entry is not None]
        return "image" if max(sizes) <= IMAGE_CAP else "too_large"
    return "binary" if looks_binary(head) else "text"


@operation("GET", BASE, "diffObject", tag=TAG, response="ObjectDiff", params=(PATH, TYPE),
           summary="the two versions of an object and the kind of diff it takes: text, table (CSV, Parquet), image, binary")
def diff_object(ctx: Ctx) -> Response:
    """diffObject: both versions' stats and URLs, and the kind of diff (see the module docstring); 404 if neither
    side has the object, 400 for a bad path or type."""
    repo = repo_of(ctx, Action.READ_REPO)
    path = check_path(ctx.q_required("path"))
    left, right = _sides(ctx, repo, path)
    head = _read(ctx, repo, right, 8192)[:8192] or _read(ctx, repo, left, 8192)[:8192]
    kind = _kind(path, left, right, head)
    out = {"path": path, "kind": kind, "left": left.json(ctx, repo, path), "right": right.json(ctx, repo, path)}
    if kind == "table":
        out["format"] = kind_of(path)
    return json_response(200, out)


def _text(ctx: Ctx, repo: str, side: _Side) -> list[str]:
    data = _read(ctx, repo, side, TEXT_DIFF_CAP)
    if len(data) > TEXT_DIFF_CAP:
        raise bad_request(f"too large for a text diff: the {side.ref[:12]} version is over {TEXT_DIFF_CAP} bytes")
    if looks_binary(data):
        raise bad_request("not a text object: its bytes are binary (not UTF-8 text); no text diff")
    lines = codecs.decode(data, "utf-8", "replace").splitlines()
    if len(lines) > TEXT_DIFF_LINES:
        raise bad_request(f"too large for a text diff: over {TEXT_DIFF_LINES} lines")
    return lines


def _hunks(a: list[str], b: list[str], context: int, view: str) -> list[dict[str, Any]]:
    """The changed regions of ``a`` -> ``b`` with ``context`` lines around, as ``view`` shows them: unified
    (lines with op " ", "-", "+") or side by side (rows pairing a left and a right line, either may be null)."""
    out = []
    for group in difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(context):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        hunk: dict[str, Any] = {"old_start": i1 + 1, "old_lines": i2 - i1, "new_start": j1 + 1, "new_lines": j2 - j1}
        if view == "unified":
            lines: list[dict[str, Any]] = []
            for tag, x1, x2, y1, y2 in group:
                if tag == "equal":
                    lines += [{"op": " ", "old": x1 + k + 1, "new": y1 + k + 1, "text": a[x1 + k]} for k in range(x2 - x1)]
                    continue
                lines += [{"op": "-", "old": x + 1, "new": None, "text": a[x]} for x in range(x1, x2)]
                lines += [{"op": "+", "old": None, "new": y + 1, "text": b[y]} for y in range(y1, y2)]
            hunk["lines"] = lines
        else:
            rows: list[dict[str, Any]] = []
            for tag, x1, x2, y1, y2 in group:
                for k in range(max(x2 - x1, y2 - y1)):
                    x, y = x1 + k, y1 + k
                    rows.append({"op": {"equal": "equal", "delete": "delete", "insert": "insert"}.get(tag, "replace"),
                                 "left": {"n": x + 1, "text": a[x]} if x < x2 else None,
                                 "right": {"n": y + 1, "text": b[y]} if y < y2 else None})
            hunk["rows"] = rows
        out.append(hunk)
    return out


@operation("GET", BASE + "/text", "diffObjectText", tag=TAG, response="TextDiff",
           params=(PATH, TYPE, Param("view", description="unified (default) or side_by_side"),
                   Param("context", "integer", minimum=0, maximum=MAX_CONTEXT, description="unchanged lines around a change (default 3)")),
           summary="a line diff of a text object between two refs, unified or side by side")
def diff_object_text(ctx: Ctx) -> Response:
    """diffObjectText: the hunks of the line diff; 400 for a binary object, one over ``TEXT_DIFF_CAP`` bytes or
    ``TEXT_DIFF_LINES`` lines, or a bad view; 404 if neither side has the object."""
    repo = repo_of(ctx, Action.READ_REPO)
    path = check_path(ctx.q_required("path"))
    view = ctx.q("view") or "unified"
    if view not in ("unified", "side_by_side"):
        raise bad_request("view must be unified or side_by_side")
    context = ctx.q_int("context", 3)
    assert context is not None
    left, right = _sides(ctx, repo, path)
    a, b = _text(ctx, repo, left), _text(ctx, repo, right)
    hunks = _hunks(a, b, context, view)
    counts = {"added": 0, "removed": 0}
    for group in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        tag, x1, x2, y1, y2 = group
        if tag != "equal":
            counts["removed"] += x2 - x1
            counts["added"] += y2 - y1
    return json_response(200, {"path": path, "view": view, "left": left.json(ctx, repo, path),
                               "right": right.json(ctx, repo, path), "hunks": hunks, "counts": counts})


def _table(ctx: Ctx, repo: str, side: _Side, fmt: str) -> Any:
    """The version's table; None when the object is not on that side."""
    from lakemount.render.table_diff import load_table

    if side.entry is None:
        return None
    if side.entry.size > TABLE_CAP:
        raise bad_request(f"too large for a table diff: the {side.ref[:12]} version is {side.entry.size} bytes "
                          f"(at most {TABLE_CAP})")
    cat = ctx.catalog
    f = cat.open(cat.repository(repo), side.entry)
    try:
        return load_table(f, fmt, side.entry.size if object_view(side.entry).has_data else 0)
    finally:
        f.close()


@operation("GET", BASE + "/table", "diffObjectTable", tag=TAG, response="TableDiff",
           params=(PATH, TYPE, Param("key", array=True, description="key column(s) rows are matched by; none: whole rows"),
                   Param("after", description="the previous page's next_offset"), AMOUNT),
           summary="a table diff of a CSV or Parquet object between two refs: schema changes, rows added, removed, changed")
def diff_object_table(ctx: Ctx) -> Response:
    """diffObjectTable: schema changes, counts and a page of changed rows (see ``table_diff.py``); 400 for an
    object that is not CSV or Parquet, an unknown, null or repeated key, a file that is no table or too large;
    404 if neither side has the object."""
    from lakemount.render.table_diff import TableDiffError, page_of, table_diff

    repo = repo_of(ctx, Action.READ_REPO)
    path = check_path(ctx.q_required("path"))
    fmt = kind_of(path)
    if fmt not in ("csv", "parquet"):
        raise bad_request("not a tabular object: a table diff compares .csv and .parquet objects")
    after = ctx.q("after") or "0"
    if not after.isdigit():
        raise bad_request("after must be the next_offset of a previous page")
    start = int(after)
    n = ctx.page_size()
    key = ctx.q_list("key")
    left, right = _sides(ctx, repo, path)
    ident = tuple(None if s.entry is None else (s.entry.address, s.entry.size, object_view(s.entry).etag) for s in (left, right))
    cache_key = (ctx.catalog.repository(repo).storage_namespace, ident, fmt, tuple(key))
    compared = RECENT.get(cache_key)
    if compared is None:
        try:
            a, b = _table(ctx, repo, left, fmt), _table(ctx, repo, right, fmt)
            # An object added or removed is compared with an empty table of its own columns: every row added or removed.
            compared = table_diff(b.schema.empty_table() if a is None else a, a.schema.empty_table() if b is None else b, key)
        except TableDiffError as e:
            raise bad_request(str(e)) from None
        RECENT.put(cache_key, compared)
    columns, results = page_of(compared, start, n)
    more = start + n < len(compared.types)
    body = page(results, more, str(start + n))
    body["pagination"]["max_per_page"] = MAX_AMOUNT
    return json_response(200, {
        "path": path, "format": fmt, "key": key, "mode": "key" if key else "row_hash",
        "left": {**left.json(ctx, repo, path), "num_rows": compared.left.num_rows},
        "right": {**right.json(ctx, repo, path), "num_rows": compared.right.num_rows},
        "schema": {"added": compared.added_columns, "dropped": compared.dropped_columns, "retyped": compared.retyped_columns},
        "counts": compared.totals, "columns": columns, **body,
    })
