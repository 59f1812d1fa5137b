"""Per-record loops over runs of records held as parallel lists of keys and values.

A commit merges staging files over a base metarange into new ranges: a million
records go through a k-way merge, untagging, an overlay on the base and range
cutting.  Done as a Python step per record, that loop was most of a commit's
time; these functions take whole runs and do the loop in C (``_sstblock``)
when it is built.  Each has its pure-Python definition here, used without the
extension, and the two must agree exactly (``tests/graveler/test_runs.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

try:
    from lakemount.graveler import _sstblock as _c
except ImportError:  # built without a compiler
    _c = None

if _c is not None and not hasattr(_c, "overlay"):  # an extension built from older sources
    _c = None

NATIVE = _c is not None


def merge_newest_py(
    keys: list[list[bytes]], values: list[list[Any]], starts: list[int], ends: list[int]
) -> tuple[list[bytes], list[Any]]:
    """Runs given oldest first (``keys[i][starts[i]:ends[i]]`` strictly increasing): every key
    once in order, with the value of the newest run that holds it."""
    merged: dict[bytes, Any] = {}
    for ks, vs, lo, hi in zip(keys, values, starts, ends):
        merged.update(zip(ks[lo:hi], vs[lo:hi]))
    out = sorted(merged)
    return out, list(map(merged.__getitem__, out))


def live_py(keys: list[bytes], values: list[bytes], put: int, unstaged: int) -> tuple[list[bytes], list[bytes | None]]:
    """Tagged staging values to what they stage: ``put`` values without their tag byte, other
    tags (tombstones) None, ``unstaged`` marks left out with their keys."""
    out_k: list[bytes] = []
    out_v: list[bytes | None] = []
    for k, v in zip(keys, values):
        if v[0] == unstaged:
            continue
        out_k.append(k)
        out_v.append(v[1:] if v[0] == put else None)
    return out_k, out_v


def overlay_py(
    base_keys: list[bytes], base_values: list[bytes], keys: list[bytes], values: list[bytes | None]
) -> tuple[list[bytes], list[bytes], int]:
    """Sorted changes (None: delete) over sorted base records: the records after them, and how
    many changes change something (a new key with a value; a base key deleted or given another value)."""
    out_k: list[bytes] = []
    out_v: list[bytes] = []
    applied = 0
    i = j = 0
    nb, nc = len(base_keys), len(keys)
    while i < nb or j < nc:
        if j == nc or (i < nb and base_keys[i] < keys[j]):
            out_k.append(base_keys[i])
            out_v.append(base_values[i])
            i += 1
            continue
        v = values[j]
        if i < nb and base_keys[i] == keys[j]:
            if v != base_values[i]:
                applied += 1
            i += 1
        elif v is not None:
            applied += 1
        if v is not None:
            out_k.append(keys[j])
            out_v.append(v)
        j += 1
    return out_k, out_v, applied


def cut_ends_py(keys: list[bytes], hash: Callable[[bytes], int], mask: int) -> list[int]:
    """The index just past each key whose ``hash`` has the ``mask`` bits zero."""
    return [i + 1 for i, h in enumerate(map(hash, keys)) if not h & mask]


def range_feed_py(keys: list[bytes], values: list[bytes], ident: int) -> tuple[bytes, int]:
    """What a range's content id hashes for these records (each key's 4-byte little-endian length,
    the key, the value's first ``ident`` bytes), and the keys' and values' lengths summed."""
    data = b"".join([len(k).to_bytes(4, "little") + k + v[:ident] for k, v in zip(keys, values)])
    return data, sum(map(len, keys)) + sum(map(len, values))


merge_newest: Callable[[list[list[bytes]], list[list[Any]], list[int], list[int]], tuple[list[bytes], list[Any]]]
live: Callable[[list[bytes], list[bytes], int, int], tuple[list[bytes], list[bytes | None]]]
overlay: Callable[[list[bytes], list[bytes], list[bytes], list[bytes | None]], tuple[list[bytes], list[bytes], int]]
cut_ends: Callable[[list[bytes], Callable[[bytes], int], int], list[int]]
range_feed: Callable[[list[bytes], list[bytes], int], tuple[bytes, int]]
if _c is not None:
    merge_newest, live, overlay, cut_ends, range_feed = _c.merge_newest, _c.live, _c.overlay, _c.cut_ends, _c.range_feed
else:
    merge_newest, live, overlay, cut_ends, range_feed = merge_newest_py, live_py, overlay_py, cut_ends_py, range_feed_py
