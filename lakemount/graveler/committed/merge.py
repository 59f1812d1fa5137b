"""Three-way merge of metaranges from their merge base.

The changes each side made since the base come from two range-skipping diffs,
so a merge costs what the two sides changed.  A key changed on both sides to
different results is a conflict, resolved by the strategy: ``fail`` reports
every conflicting key, ``source-wins`` / ``dest-wins`` pick a side.  The
result is the list of changes to apply to the destination, whose untouched
ranges ``apply`` then reuses whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from enum import Enum

from lakemount.errors import InvalidArgument
from lakemount.graveler.committed.diff import diff
from lakemount.graveler.committed.metarange import MetaRange


class Strategy(str, Enum):
    """How a three-way merge resolves a key changed on both sides: fail, or let one side win."""

    FAIL = "fail"
    SOURCE_WINS = "source-wins"
    DEST_WINS = "dest-wins"

    @staticmethod
    def parse(s: str | None) -> Strategy:
        if not s:
            return Strategy.FAIL
        try:
            return Strategy(s)
        except ValueError:
            raise InvalidArgument(f"unknown merge strategy {s!r}: use fail, source-wins or dest-wins") from None


def three_way(
    base: MetaRange, source: MetaRange, dest: MetaRange, strategy: Strategy
) -> tuple[list[tuple[bytes, bytes | None]], list[bytes]]:
    """Changes to apply to ``dest`` to merge ``source`` into it, and conflicting keys."""
    changes: list[tuple[bytes, bytes | None]] = []
    conflicts: list[bytes] = []
    src: Iterator[tuple[bytes, bytes | None, bytes | None]] = diff(base, source)
    dst: Iterator[tuple[bytes, bytes | None, bytes | None]] = diff(base, dest)
    s = next(src, None)
    d = next(dst, None)
    while s is not None:
        if d is None or s[0] < d[0]:
            changes.append((s[0], s[2]))
            s = next(src, None)
        elif d[0] < s[0]:
            d = next(dst, None)
        else:
            if s[2] != d[2]:
                if strategy is Strategy.SOURCE_WINS:
                    changes.append((s[0], s[2]))
                elif strategy is Strategy.FAIL:
                    conflicts.append(s[0])
            s = next(src, None)
            d = next(dst, None)
    return changes, conflicts
