"""The records of hook runs, and where they are kept (the port ``lakemount/metastore`` implements).

Every run of an event that some action matched -- the event, each hook's
status, output, start and duration -- is recorded in a :class:`RunStore`
(``metastore.actions.SqlRunStore`` in the ref store's database, or
:class:`MemoryRunStore`); the API and the CLI read them back.
"""

from __future__ import annotations

import os
from typing import Protocol

from lakemount.records import record


@record(frozen=True, slots=True)
class HookRun:
    """The record of one hook's run."""

    run_id: str
    hook_run_id: str
    action: str
    hook_id: str
    status: str  # completed, failed
    output: str
    start_time: float
    duration: float


@record(frozen=True, slots=True)
class Run:
    """The record of one event's run of every matching action."""

    run_id: str
    repo: str
    event_type: str
    branch: str
    source_ref: str
    commit_id: str
    status: str  # completed, failed
    start_time: float
    end_time: float
    hooks: tuple[HookRun, ...] = ()


class RunStore(Protocol):
    """Where runs are recorded (``lakemount.metastore.actions.SqlRunStore``, or ``MemoryRunStore``)."""

    def record(self, run: Run) -> None: ...

    def list_runs(self, repo: str, *, branch: str | None = None, commit_id: str | None = None,
                  after: str = "", limit: int = 100) -> list[Run]: ...

    def get_run(self, repo: str, run_id: str) -> Run: ...


class MemoryRunStore:
    """Runs in a dict: for catalogs built without a database (tests, tools)."""

    def __init__(self) -> None:
        self.runs: dict[str, Run] = {}

    def record(self, run: Run) -> None:
        """Keep ``run``."""
        self.runs[run.run_id] = run

    def list_runs(self, repo: str, *, branch: str | None = None, commit_id: str | None = None,
                  after: str = "", limit: int = 100) -> list[Run]:
        """Runs of ``repo``, newest first (run ids sort by time, descending), after the run id ``after``."""
        runs = sorted((r for r in self.runs.values() if r.repo == repo), key=lambda r: r.run_id, reverse=True)
        runs = [r for r in runs if (branch is None or r.branch == branch) and (commit_id is None or r.commit_id == commit_id)]
        if after:
            runs = [r for r in runs if r.run_id < after]
        return runs[:limit]

    def get_run(self, repo: str, run_id: str) -> Run:
        """The run ``run_id``; raises ``NotFound``."""
        from lakemount.errors import NotFound

        run = self.runs.get(run_id)
        if run is None or run.repo != repo:
            raise NotFound(f"action run not found: {repo}/{run_id}")
        return run


def new_run_id(now: float) -> str:
    """A run id that sorts newest-first when compared descending: time in microseconds, then randomness."""
    return f"{int(now * 1_000_000):016x}{os.urandom(4).hex()}"
