"""Two-way diff of metaranges that skips ranges with equal ids.

Both sides are walked with cursors that know a range's min key without
reading it.  When both cursors stand at the start of ranges with the same id
(or at the same key inside them, where a diff from a start key begins), the
ranges hold the same records and are skipped unread; content-defined
boundaries make both sides realign right after each difference, so the cost
grows with the difference, not with the repository.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Generator, Iterable, Iterator
from typing import Any

from lakemount.graveler.committed.metarange import MetaRange
from lakemount.graveler.model import RangeInfo
from lakemount.graveler.sstable import TableReader

Change = tuple[bytes, bytes | None, bytes | None]  # key, left value, right value


class _Cursor:
    __slots__ = ("j", "mr", "n", "pending", "recs", "ri")

    def __init__(self, mr: MetaRange, start: bytes, ri: int | None = None) -> None:
        """At ``start``, or at the start of range ``ri`` when given (all of it from ``start`` on)."""
        self.mr = mr
        self.n = len(mr.ranges)
        self.ri = ri if ri is not None else mr.first_range(start) if start else 0
        self.recs: list[tuple[bytes, bytes]] | None = None
        self.j = 0
        # Inside range ``ri``, at its first key >= ``pending``: found only when a key is asked, so that two
        # ranges over one span are compared block by block (``_diff_tables``) rather than read whole to seek.
        self.pending = b""
        if ri is None and start and self.ri < self.n and mr.ranges[self.ri].min_key < start:
            self.pending = start

    def _seek(self) -> None:
        start, self.pending = self.pending, b""
        self.load()
        assert self.recs is not None
        self.j = bisect_left(self.recs, (start,))
        self._settle()

    def range(self) -> RangeInfo | None:
        return self.mr.ranges[self.ri] if self.ri < self.n else None

    @property
    def at_start(self) -> bool:
        return self.recs is None and not self.pending

    def key(self) -> bytes | None:
        if self.pending:
            self._seek()
        if self.ri >= self.n:
            return None
        if self.recs is None:
            return self.mr.ranges[self.ri].min_key
        return self.recs[self.j][0]

    def load(self) -> None:
        self.recs = self.mr.reader(self.ri).items()
        self.j = 0

    def value(self) -> bytes:
        if self.pending:
            self._seek()
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
        if self.pending:
            self._seek()
        if self.recs is None:
            self.load()
        self.j += 1
        self._settle()

    def rest(self) -> list[tuple[bytes, bytes]]:
        """The records of the current range from the cursor on."""
        if self.recs is None:
            return self.mr.reader(self.ri).items()
        return self.recs[self.j:]

    def skip_range(self) -> None:
        self.pending = b""
        self.ri += 1
        self.recs = None
        self.j = 0


def diff(left: MetaRange, right: MetaRange, start: bytes = b"", stop: bytes | None = None) -> Iterator[Change]:
    """Records that differ between ``left`` and ``right`` in [start, stop), in key order."""
    if left.id == right.id:
        return
    # Ranges of one id where the diff starts are equal from ``start`` on: skipped before either is read.
    i, j = (left.first_range(start), right.first_range(start)) if start else (0, 0)
    i0 = i
    while (i < len(left.ranges) and j < len(right.ranges) and left.ranges[i].id == right.ranges[j].id
           and (stop is None or left.ranges[i].min_key < stop)):
        i += 1
        j += 1
    if i > i0:
        lc, rc = _Cursor(left, start, i), _Cursor(right, start, j)
    else:
        lc, rc = _Cursor(left, start), _Cursor(right, start)
    while True:
        lr, rr = lc.range(), rc.range()
        if lr is None and rr is None:
            return
        if lr is not None and rr is not None and (lc.at_start and rc.at_start or lc.pending and lc.pending == rc.pending):
            # Both unread, at the start of their ranges or at the first key from one ``start`` inside them: what is
            # left of two ranges with one id is equal, and of two with one span is compared block by block.
            if stop is not None and lr.min_key >= stop and rr.min_key >= stop:
                return
            if lr.id == rr.id or lr.min_key == rr.min_key and lr.max_key == rr.max_key:
                changes = () if lr.id == rr.id else _diff_tables(left.reader(lc.ri), right.reader(rc.ri), lc.pending)
                if (yield from _rest_of_both(lc, rc, changes, stop)):
                    return
                continue
        lk, rk = lc.key(), rc.key()  # a range's min key when at its start: nothing read
        if stop is not None and (lk is None or lk >= stop) and (rk is None or rk >= stop):
            return
        # Both at the same key inside their ranges: what is left of two ranges with one id is equal, and of two
        # with one span is compared as record sets.
        if lr is not None and rr is not None and not lc.at_start and not rc.at_start and lk == rk:
            if lr.id == rr.id or lr.min_key == rr.min_key and lr.max_key == rr.max_key:
                # Same span, different content (the usual shape of an in-place
                # change): compare the two record sets at C speed.
                changes = () if lr.id == rr.id else _diff_records(lc.rest(), rc.rest())
                if (yield from _rest_of_both(lc, rc, changes, stop)):
                    return
                continue
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


def _rest_of_both(lc: _Cursor, rc: _Cursor, changes: Iterable[Change], stop: bytes | None) -> Generator[Change, None, bool]:
    """Yield ``changes`` (how what is left of the two cursors' ranges differs) below ``stop``, then move both
    cursors past their ranges; returns True when ``stop`` was reached (the diff is over)."""
    for change in changes:
        if stop is not None and change[0] >= stop:
            return True
        yield change
    lc.skip_range()
    rc.skip_range()
    return False


def _diff_tables(left: Any, right: Any, start: bytes) -> list[Change]:
    """What differs between two ranges over one span, from key ``start`` on.  Two tables cut into blocks at the
    same keys are compared block by block, and a block whose bytes are equal on both sides is skipped undecoded (a
    block is self-contained: its bytes are its records); a change in place leaves the range's other blocks as
    they were, so only its own block is read."""
    if isinstance(left, TableReader) and isinstance(right, TableReader) and left.block_bounds() == right.block_bounds():
        out: list[Change] = []
        for i, last in enumerate(left.block_bounds()):
            if last < start or left.block_bytes(i) == right.block_bytes(i):
                continue
            out.extend(c for c in _diff_records(left.block_items(i), right.block_items(i)) if c[0] >= start)
        return out
    lrec, rrec = left.items(), right.items()
    if start:
        lrec, rrec = lrec[bisect_left(lrec, (start,)):], rrec[bisect_left(rrec, (start,)):]
    return _diff_records(lrec, rrec)


def _diff_records(left: list[tuple[bytes, bytes]], right: list[tuple[bytes, bytes]]) -> list[Change]:
    if len(left) == len(right):
        pairs = [(a, b) for a, b in zip(left, right) if a != b]
        if all(a[0] == b[0] for a, b in pairs):
            # Every place holds one key on both sides (records that are equal have equal keys): only values
            # changed, the usual shape of a commit, found by one pass at C speed instead of hashing both sides.
            return [(a[0], a[1], b[1]) for a, b in pairs]
    ls, rs = set(left), set(right)
    only_l = dict(ls - rs)
    only_r = dict(rs - ls)
    return [(k, only_l.get(k), only_r.get(k)) for k in sorted(only_l.keys() | only_r.keys())]
