"""``Crowd``: how many writes of one branch a group commit's leader may wait for before it writes.

Both staging backends group-commit per branch and process: the writes that arrive while a
transaction (a flush) is in flight go together in the next one.  That alone gathers only the
writes that happen to arrive during one transaction; a process whose writers spend most of a
write elsewhere (storing the data, the Python of the request) gathers a few per transaction.
So the leader of a group, once it may write, also waits (at most ``GATHER_S``) until its
group holds as many writes as were inside the lane at once lately: the writers in flight beside
it, which come back within a write's time.  A lone writer (never two writes inside at once) has
nothing to wait for and is never delayed; a process whose writers thin out stops waiting within
``HORIZON_S``.  Callers hold the lane's lock around every method.
"""

from __future__ import annotations

from typing import Final

GATHER_S: Final = 0.020  # the longest a leader waits for writes in flight beside it (a few data writes' time)
HORIZON_S: Final = 0.25  # how long a peak of writes inside the lane is remembered


class Crowd:
    """Writes inside one lane now, and the most that were inside at once within the last ``HORIZON_S``."""

    __slots__ = ("inside", "_peak", "_before", "_since")

    def __init__(self) -> None:
        self.inside = 0
        self._peak = 0  # the most inside at once since ``_since``
        self._before = 0  # the peak of the window before it
        self._since = 0.0

    def enter(self, now: float) -> None:
        """A write came in (it leaves when acknowledged or failed)."""
        self._roll(now)
        self.inside += 1
        if self.inside > self._peak:
            self._peak = self.inside

    def leave(self, writes: int) -> None:
        """``writes`` writes left (their transaction ended)."""
        self.inside -= writes

    def expected(self, now: float) -> int:
        """How many writes a group may hope to hold: the peak of writes inside at once lately (1: alone)."""
        self._roll(now)
        return max(self._peak, self._before)

    def _roll(self, now: float) -> None:
        if now - self._since >= HORIZON_S:
            self._before = self._peak if now - self._since < 2 * HORIZON_S else 0
            self._peak = self.inside
            self._since = now
