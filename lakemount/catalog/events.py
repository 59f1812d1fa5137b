"""The event feed: what happened in a repository (commits, merges, protection changes, hook runs, pull requests).

Every catalog operation that changes history or rules appends one
:class:`FeedEvent` (repository, branch, kind, JSON payload, time) to an
:class:`EventLog` -- the ref store's ``lm_events`` table -- after the
operation succeeded.  Ids increase, so a reader resumes after the last id it
saw (the API serves the feed as server-sent events with that id).  Appending
is best effort: a failure is logged and never fails the operation it reports.

The feed is also the one place the audit trail hears of versioning verbs: every
verb that changes history, refs or rules already reports here, in every front
end, so an ``observer`` (``AuditLog.versioning``) sees each exactly once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final, Protocol

from lakemount.logs import get_logger
from lakemount.records import record

log = get_logger("lakemount.catalog.events")

KINDS: Final = (
    "commit", "merge", "revert", "cherry-pick", "branch-created", "branch-deleted", "tag-created", "tag-deleted",
    "protection", "hook-run", "pull-request", "pull-request-comment", "pull-request-approval", "reset",
)

# Told of each event after it is appended: (repo, branch, kind, payload); must not block.
Observer = Callable[[str, str, str, dict[str, Any]], None]


@record(frozen=True, slots=True)
class FeedEvent:
    """One entry of the feed; ``id`` increases with time within a store."""

    id: int
    repo: str
    branch: str
    kind: str
    payload: dict[str, Any]
    time: float


class EventLog(Protocol):
    """Where the feed lives (``lakemount.metastore.events.SqlEventLog``, or ``MemoryEventLog``)."""

    def append(self, repo: str, branch: str, kind: str, payload: dict[str, Any], at: float) -> None: ...

    def read(self, repo: str, *, branch: str | None = None, after: int = 0, limit: int = 100) -> list[FeedEvent]: ...


class MemoryEventLog:
    """The feed in a list: for catalogs built without a database."""

    def __init__(self) -> None:
        self.events: list[FeedEvent] = []

    def append(self, repo: str, branch: str, kind: str, payload: dict[str, Any], at: float) -> None:
        """Add an event."""
        self.events.append(FeedEvent(len(self.events) + 1, repo, branch, kind, payload, at))

    def read(self, repo: str, *, branch: str | None = None, after: int = 0, limit: int = 100) -> list[FeedEvent]:
        """Events of ``repo`` (and ``branch``) with ids above ``after``, oldest first."""
        found = [e for e in self.events if e.repo == repo and e.id > after and (branch is None or e.branch == branch)]
        return found[:limit]


class Feed:
    """Appends events, best effort."""

    def __init__(self, log_: EventLog, observer: Observer | None = None) -> None:
        self.log = log_
        self.observer = observer

    def emit(self, repo: str, branch: str, kind: str, **payload: Any) -> None:
        """Append an event; a failing store is logged, never raised."""
        try:
            self.log.append(repo, branch, kind, payload, time.time())
        except Exception as exc:  # the operation this reports already happened
            log.warning("event feed: could not record %s on %s/%s: %s", kind, repo, branch, exc)
        if self.observer is not None:
            try:
                self.observer(repo, branch, kind, payload)
            except Exception as exc:  # the operation this reports already happened
                log.warning("event feed: observer failed on %s: %s", kind, exc)

    def read(self, repo: str, *, branch: str | None = None, after: int = 0, limit: int = 100) -> list[FeedEvent]:
        """Events of ``repo`` (and ``branch``) after id ``after``, oldest first."""
        return self.log.read(repo, branch=branch, after=after, limit=limit)
