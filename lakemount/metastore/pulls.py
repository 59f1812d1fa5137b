"""``SqlPullStore``: pull requests, comments, approvals and approval rules in the ref store's database.

Implements :class:`lakemount.catalog.pulls.PullStore`.  Pull request ids are
per-repository sequence numbers ("1", "2", ...) allocated inside a write
transaction (SQLite's ``BEGIN IMMEDIATE``; on PostgreSQL a lost race on the
primary key is retried).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from lakemount.catalog.pulls import Approval, Comment, PullRequest
from lakemount.errors import ConcurrentUpdate, NotFound, PreconditionFailed, TooManyComments
from lakemount.metastore.ddl import create_tables

metadata = sa.MetaData()

pulls_t = sa.Table(
    "lm_pulls",
    metadata,
    sa.Column("repo", sa.String(64), primary_key=True),
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("title", sa.Text, nullable=False),
    sa.Column("description", sa.Text, nullable=False),
    sa.Column("source_branch", sa.String(255), nullable=False),
    sa.Column("destination_branch", sa.String(255), nullable=False),
    sa.Column("author", sa.String(255), nullable=False),
    sa.Column("creation_date", sa.Float, nullable=False),
    sa.Column("closed_date", sa.Float, nullable=True),
    sa.Column("merged_commit_id", sa.String(64), nullable=True),
)
comments_t = sa.Table(
    "lm_pull_comments",
    metadata,
    sa.Column("repo", sa.String(64), primary_key=True),
    sa.Column("pull_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("author", sa.String(255), nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("creation_date", sa.Float, nullable=False),
)
approvals_t = sa.Table(
    "lm_pull_approvals",
    metadata,
    sa.Column("repo", sa.String(64), primary_key=True),
    sa.Column("pull_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("user", sa.String(255), primary_key=True),
    sa.Column("creation_date", sa.Float, nullable=False),
)
rules_t = sa.Table(
    "lm_pull_approval_rules",
    metadata,
    sa.Column("repo", sa.String(64), primary_key=True),
    sa.Column("pattern", sa.String(255), primary_key=True),
    sa.Column("required", sa.Integer, nullable=False),
)

ATTEMPTS = 5


def _pull_id(pull_id: str) -> int:
    if not pull_id.isdigit():
        raise NotFound(f"pull request not found: {pull_id}")
    return int(pull_id)


class SqlPullStore:
    """Pull requests on SQLAlchemy Core (SQLite or PostgreSQL); creates its tables on construction."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        create_tables(engine, metadata)

    def _write(self) -> Any:
        return self.engine.connect().execution_options(lm_write=True)

    @staticmethod
    def _pr(r: Any) -> PullRequest:
        return PullRequest(str(r.id), r.repo, r.status, r.title, r.description, r.source_branch,
                           r.destination_branch, r.author, r.creation_date, r.closed_date, r.merged_commit_id)

    def create(self, pr: PullRequest) -> PullRequest:
        """Store a new pull request under the next id of its repository; returns it with the id."""
        for _ in range(ATTEMPTS):
            try:
                with self._write() as conn, conn.begin():
                    last = conn.execute(sa.select(sa.func.max(pulls_t.c.id)).where(pulls_t.c.repo == pr.repo)).scalar()
                    new = replace(pr, id=str((last or 0) + 1))
                    row = {k: getattr(new, k) for k in (
                        "repo", "status", "title", "description", "source_branch", "destination_branch",
                        "author", "creation_date", "closed_date", "merged_commit_id")}
                    conn.execute(pulls_t.insert().values(id=int(new.id), **row))
                return new
            except IntegrityError:
                continue
        raise ConcurrentUpdate(f"could not allocate a pull request id in {pr.repo}")

    def get(self, repo: str, pull_id: str) -> PullRequest:
        """Raises ``NotFound``."""
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(pulls_t).where(pulls_t.c.repo == repo, pulls_t.c.id == _pull_id(pull_id))).first()
        if row is None:
            raise NotFound(f"pull request not found: {repo}#{pull_id}")
        return self._pr(row)

    def update(self, pr: PullRequest, *, expect: Collection[str]) -> None:
        """Store status, title, description, dates and merged commit of ``pr`` if its stored status is one of
        ``expect`` (compare-and-set: a change made from a stale read cannot undo a merge or a close);
        raises ``NotFound``, ``PreconditionFailed`` naming the stored status."""
        where = (pulls_t.c.repo == pr.repo, pulls_t.c.id == _pull_id(pr.id))
        with self._write() as conn, conn.begin():
            n = conn.execute(pulls_t.update().where(*where, pulls_t.c.status.in_(list(expect))).values(
                status=pr.status, title=pr.title, description=pr.description, closed_date=pr.closed_date,
                merged_commit_id=pr.merged_commit_id,
            )).rowcount
            now = None if n else conn.execute(sa.select(pulls_t.c.status).where(*where)).scalar()
        if n == 0 and now is None:
            raise NotFound(f"pull request not found: {pr.repo}#{pr.id}")
        if n == 0:
            raise PreconditionFailed(f"pull request {pr.id} is {now}")

    def list_pulls(self, repo: str, status: str | None, after: str, limit: int) -> list[PullRequest]:
        """Pull requests of ``repo`` by id, with ``status`` (None: all), ids above ``after``."""
        cond = [pulls_t.c.repo == repo]
        if status is not None:
            cond.append(pulls_t.c.status == status)
        if after:
            cond.append(pulls_t.c.id > (int(after) if after.isdigit() else 0))
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(pulls_t).where(*cond).order_by(pulls_t.c.id).limit(limit)).all()
        return [self._pr(r) for r in rows]

    def add_comment(self, repo: str, comment: Comment, most: int) -> Comment:
        """Store a comment under the next comment id of its pull request; returns it with the id.

        Comment ids count from 1 and comments are never removed, so the last id is their number:
        ``TooManyComments`` when it is already ``most``."""
        for _ in range(ATTEMPTS):
            try:
                with self._write() as conn, conn.begin():
                    pid = _pull_id(comment.pull_id)
                    last = conn.execute(sa.select(sa.func.max(comments_t.c.id)).where(
                        comments_t.c.repo == repo, comments_t.c.pull_id == pid)).scalar()
                    if (last or 0) >= most:
                        raise TooManyComments(comment.pull_id, most)
                    new = replace(comment, id=(last or 0) + 1)
                    conn.execute(comments_t.insert().values(repo=repo, pull_id=pid, id=new.id, author=new.author,
                                                            body=new.body, creation_date=new.creation_date))
                return new
            except IntegrityError:
                continue
        raise ConcurrentUpdate(f"could not add a comment to {repo}#{comment.pull_id}")

    def comments(self, repo: str, pull_id: str, after: int, limit: int) -> list[Comment]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(comments_t).where(
                comments_t.c.repo == repo, comments_t.c.pull_id == _pull_id(pull_id), comments_t.c.id > after,
            ).order_by(comments_t.c.id).limit(limit)).all()
        return [Comment(r.id, str(r.pull_id), r.author, r.body, r.creation_date) for r in rows]

    def approve(self, repo: str, approval: Approval) -> None:
        """Record an approval; a second one by the same user changes nothing."""
        try:
            with self._write() as conn, conn.begin():
                conn.execute(approvals_t.insert().values(repo=repo, pull_id=_pull_id(approval.pull_id),
                                                         user=approval.user, creation_date=approval.creation_date))
        except IntegrityError:
            pass

    def approvals(self, repo: str, pull_id: str) -> list[Approval]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(approvals_t).where(
                approvals_t.c.repo == repo, approvals_t.c.pull_id == _pull_id(pull_id)).order_by(approvals_t.c.creation_date)).all()
        return [Approval(str(r.pull_id), r.user, r.creation_date) for r in rows]

    def required_approvals(self, repo: str) -> dict[str, int]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(rules_t).where(rules_t.c.repo == repo)).all()
        return {r.pattern: r.required for r in rows}

    def set_required_approvals(self, repo: str, pattern: str, count: int) -> None:
        with self._write() as conn, conn.begin():
            conn.execute(rules_t.delete().where(rules_t.c.repo == repo, rules_t.c.pattern == pattern))
            if count > 0:
                conn.execute(rules_t.insert().values(repo=repo, pattern=pattern, required=count))
