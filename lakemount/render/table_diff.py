"""The table diff of two versions of a CSV or Parquet object, computed with pyarrow.

:func:`load_table` reads one version (Parquet typed as written; CSV with every column a string, so a
text file's columns never change type by inference); :func:`table_diff` compares two tables: the
schema (columns added, dropped, retyped) and the rows.  With key columns, rows are matched by key (a
hash join in Arrow's engine): a key only on the right is added, only on the left removed, on both with
a different value in a column both sides have is changed (which columns is said); a column added or
dropped changes no row, the schema says it.  Without a key, rows are compared whole (over the columns
both sides have) as multisets: a row that is on the right more often than on the left is added, and so
on.  Every step is a columnar kernel; Python touches only the rows of the page asked for, so two
1,000,000-row files that differ in 100 rows compare in about a second.

Everything a user can get wrong is a :class:`TableDiffError` with a one-line message (the API's 400):
an unknown key column, a key with nulls or repeated values, a file that is not a readable table, one
too large to compare.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Any, BinaryIO, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

MAX_ROWS: Final = 20_000_000  # rows of one side compared at most
MAX_DECODED: Final = 2 << 30  # bytes one side may decode to (the Parquet footer's figure; a CSV's file size)
MAX_COLUMNS: Final = 1000
MAX_CELL: Final = 1000
NULL: Final = "\\N"  # a null in the row fingerprint; the escaping below keeps any value from spelling it
SEP: Final = "\x1f"


class TableDiffError(ValueError):
    """Input the table diff cannot compare, with a one-line message for the user."""


@dataclass(slots=True)
class Compared:
    """The outcome of :func:`table_diff`: the schema changes, the counts, and every changed row as
    (type, left row index or -1, right row index or -1, count) in key order (whole-row mode: right rows first)."""

    left: pa.Table
    right: pa.Table
    key: list[str]
    added_columns: list[dict[str, str]]
    dropped_columns: list[dict[str, str]]
    retyped_columns: list[dict[str, str]]
    types: list[str]
    left_rows: list[int]
    right_rows: list[int]
    counts: list[int]
    changed_columns: list[list[str]]
    totals: dict[str, int]


def _csv_names(head: bytes) -> list[str]:
    text = head.decode("utf-8", "replace")
    try:
        row = next(csv.reader(io.StringIO(text)), [])
    except csv.Error as e:
        raise TableDiffError(f"not a readable CSV file: {e}") from None
    return row


def load_table(f: BinaryIO, fmt: str, size: int) -> pa.Table:
    """One version of a ``fmt`` ("parquet" or "csv") object of ``size`` bytes as an Arrow table; raises
    ``TableDiffError`` for a file that is not one, or too large (``MAX_ROWS``, ``MAX_DECODED``, ``MAX_COLUMNS``)."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    if fmt == "parquet":
        try:
            pf = pq.ParquetFile(f)
            meta = pf.metadata
        except Exception as e:  # noqa: BLE001 - pyarrow's many errors on a bad file
            raise TableDiffError(f"not a readable Parquet file: {str(e)[:200]}") from None
        decoded = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
        _check_size(meta.num_rows, decoded, len(pf.schema_arrow))
        try:
            return pf.read()
        except Exception as e:  # noqa: BLE001
            raise TableDiffError(f"not a readable Parquet file: {str(e)[:200]}") from None
    if size > MAX_DECODED:
        _check_size(0, size, 0)
    if size == 0:
        return pa.table({})
    head = f.read(64 * 1024)
    f.seek(0)
    names = _csv_names(head)
    if len(set(names)) != len(names):
        raise TableDiffError("the CSV header names a column twice; a table diff needs distinct column names")
    _check_size(0, 0, len(names))
    opts = pacsv.ConvertOptions(column_types={n: pa.string() for n in names}, strings_can_be_null=False,
                                quoted_strings_can_be_null=False, null_values=[])
    try:
        t = pacsv.read_csv(f, convert_options=opts)
    except (pa.ArrowInvalid, ValueError) as e:
        raise TableDiffError(f"not a readable CSV file: {str(e).splitlines()[0][:200]}") from None
    _check_size(t.num_rows, 0, t.num_columns)
    return t


def _check_size(rows: int, decoded: int, columns: int) -> None:
    if rows > MAX_ROWS:
        raise TableDiffError(f"too large for a table diff: {rows} rows (at most {MAX_ROWS})")
    if decoded > MAX_DECODED:
        raise TableDiffError(f"too large for a table diff: {decoded} bytes decoded (at most {MAX_DECODED})")
    if columns > MAX_COLUMNS:
        raise TableDiffError(f"too large for a table diff: {columns} columns (at most {MAX_COLUMNS})")


