"""``SqlRunStore``: action runs and their hook runs in the ref store's database (``lm_action_runs``, ``lm_hook_runs``).

Implements :class:`lakemount.actions.runs.RunStore`.  A run and its hook
runs are written in one transaction; run ids sort by start time, so listing
newest-first is an index scan.
"""

from __future__ import annotations

import sqlalchemy as sa

from lakemount.actions.runs import HookRun, Run
from lakemount.errors import NotFound
from lakemount.metastore.ddl import create_tables

metadata = sa.MetaData()

runs_t = sa.Table(
    "lm_action_runs",
    metadata,
    sa.Column("repo", sa.String(64), primary_key=True),
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("event_type", sa.String(32), nullable=False),
    sa.Column("branch", sa.String(255), nullable=False),
    sa.Column("source_ref", sa.String(255), nullable=False),
    sa.Column("commit_id", sa.String(64), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("start_time", sa.Float, nullable=False),
    sa.Column("end_time", sa.Float, nullable=False),
)
hook_runs_t = sa.Table(
    "lm_hook_runs",
    metadata,
    sa.Column("repo", sa.String(64), primary_key=True),
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("hook_run_id", sa.String(80), primary_key=True),
    sa.Column("action", sa.Text, nullable=False),
    sa.Column("hook_id", sa.String(255), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("output", sa.Text, nullable=False),
    sa.Column("start_time", sa.Float, nullable=False),
    sa.Column("duration", sa.Float, nullable=False),
)


class SqlRunStore:
    """Action runs on SQLAlchemy Core (SQLite or PostgreSQL); creates its tables on construction."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        create_tables(engine, metadata)

    def record(self, run: Run) -> None:
        """Store ``run`` with its hook runs (one transaction)."""
        with self.engine.connect().execution_options(lm_write=True) as conn, conn.begin():
            conn.execute(runs_t.insert().values(
                repo=run.repo, run_id=run.run_id, event_type=run.event_type, branch=run.branch,
                source_ref=run.source_ref, commit_id=run.commit_id, status=run.status,
                start_time=run.start_time, end_time=run.end_time,
            ))
            if run.hooks:
                conn.execute(hook_runs_t.insert(), [
                    {"repo": run.repo, "run_id": h.run_id, "hook_run_id": h.hook_run_id, "action": h.action,
                     "hook_id": h.hook_id, "status": h.status, "output": h.output,
                     "start_time": h.start_time, "duration": h.duration}
                    for h in run.hooks
                ])

    def list_runs(self, repo: str, *, branch: str | None = None, commit_id: str | None = None,
                  after: str = "", limit: int = 100) -> list[Run]:
        """Runs of ``repo`` newest first, after run id ``after`` (a page's last), without their hook runs."""
        cond = [runs_t.c.repo == repo]
        if branch is not None:
            cond.append(runs_t.c.branch == branch)
        if commit_id is not None:
            cond.append(runs_t.c.commit_id == commit_id)
        if after:
            cond.append(runs_t.c.run_id < after)
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(runs_t).where(*cond).order_by(runs_t.c.run_id.desc()).limit(limit)).all()
        return [self._run(r) for r in rows]

    def get_run(self, repo: str, run_id: str) -> Run:
        """The run ``run_id`` with its hook runs in order; raises ``NotFound``."""
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(runs_t).where(runs_t.c.repo == repo, runs_t.c.run_id == run_id)).first()
            if row is None:
                raise NotFound(f"action run not found: {repo}/{run_id}")
            hooks = conn.execute(
                sa.select(hook_runs_t).where(hook_runs_t.c.repo == repo, hook_runs_t.c.run_id == run_id)
                .order_by(hook_runs_t.c.start_time, hook_runs_t.c.hook_run_id)
            ).all()
        return self._run(row, tuple(
            HookRun(h.run_id, h.hook_run_id, h.action, h.hook_id, h.status, h.output, h.start_time, h.duration) for h in hooks
        ))

    @staticmethod
    def _run(r: sa.Row[tuple[object, ...]], hooks: tuple[HookRun, ...] = ()) -> Run:
        return Run(r.run_id, r.repo, r.event_type, r.branch, r.source_ref, r.commit_id, r.status, r.start_time, r.end_time, hooks)
