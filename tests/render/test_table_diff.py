"""The table diff's core (``lakemount/api/table_diff.py``) against a plain-Python reference: by key, rows in place
and rows shuffled (the in-place fast path and the join agree), whole rows as multisets (shifted rows, repeats),
null and NaN equal to themselves, a retyped key, and the CSV reader keeping every column text."""

from __future__ import annotations

import io
import math
import random
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest

from lakemount.render.table_diff import TableDiffError, load_table, page_of, table_diff


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


def reference_by_key(left: list[dict[str, Any]], right: list[dict[str, Any]], key: str) -> dict[str, int]:
    lk, rk = {r[key]: r for r in left}, {r[key]: r for r in right}
    changed = sum(1 for k in lk.keys() & rk.keys() if any(not same(lk[k][c], rk[k][c]) for c in lk[k] if c in rk[k]))
    both = len(lk.keys() & rk.keys())
    return {"added": len(rk.keys() - lk.keys()), "removed": len(lk.keys() - rk.keys()), "changed": changed,
            "unchanged": both - changed}


def rows(n: int, rnd: random.Random) -> list[dict[str, Any]]:
    return [{"id": i, "v": rnd.choice([None, float("nan"), 1.0, 2.0, rnd.random()]), "s": rnd.choice(["a", "b", None])}
            for i in range(n)]


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_by_key_matches_the_reference_in_place_or_shuffled(seed: int, shuffle: bool) -> None:
    rnd = random.Random(seed)
    left = rows(300, rnd)
    right = [dict(r) for r in left]
    for r in rnd.sample(right, 30):
        r["v"] = rnd.random()
    if shuffle:  # rows moved, some gone, some new: the join path
        right = [r for r in right if rnd.random() > 0.1] + [{"id": 1000 + i, "v": 1.0, "s": "n"} for i in range(7)]
        rnd.shuffle(right)
    c = table_diff(pa.Table.from_pylist(left), pa.Table.from_pylist(right), ["id"])
    assert c.totals == reference_by_key(left, right, "id")
    _, page = page_of(c, 0, 10_000)
    keys = [r["key"]["id"] for r in page]
    assert keys == sorted(keys)  # key order whichever path ran
    assert all(r["changed_columns"] == ["v"] for r in page if r["type"] == "changed")


@pytest.mark.parametrize("seed", range(6))
def test_whole_rows_are_compared_as_multisets(seed: int) -> None:
    rnd = random.Random(seed)
    pool = [{"a": rnd.choice([1, 2, 3, None]), "b": rnd.choice(["x", "y", "x\x1fy", "\\N", None])} for _ in range(8)]
    left = [rnd.choice(pool) for _ in range(rnd.randrange(0, 60))]
    right = [rnd.choice(pool) for _ in range(rnd.randrange(0, 60))]
    schema = pa.schema([("a", pa.int64()), ("b", pa.string())])
    c = table_diff(pa.Table.from_pylist(left, schema), pa.Table.from_pylist(right, schema), [])
    lc = Counter(tuple(r.values()) for r in left)
    rc = Counter(tuple(r.values()) for r in right)
    assert c.totals == {"added": sum((rc - lc).values()), "removed": sum((lc - rc).values()), "changed": 0,
                        "unchanged": sum((lc & rc).values())}
    _, page = page_of(c, 0, 10_000)
    got_added = Counter({tuple(r["right"]): r["count"] for r in page if r["type"] == "added"})
    assert got_added == rc - lc


def test_a_retyped_key_is_matched_by_its_text_and_values_after_a_cast() -> None:
    left = pa.table({"id": [1, 2], "v": [1, 2]})
    right = pa.table({"id": ["1", "2"], "v": [1.0, 2.5]})
    c = table_diff(left, right, ["id"])
    assert c.retyped_columns == [{"name": "id", "left_type": "int64", "right_type": "string"},
                                 {"name": "v", "left_type": "int64", "right_type": "double"}]
    assert c.totals == {"added": 0, "removed": 0, "changed": 1, "unchanged": 1}


def test_a_nested_key_is_refused_and_nested_values_compare() -> None:
    left = pa.table({"id": [1, 2], "tags": [["a"], ["b"]]})
    right = pa.table({"id": [1, 2], "tags": [["a"], ["b", "c"]]})
    assert table_diff(left, right, ["id"]).totals["changed"] == 1
    with pytest.raises(TableDiffError, match="must be a plain value"):
        table_diff(left, right, ["tags"])


def test_csv_columns_stay_text_and_a_repeated_header_is_refused() -> None:
    t = load_table(io.BytesIO(b"id,amount\n007,1.50\n,\n"), "csv", 20)
    assert t.schema.types == [pa.string(), pa.string()]
    assert t.to_pylist() == [{"id": "007", "amount": "1.50"}, {"id": "", "amount": ""}]
    with pytest.raises(TableDiffError, match="names a column twice"):
        load_table(io.BytesIO(b"a,a\n1,2\n"), "csv", 8)
    with pytest.raises(TableDiffError, match="not a readable Parquet file"):
        load_table(io.BytesIO(b"PAR1 nope"), "parquet", 9)
