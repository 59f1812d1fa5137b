"""First closes of new files in flight on one branch share one staging (mounts without write-back).

A new file's first close stages its entry over its held create (:mod:`~lakemount.fuse.held`).
Staged one at a time under the scope's mutex, every close was a transaction of the ref
store's own, however many writers the mount served (issue 36: 12 writers on 3 hosts cost
over 1.7 transactions per file).  So such closes form a group commit per branch, as the
staging backends do per process: a close with nothing of its branch in flight stages at
once, alone (a lone writer is never delayed); closes arriving meanwhile wait and go together
in the next staging, led by the first of them once the one in flight ends.  A leader also
waits (``GATHER_S`` at most) for the closes that were storing their data (the PUT to the
object store) when it led, so writers that store at the same time stage together, and
(until ``RETURN_S`` after the group's first close arrived, at most) until it holds as many
closes as were in flight on the branch at once lately: a crowd's writers whose closes were
just acknowledged come back with their next files within a data PUT's time, and without that
wait the crowd split into two halves that took turns, each staging half of it (docs/SCALE.md,
stop 53).  A lone writer (never two closes in flight at once) never waits.
Each is acknowledged when that staging is done; a failure fails all of them, acknowledging none.

The leader decides for each close under the scope's mutex, as a lone close did: a file
unlinked meanwhile is not staged (``detached``), a file whose create is no longer held (a
read or another change of this mount staged it meanwhile, so another mount may have linked
it) is given back to its close to stage by compare-and-set (``again``), and of two closes
of one file the later content wins.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import field
from typing import Final, Literal

from lakemount import waiting
from lakemount.catalog.crowd import Crowd
from lakemount.catalog.writer import DataInfo
from lakemount.fuse.inodes import Node
from lakemount.fuse.mounted import Scope, ScopeKey
from lakemount.records import record

Outcome = Literal["staged", "detached", "again"]
STAGED: Final = "staged"
DETACHED: Final = "detached"
AGAIN: Final = "again"
GATHER_S: Final = 0.5  # the longest a staging's leader waits for the closes that were storing their data when it led
RETURN_S: Final = 0.25  # the longest a group's first close waits for as many as were in flight at once lately (``Crowd``)


@record()
class Close:
    """One first close of a new file: its node, the version of its content stored, where it went."""

    node: Node
    version: int
    info: DataInfo
    outcome: Outcome = "again"


@record()
class _Group:
    """Closes that go in one staging."""

    closes: list[Close]
    done: threading.Event
    error: BaseException | None = None
    since: float = field(default_factory=time.monotonic, repr=False, compare=False)  # when its first close arrived


@record()
class _Lane:
    """A branch's group commit of closes: whether a staging is in flight, and the group gathering."""

    cond: threading.Condition
    busy: bool = False
    pending: _Group | None = None
    storing: set[int] = field(default_factory=set)  # tickets of first closes storing their data, to join a group next
    tickets: int = 0  # the last ticket handed out
    gathering: bool = False  # a leader waits for some of them: a joining close wakes it
    crowd: Crowd = field(default_factory=Crowd)  # first closes in flight, from ``storing`` to acknowledged


# Stages a group's closes (under the scope's mutex), setting each one's outcome.
Stager = Callable[[Scope, Sequence[Close]], None]