def _columns(t: pa.Table) -> dict[str, pa.DataType]:
    return {f.name: f.type for f in t.schema}


def _differs(a: pa.ChunkedArray, b: pa.ChunkedArray) -> Any:
    """A boolean mask: where ``a`` and ``b`` (same length) hold different values, null and NaN equal to themselves."""
    if a.type != b.type:
        try:
            a = a.cast(b.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            a, b = _as_text(a), _as_text(b)
    try:
        neq = pc.fill_null(pc.not_equal(a, b), False)
    except pa.ArrowNotImplementedError:  # nested values: compared one by one (only the rows both sides have)
        return pa.array([x != y for x, y in zip(a.to_pylist(), b.to_pylist(), strict=True)], pa.bool_())
    out = pc.or_(neq, pc.xor(pc.is_null(a), pc.is_null(b)))
    if pa.types.is_floating(a.type):
        out = pc.and_(out, pc.invert(pc.fill_null(pc.and_(pc.is_nan(a), pc.is_nan(b)), False)))
    return out


def _as_text(a: pa.ChunkedArray) -> pa.ChunkedArray:
    """``a`` as strings: cast where Arrow can, else each value's repr (nested types)."""
    try:
        if pa.types.is_binary(a.type) or pa.types.is_large_binary(a.type) or pa.types.is_fixed_size_binary(a.type):
            return a.cast(pa.binary())  # kept as bytes: compared bytewise
        return a.cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pa.chunked_array([pa.array([None if v is None else repr(v) for v in a.to_pylist()], pa.string())])


def _fingerprints(t: pa.Table, names: list[str], rows: int) -> pa.ChunkedArray:
    """One string per row (``rows`` of them) that differs between rows exactly when one of ``names``' values does."""
    if not names:  # a table of no columns: every row is the same
        return pa.chunked_array([pa.array([b""] * rows, pa.binary())])
    parts = []
    for n in names:
        s = _as_text(t[n])
        s = pc.replace_substring(s, "\\", "\\\\")
        s = pc.replace_substring(s, SEP, "\\s")
        parts.append(s.cast(pa.binary()))
    return pc.binary_join_element_wise(*parts, pa.scalar(SEP.encode(), pa.binary()),
                                       null_handling="replace", null_replacement=NULL.encode())


def _check_key(t: pa.Table, key: list[str], side: str) -> None:
    cols = _columns(t)
    for k in key:
        if k not in cols:
            known = ", ".join(list(cols)[:20]) + ("…" if len(cols) > 20 else "")
            raise TableDiffError(f"unknown key column {k!r} on the {side}: its columns are {known or '(none)'}")
        if pa.types.is_nested(cols[k]):
            raise TableDiffError(f"key column {k!r} is of type {cols[k]}: a key must be a plain value")
        if t[k].null_count:
            raise TableDiffError(f"key column {k!r} has null values on the {side}: pick a key without nulls")


def _increasing(col: pa.ChunkedArray) -> bool:
    """Whether each value of ``col`` is greater than the one before (so none repeats); False where values do not order."""
    n = len(col)
    if n < 2:
        return True
    try:
        return bool(pc.all(pc.less(col.slice(0, n - 1), col.slice(1))).as_py())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False


def _check_unique(joined: pa.Table, key: list[str]) -> None:
    """``TableDiffError`` unless every key is on each side once: a key repeated on either side appears in the
    full outer join more than once (with the other side's rows, or alone), so one sorted pass over it tells."""
    if joined.num_rows < 2:
        return
    order = pc.sort_indices(joined, sort_keys=[(k, "ascending") for k in key])
    keys = joined.select(key).take(order)
    same: Any = None
    for k in key:
        eq = pc.equal(keys[k].slice(0, len(keys) - 1), keys[k].slice(1))
        same = eq if same is None else pc.and_(same, eq)
    repeats = pc.indices_nonzero(same)
    if not len(repeats):
        return
    first = order[repeats[0].as_py()].as_py()
    dup = joined.slice(first, 1)
    match: Any = None
    for k in key:
        eq = pc.equal(joined[k], dup[k][0])
        match = eq if match is None else pc.and_(match, eq)
    rows = joined.filter(match)
    side = "left" if len(pc.unique(pc.drop_null(rows["__left_row"]))) > 1 else "right"
    value = ", ".join(str(dup[k][0].as_py())[:100] for k in key)
    raise TableDiffError(f"key {', '.join(key)} is not unique on the {side}: {value} appears more than once "
                         "(pick a unique key, or none to compare whole rows)")


def table_diff(left: pa.Table, right: pa.Table, key: list[str]) -> Compared:
    """Compare ``left`` with ``right`` by ``key`` columns (empty: whole rows); raises ``TableDiffError``."""
    lc, rc = _columns(left), _columns(right)
    added = [{"name": n, "type": str(t)} for n, t in rc.items() if n not in lc]
    dropped = [{"name": n, "type": str(t)} for n, t in lc.items() if n not in rc]
    retyped = [{"name": n, "left_type": str(lc[n]), "right_type": str(rc[n])} for n in rc if n in lc and lc[n] != rc[n]]
    common = [n for n in rc if n in lc]
    if key:
        return _by_key(left, right, key, common, added, dropped, retyped)
    return _by_rows(left, right, common, added, dropped, retyped)


def _by_key(left: pa.Table, right: pa.Table, key: list[str], common: list[str], added: list[dict[str, str]],
            dropped: list[dict[str, str]], retyped: list[dict[str, str]]) -> Compared:
    _check_key(left, key, "left")
    _check_key(right, key, "right")
    lk, rk = left.select(key), right.select(key)
    for k in key:
        if lk[k].type != rk[k].type:  # a retyped key is matched by its text
            lk = lk.set_column(lk.schema.get_field_index(k), k, _as_text(lk[k]))
            rk = rk.set_column(rk.schema.get_field_index(k), k, _as_text(rk[k]))
    # The usual new version of a table keeps its rows in place (values updated, the same keys in the same
    # order): then row i matches row i, and no join is needed; a strictly increasing key is unique.
    aligned = left.num_rows == right.num_rows and all(lk[k].equals(rk[k]) for k in key)
    if aligned:
        rows = pa.array(np.arange(left.num_rows, dtype=np.int64))
        joined = lk.append_column("__left_row", rows).append_column("__right_row", rows)
    else:
        lk = lk.append_column("__left_row", pa.array(np.arange(left.num_rows, dtype=np.int64)))
        rk = rk.append_column("__right_row", pa.array(np.arange(right.num_rows, dtype=np.int64)))
        try:
            joined = lk.join(rk, keys=key, join_type="full outer")
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise TableDiffError(f"key {', '.join(key)} cannot be matched: {str(e)[:200]}") from None
    if not (len(key) == 1 and _increasing(joined[key[0]]) and (aligned or (_increasing(lk[key[0]]) and _increasing(rk[key[0]])))):
        _check_unique(joined, key)
    li, ri = joined["__left_row"], joined["__right_row"]
    only_right = pc.is_null(li)
    only_left = pc.is_null(ri)
    both = pc.and_(pc.invert(only_right), pc.invert(only_left))
    pairs = joined if aligned else joined.filter(both)
    pl, pr = pairs["__left_row"], pairs["__right_row"]
    value_cols = [n for n in common if n not in key]
    changed: Any = None
    masks = {}
    if pairs.num_rows and value_cols:
        lt, rt = (left, right) if aligned else (left.select(value_cols).take(pl), right.select(value_cols).take(pr))
        for n in value_cols:
            masks[n] = _differs(lt[n], rt[n])
            changed = masks[n] if changed is None else pc.or_(changed, masks[n])
    events: list[tuple[int, str, int, int, list[str]]] = []
    n_changed = 0
    if changed is not None:
        at = pc.indices_nonzero(changed)
        n_changed = len(at)
        places = pc.indices_nonzero(both).take(at).to_pylist()
        cols = {n: m.filter(changed).to_pylist() for n, m in masks.items()}
        for j, (pos, a, b) in enumerate(zip(places, pl.take(at).to_pylist(), pr.take(at).to_pylist(), strict=True)):
            events.append((pos, "changed", a, b, [n for n in value_cols if cols[n][j]]))
    for pos, a in zip(pc.indices_nonzero(only_left).to_pylist(), li.filter(only_left).to_pylist(), strict=True):
        events.append((pos, "removed", a, -1, []))
    for pos, b in zip(pc.indices_nonzero(only_right).to_pylist(), ri.filter(only_right).to_pylist(), strict=True):
        events.append((pos, "added", -1, b, []))
    # The join's order is its own: the changed rows alone (not the whole table) are put in key order.
    if events:
        keys = joined.select(key).take(pa.array([e[0] for e in events], pa.int64()))
        order = pc.sort_indices(keys, sort_keys=[(k, "ascending") for k in key]).to_pylist()
        events = [events[i] for i in order]
    totals = {"added": pc.sum(only_right).as_py() or 0, "removed": pc.sum(only_left).as_py() or 0,
              "changed": n_changed}
    totals["unchanged"] = pairs.num_rows - totals["changed"]
    return Compared(left, right, key, added, dropped, retyped, [e[1] for e in events], [e[2] for e in events],
                    [e[3] for e in events], [1] * len(events), [e[4] for e in events], totals)


def _by_rows(left: pa.Table, right: pa.Table, common: list[str], added: list[dict[str, str]],
             dropped: list[dict[str, str]], retyped: list[dict[str, str]]) -> Compared:
    # Rows equal at the same place pair off first (a columnar comparison; taking equal rows out of both
    # multisets leaves their difference as it was); what is left, usually few rows, is compared as
    # fingerprints in one sort (stable: of equal rows, the left's come first), and a run of equal rows with
    # more on one side than the other is that many rows added or removed.
    nl, nr = left.num_rows, right.num_rows
    n = min(nl, nr)
    paired = 0
    lrest = rrest = np.arange(0, dtype=np.int64)
    if n:
        differs: Any = pa.array(np.zeros(n, dtype=bool))
        for c in common:
            differs = pc.or_(differs, _differs(left[c].slice(0, n), right[c].slice(0, n)))
        lrest = rrest = pc.indices_nonzero(differs).to_numpy().astype(np.int64)
        paired = n - len(lrest)
    lrest = np.concatenate([lrest, np.arange(n, nl, dtype=np.int64)])
    rrest = np.concatenate([rrest, np.arange(n, nr, dtype=np.int64)])
    lf = _fingerprints(left.select(common).take(pa.array(lrest)), common, len(lrest))
    rf = _fingerprints(right.select(common).take(pa.array(rrest)), common, len(rrest))
    ml, mr = len(lrest), len(rrest)
    types: list[str] = []
    lrows: list[int] = []
    rrows: list[int] = []
    counts: list[int] = []
    unchanged = paired
    if ml + mr:
        both = pa.chunked_array(lf.chunks + rf.chunks, lf.type)
        order = pc.sort_indices(both).to_numpy()
        fp = both.take(order)
        edge = np.ones(ml + mr, dtype=bool)
        if ml + mr > 1:
            edge[1:] = pc.not_equal(fp.slice(1), fp.slice(0, ml + mr - 1)).to_numpy(zero_copy_only=False)
        starts = np.flatnonzero(edge)
        ends = np.append(starts[1:], ml + mr)
        on_right = order >= ml
        rights = np.add.reduceat(on_right.astype(np.int64), starts)
        lefts = (ends - starts) - rights
        unchanged += int(np.minimum(lefts, rights).sum())
        delta = rights - lefts
        gained = sorted((int(rrest[order[ends[i] - 1] - ml]), int(delta[i])) for i in np.flatnonzero(delta > 0))
        gone = sorted((int(lrest[order[starts[i]]]), int(-delta[i])) for i in np.flatnonzero(delta < 0))
        for row, k in gained:
            types.append("added")
            lrows.append(-1)
            rrows.append(row)
            counts.append(k)
        for row, k in gone:
            types.append("removed")
            lrows.append(row)
            rrows.append(-1)
            counts.append(k)
    totals = {"added": sum(c for t, c in zip(types, counts, strict=True) if t == "added"),
              "removed": sum(c for t, c in zip(types, counts, strict=True) if t == "removed"),
              "changed": 0, "unchanged": unchanged}
    return Compared(left, right, [], added, dropped, retyped, types, lrows, rrows, counts, [[] for _ in types], totals)


def _cell(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float)):
        return v
    s = v.hex() if isinstance(v, bytes) else str(v)
    return s if len(s) <= MAX_CELL else s[:MAX_CELL] + "…"


def _row(t: pa.Table, i: int, names: list[str]) -> list[Any] | None:
    if i < 0:
        return None
    one = t.slice(i, 1).to_pylist()[0]
    return [_cell(one.get(n)) if n in one else None for n in names]


def page_of(c: Compared, start: int, amount: int) -> tuple[list[str], list[dict[str, Any]]]:
    """The column names the rows are given in (the right's, then those dropped) and changes
    ``start`` .. ``start + amount`` of ``c``, each with its rows' values (cells cut at ``MAX_CELL``)."""
    names = [f.name for f in c.right.schema] + [f.name for f in c.left.schema if f.name not in c.right.schema.names]
    out = []
    for i in range(start, min(start + amount, len(c.types))):
        li, ri = c.left_rows[i], c.right_rows[i]
        one: dict[str, Any] = {"type": c.types[i], "left": _row(c.left, li, names), "right": _row(c.right, ri, names)}
        if c.key:
            src = c.left if ri < 0 else c.right
            at = li if ri < 0 else ri
            one["key"] = {k: _cell(src[k][at].as_py()) for k in c.key}
            one["changed_columns"] = c.changed_columns[i]
        else:
            one["count"] = c.counts[i]
        out.append(one)
    return names, out
