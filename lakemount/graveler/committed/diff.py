"""Two-way diff of metaranges that skips ranges with equal ids.

Both sides are walked with cursors that know a range's min key without
reading it.  When both cursors stand at the start of ranges with the same id,
the ranges hold the same records and are skipped unread; content-defined
boundaries make both sides realign right after each difference, so the cost
grows with the difference, not with the repository.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator

from lakemount.graveler.committed.metarange import MetaRange
from lakemount.graveler.model import RangeInfo

Change = tuple[bytes, bytes | None, bytes | None]  # key, left value, right value


class _Cursor:
    __slots__ = ("j", "mr", "n", "recs", "ri")

    def __init__(self, mr: MetaRange, start: bytes) -> None:
        self.mr = mr
        self.n = len(mr.ranges)
        self.ri = mr.first_range(start) if start else 0
        self.recs: list[tuple[bytes, bytes]] | None = None
        self.j = 0
        if start and self.ri < self.n and mr.ranges[self.ri].min_key < start:
            self.load()
            assert self.recs is not None
            self.j = bisect_left(self.recs, (start,))
            self._settle()

    def range(self) -> RangeInfo | None:
        return self.mr.ranges[self.ri] if self.ri < self.n else None

    @property
    def at_start(self) -> bool:
        return self.recs is None

    def key(self) -> bytes | None:
        if self.ri >= self.n:
            return None
        if self.recs is None:
            return self.mr.ranges[self.ri].min_key
        return self.recs[self.j][0]

    def load(self) -> None:
        self.recs = self.mr.reader(self.ri).items()
        self.j = 0

    def value(self) -> bytes:
        if self.recs is None:
            self.load()
        assert self.recs is not None
        return self.recs[self.j][1]

    def _settle(self) -> None:
        if self.recs is not None and self.j >= len(self.recs):
            self.ri += 1
            self.recs = None
            self.j = 0

    def advance(self) -> None:
        if self.recs is None:
            self.load()
        self.j += 1
        self._settle()

    def skip_range(self) -> None:
        self.ri += 1
        self.recs = None
        self.j = 0


def diff(left: MetaRange, right: MetaRange, start: bytes = b"", stop: bytes | None = None) -> Iterator[Change]:
    """Records that differ between ``left`` and ``right`` in [start, stop), in key order."""
    if left.id == right.id:
        return
    lc, rc = _Cursor(left, start), _Cursor(right, start)
    while True:
        lr, rr = lc.range(), rc.range()
        if lr is None and rr is None:
            return
        if lc.at_start and rc.at_start and lr is not None and rr is not None:
            if lr.id == rr.id:
                lc.skip_range()
                rc.skip_range()
                continue
            if lr.min_key == rr.min_key and lr.max_key == rr.max_key:
                # Same span, different content (the usual shape of an in-place
                # change): compare the two record sets at C speed.
                for change in _diff_records(lc.mr.reader(lc.ri).items(), rc.mr.reader(rc.ri).items()):
                    if stop is not None and change[0] >= stop:
                        return
                    yield change
                lc.skip_range()
                rc.skip_range()
                continue
        lk, rk = lc.key(), rc.key()
        if stop is not None and (lk is None or lk >= stop) and (rk is None or rk >= stop):
            return
        if rk is None or (lk is not None and lk < rk):
            assert lk is not None
            v = lc.value()
            yield lk, v, None
            lc.advance()
        elif lk is None or rk < lk:
            v = rc.value()
            yield rk, None, v
            rc.advance()
        else:
            lv, rv = lc.value(), rc.value()
            if lv != rv:
                yield lk, lv, rv
            lc.advance()
            rc.advance()


def _diff_records(left: list[tuple[bytes, bytes]], right: list[tuple[bytes, bytes]]) -> list[Change]:
    ls, rs = set(left), set(right)
    only_l = dict(ls - rs)
    only_r = dict(rs - ls)
    return [(k, only_l.get(k), only_r.get(k)) for k in sorted(only_l.keys() | only_r.keys())]
