"""Counting what a listing reads from a branch's stores (stop 55): shared by the catalog's, the gateway's and the
mount's tests of listings past staged deletions."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from lakemount.catalog.catalog import Catalog


class Reading:
    """Counts what reading a branch asks of its stores: statements (calls of the staging's reads and of the
    ref store's branch read) and the staged deletions handed back to the reads (rows read past).  What a
    backend does inside ``staged_first`` is its own: ``sql`` reads one row of an index of values; ``lsm``
    steps over the tombstones of its files decoded in memory, by the chunk, with no statement each (its
    figures are in benchmarks/short_listing_bench.py)."""

    def __init__(self) -> None:
        self.calls = 0
        self.deletions = 0
        self.inside = 0

    def rows(self, rows: list[tuple[bytes, bytes | None]]) -> list[tuple[bytes, bytes | None]]:
        if not self.inside:
            self.deletions += sum(1 for _, v in rows if v is None)
        return rows

    def stream(self, rows: Iterator[tuple[bytes, bytes | None]]) -> Iterator[tuple[bytes, bytes | None]]:
        for k, v in rows:
            if not self.inside:
                self.deletions += v is None
            yield k, v


@contextmanager
def counting(cat: Catalog, monkeypatch: pytest.MonkeyPatch) -> Iterator[Reading]:
    staging = cat.graveler.reads.staging
    refs = cat.graveler.reads.refs
    seen = Reading()
    with monkeypatch.context() as m:
        real_scan, real_page, real_probe = staging.staged_scan, staging.branch_staged_scan, staging.branch_staged_probe

        def staged_scan(*a: Any, **k: Any) -> Iterator[tuple[bytes, bytes | None]]:
            seen.calls += 1
            return seen.stream(iter(real_scan(*a, **k)))

        def branch_staged_scan(*a: Any, **k: Any) -> Any:
            seen.calls += 1
            branch, page, complete = real_page(*a, **k)
            return branch, seen.rows(page), complete

        def branch_staged_probe(*a: Any, **k: Any) -> Any:
            seen.calls += 1
            branch, own, page, complete = real_probe(*a, **k)
            return branch, own, seen.rows(page), complete

        m.setattr(staging, "staged_scan", staged_scan)
        m.setattr(staging, "branch_staged_scan", branch_staged_scan)
        m.setattr(staging, "branch_staged_probe", branch_staged_probe)
        for name in ("staged_first", "staged_hidden", "staged_get", "branch_staged_get"):
            m.setattr(staging, name, counted(seen, getattr(staging, name)))
        m.setattr(refs, "get_branch", counted(seen, refs.get_branch))
        yield seen


def counted(seen: Reading, fn: Any) -> Any:
    def call(*a: Any, **k: Any) -> Any:
        seen.calls += 1
        seen.inside += 1
        try:
            return fn(*a, **k)
        finally:
            seen.inside -= 1

    return call
