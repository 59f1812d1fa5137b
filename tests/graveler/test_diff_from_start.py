"""The two-way diff from a start key (blame diffs each commit only within a listing page's span): it agrees
with a plain comparison of the records for any [start, stop), and ranges of one id where it starts are not read."""

from __future__ import annotations

import hashlib
import random
from typing import Any

import pytest

from lakemount.graveler.committed.diff import diff
from lakemount.graveler.committed.metarange import MetaRange
from lakemount.graveler.model import RangeInfo


class FakeReader:
    def __init__(self, records: list[tuple[bytes, bytes]]) -> None:
        self.records = records

    def items(self) -> list[tuple[bytes, bytes]]:
        return list(self.records)


def metarange(chunks: list[list[tuple[bytes, bytes]]], reads: list[str]) -> MetaRange:
    """A metarange of one range per chunk; a range's id is the hash of its records (equal records, equal id)."""
    infos, by_id = [], {}
    for recs in chunks:
        rid = hashlib.sha256(repr(recs).encode()).hexdigest()
        by_id[rid] = recs
        infos.append(RangeInfo(rid, recs[0][0], recs[-1][0], len(recs), 0, ""))  # type: ignore[arg-type]

    def load(info: Any) -> FakeReader:
        reads.append(info.id)
        return FakeReader(by_id[info.id])

    return MetaRange(hashlib.sha256(repr(chunks).encode()).hexdigest(), "", infos, load)  # type: ignore[arg-type]


def chunked(records: dict[bytes, bytes], cut: set[bytes]) -> list[list[tuple[bytes, bytes]]]:
    out: list[list[tuple[bytes, bytes]]] = [[]]
    for k in sorted(records):
        out[-1].append((k, records[k]))
        if k in cut:
            out.append([])
    return [c for c in out if c]


@pytest.mark.parametrize("seed", range(30))
def test_diff_from_any_start_agrees_with_the_records(seed: int) -> None:
    rnd = random.Random(seed)
    keys = [f"k{i:04d}".encode() for i in range(400)]
    left = {k: b"v" for k in rnd.sample(keys, 300)}
    right = dict(left)
    for k in rnd.sample(keys, rnd.randrange(0, 12)):
        if k in right and rnd.random() < 0.4:
            del right[k]
        else:
            right[k] = b"w"
    cut = {k for k in keys if int(hashlib.sha256(k).hexdigest(), 16) % 40 == 0}  # content-defined, as the writer's
    reads: list[str] = []
    lm, rm = metarange(chunked(left, cut), reads), metarange(chunked(right, cut), reads)
    for _ in range(20):
        start = rnd.choice(keys + [b""])
        stop = rnd.choice([None, *[k for k in keys if k > start]])
        expect = sorted(k for k in set(left) | set(right) if k >= start and (stop is None or k < stop) and left.get(k) != right.get(k))
        assert [k for k, _, _ in diff(lm, rm, start, stop)] == expect


def test_equal_ranges_where_the_diff_starts_are_not_read() -> None:
    records = {f"k{i:04d}".encode(): b"v" for i in range(100)}
    cut = {b"k0049"}
    changed = dict(records)
    changed[b"k0080"] = b"w"  # only the second range differs
    reads: list[str] = []
    lm, rm = metarange(chunked(records, cut), reads), metarange(chunked(changed, cut), reads)
    assert list(diff(lm, rm, b"k0010", b"k0040")) == []
    assert reads == []  # the first ranges, one id on both sides, skipped unread (they were read to seek k0010)
    assert [k for k, _, _ in diff(lm, rm, b"k0010", None)] == [b"k0080"]
    assert len(reads) == 2  # the second range of each side, once