class Closes:
    """The group commit of first closes, one lane per branch shown by the mount."""

    def __init__(self, stage: Stager) -> None:
        self._stage = stage
        self._lanes: dict[ScopeKey, _Lane] = {}
        self._lock = threading.Lock()
        self.groups = 0  # stagings run (each for one close or more)
        self.closes = 0  # closes those stagings held
        self.returns = 0  # stagings whose leader waited for closes to come back (``RETURN_S``)

    def _lane(self, key: ScopeKey) -> _Lane:
        lane = self._lanes.get(key)
        if lane is None:
            with self._lock:
                lane = self._lanes.setdefault(key, _Lane(threading.Condition()))
        return lane

    def storing(self, key: ScopeKey) -> int:
        """A first close of branch ``key`` began storing its data: a leader may wait for it (``GATHER_S``).
        Returns its ticket, for :meth:`close` or :meth:`stored`."""
        lane = self._lane(key)
        with lane.cond:
            lane.tickets += 1
            lane.storing.add(lane.tickets)
            lane.crowd.enter(time.monotonic())
            return lane.tickets

    def stored(self, key: ScopeKey, ticket: int) -> None:
        """The close of ``ticket`` (:meth:`storing`) will not join (its data failed)."""
        lane = self._lane(key)
        with lane.cond:
            lane.storing.discard(ticket)
            lane.crowd.leave(1)
            lane.cond.notify_all()

    def gathering(self, key: ScopeKey) -> int:
        """Closes of branch ``key`` waiting for the staging in flight to end (they go in the next one together)."""
        lane = self._lanes.get(key)
        if lane is None:
            return 0
        with lane.cond:
            return len(lane.pending.closes) if lane.pending is not None else 0

    def _gather(self, lane: _Lane, group: _Group) -> None:
        """Wait (``lane``'s lock held) until the closes of the branch that are storing their data now have joined
        ``group`` (or failed), ``GATHER_S`` at most, and until it holds as many closes as were in flight at once
        lately, until ``RETURN_S`` after its first close arrived at most (a group that gathered behind a
        staging that took that long waits for nobody more); a lone writer's close (nothing storing beside
        it, never two in flight) goes at once.

        Those that begin storing meanwhile are not waited for by the first wait (they join if they arrive in
        time), so a leader waits for one data PUT at most, and a close beside a slow PUT (a large file's) waits
        up to ``GATHER_S`` for it.  Measured with 16 writers on one host (docs/SCALE.md, stop 49): groups of
        5.3-7.6 closes, where waiting a fixed 20 ms gathered 4.3.  The second wait is for the crowd's other
        half: a staging's writers, acknowledged, create their next files and store them while the next group
        stages, and without it the two halves took turns (8.1 closes a staging for 16 writers, stop 52)."""
        now = time.monotonic()
        waited = set(lane.storing)
        if not waited and len(group.closes) >= lane.crowd.expected(now):
            return
        lane.pending = group  # closes arriving meanwhile join it
        lane.gathering = True
        stored_by, back_by = now + GATHER_S, group.since + RETURN_S
        returned = False
        while True:
            if waited & lane.storing:
                left = stored_by - now
            elif len(group.closes) < lane.crowd.expected(now):
                left = back_by - now
                returned = returned or left > 0
            else:
                break
            if left <= 0:
                break
            lane.cond.wait(left)
            now = time.monotonic()
        lane.gathering = False
        if returned:
            self.returns += 1

    def close(self, scope: Scope, close: Close, *, ticket: int | None = None) -> Outcome:
        """Stage ``close`` with the other closes of the branch in flight; returns its outcome once staged.
        ``ticket``: what :meth:`storing` returned for it.  Raises what the staging raised (nothing of the
        group is staged then).  A thread that refuses to wait (``lakemount.waiting``: the request loop) gets
        ``WouldWait`` (its ticket given back, nothing staged) if any other close of the branch is in flight or
        lately was: it stages alone, at once, or not here."""
        lane = self._lane(scope.key)
        with lane.cond:
            if waiting.refused() and (lane.busy or lane.storing - {ticket} or lane.crowd.expected(time.monotonic()) > 1):
                if ticket is not None:  # as ``stored``: it will not join (it goes to a thread, which stores it again)
                    lane.storing.discard(ticket)
                    lane.crowd.leave(1)
                    lane.cond.notify_all()
                waiting.would_wait("another close of the branch in flight")
            if ticket is not None:
                lane.storing.discard(ticket)
            else:
                lane.crowd.enter(time.monotonic())
            if not lane.busy:
                group, lead = _Group([close], threading.Event()), True
                lane.busy = True
            else:
                lead = lane.pending is None
                group = lane.pending if lane.pending is not None else _Group([], threading.Event())
                lane.pending = group
                group.closes.append(close)
                if not lead and lane.gathering:
                    lane.cond.notify_all()
                if lead:
                    while lane.busy:  # gather the closes that arrive until the staging in flight ends
                        lane.cond.wait()
                    lane.busy = True
            if lead:
                self._gather(lane, group)
                lane.pending = None
        if not lead:
            group.done.wait()
            if group.error is not None:
                raise group.error
            return close.outcome
        try:
            self._stage(scope, group.closes)
            self.groups += 1
            self.closes += len(group.closes)
        except BaseException as exc:
            group.error = exc
            raise
        finally:
            group.done.set()
            with lane.cond:
                lane.busy = False
                lane.crowd.leave(len(group.closes))
                lane.cond.notify_all()
        return close.outcome
