"""``SqlStaging``: the ``StagingStore`` as rows of ``lm_staging`` (``staging.backend = "sql"``).

Staged entries are ``(token, key, value)`` rows in the ref store's database, beside the
branch rows that name their tokens; this module owns every statement on them.  It runs on
the ref store's connections and transactions (``SqlRefStore``'s plumbing: one engine, one
FastSql, one retry policy), as lakeFS's staging manager and ref manager share one kv store.

A staging write reads the branch's current token and inserts under it in one
transaction that holds a share lock on the branch row (PostgreSQL) or the database
write lock (SQLite, ``BEGIN IMMEDIATE``), so a commit's seal can never slip between the
two and lose a write.  The same statement compares the repository's storage namespace with the one
the write's data went to (a writer may use a repository record it kept).  Writes of one branch in one
process are group-committed: those arriving while its transaction is in flight go in the next one
together, and its leader waits (a few ms at most) for the writes in flight beside it (``crowd``: never
a lone writer), so many writers in flight cost one transaction, not one each.  Rows are deleted with their token (``drop_staging``, and with the
branches of a deleted repository): nothing of them is left on the block store.

Writes and lookups run on FastSql; SQLAlchemy and the table objects are imported only by
the cold statements (counts, drops), so a quick command reading staged entries never loads
it (``tests/metastore/test_fastsql.py`` checks).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import field
from typing import TYPE_CHECKING, Any, Final

from lakemount import waiting
from lakemount.errors import BranchNotFound, PreconditionFailed
from lakemount.graveler.model import Branch, StagingToken, prefix_end
from lakemount.graveler.ports import StageCheck
from lakemount.metastore import notify
from lakemount.metastore.sql import SqlRefStore, branch_from
from lakemount.records import record

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from lakemount.graveler.staging.crowd import Crowd

SCAN_BATCH: Final = 5000
HIDDEN_BATCH: Final = 500  # keys one ``staged_hidden`` statement asks about (under every driver's parameter limit)


def _first(tokens: Sequence[StagingToken], found: dict[Any, Any]) -> tuple[bool, bytes | None]:
    """(found, value) of the first of ``tokens`` (newest first) in ``found`` (token -> stored value)."""
    for t in tokens:
        if t in found:
            v = found[t]
            return True, bytes(v) if v is not None else None
    return False, None


@record()
class _Group:
    """Writes of one branch that go in one transaction."""

    items: dict[bytes, bytes | None] = field(default_factory=dict)
    namespaces: set[str] = field(default_factory=set)
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    writes: int = 0  # stage calls in it


def _crowd() -> Crowd:
    """A lane's crowd, imported with the first write (the reading verbs of the CLI import this module and never stage)."""
    from lakemount.graveler.staging.crowd import Crowd

    return Crowd()


@record()
class _Lane:
    """A branch's group commit in this process: whether a transaction is in flight, the group gathering,
    and how many writes it may wait for (``Crowd``)."""

    cond: threading.Condition = field(default_factory=threading.Condition)
    busy: bool = False
    pending: _Group | None = None
    gathering: bool = False  # a leader waits for writes in flight beside it: a joining write wakes it
    crowd: Crowd = field(default_factory=_crowd)


class SqlStaging:
    """Uncommitted entries of every branch as rows in the ref store's database."""

    def __init__(self, refs: SqlRefStore) -> None:
        """Staging beside ``refs``'s branch rows, on its connections (its schema holds ``lm_staging``).

        A deleted repository's staged rows go in the transaction that deletes its branches.
        """
        self.refs = refs
        self._fast = refs._fast
        self._lanes: dict[tuple[str, str], _Lane] = {}  # (repo, branch) -> its group commit
        self._lanes_lock = threading.Lock()
        self.gathers = 0  # transactions whose leader waited for writes in flight beside it (``Crowd``)
        self.embedded = refs.dialect == "sqlite"  # a staging is a local transaction that syncs nothing (WAL, NORMAL)
        refs.drop_with_repository("lm_staging", self._drop_tokens)

    def _drop_tokens(self, conn: Connection, tokens: Sequence[str]) -> None:
        from lakemount.metastore.sqlschema import staging_t

        conn.execute(staging_t.delete().where(staging_t.c.token.in_(tokens)))

    def stage(self, repo: str, branch: str, items: Sequence[tuple[bytes, bytes | None]],
              check: StageCheck | None = None, ready: Callable[[], None] | None = None, namespace: str = "") -> None:
        """Upsert ``items`` into the branch's current staging token (see ``StagingStore.stage`` for ``check``).

        Group commit, as ``lsm``'s flushes: a write with no transaction of its branch in flight in this
        process writes at once; writes arriving meanwhile go together in the next transaction (one for
        all of them), led by the first of them once the one in flight ends.  A leader whose branch had
        more writes inside at once lately than its group holds waits for them, ``GATHER_S`` at most
        (``crowd``: a lone writer never waits).  Each is acknowledged
        when that transaction has committed (a failure fails all of them, acknowledging none).  A
        checked write (``check``) is a transaction of its own.

        A kept connection the server dropped before the write's COMMIT went out
        is replaced and the write tried once more: nothing of it was applied.
        Lost while the COMMIT was on its way, whether it applied is unknown, and
        a repeat could overwrite a later write of the same key: ``Unavailable``.  A thread that refuses to
        wait (``lakemount.waiting``) gets ``WouldWait``, nothing written, where it would wait: for a
        transaction of the branch in flight, for company, or for the database's write lock.
        ``ready`` is waited for first: a row has nothing to do meanwhile (and a write whose data
        failed never joins the others).  ``namespace`` is checked against the repository's in the
        statement that locks the branch row (``PreconditionFailed``).
        """
        if ready is not None:
            ready()
        if check is not None:
            self._write(repo, branch, dict(items), check, {namespace} - {""})
            return
        lane = self._lanes.get((repo, branch))  # a dict read is atomic: the lock only to add one
        if lane is None:
            with self._lanes_lock:
                lane = self._lanes.setdefault((repo, branch), _Lane())
        with lane.cond:
            now = time.monotonic()
            if waiting.refused() and (lane.busy or lane.crowd.expected(now) > 1):  # it would wait its turn, or gather
                waiting.would_wait(f"a staging of {repo}/{branch} in flight or gathering")
            lane.crowd.enter(now)
            if not lane.busy:
                group, lead = _Group(), True
                lane.busy = True
            else:
                lead = lane.pending is None
                if lane.pending is None:
                    lane.pending = _Group()
                group = lane.pending
            group.items.update(items)
            group.writes += 1
            if namespace:
                group.namespaces.add(namespace)
            if not lead and lane.gathering:
                lane.cond.notify_all()
            if lead and group is lane.pending:
                while lane.busy:  # gather what arrives until the transaction in flight ends
                    lane.cond.wait()
            if lead:
                lane.busy = True
                self._gather(lane, group)
                lane.pending = None
        if not lead:
            group.done.wait()
            if group.error is not None:
                raise group.error
            return
        try:
            self._write(repo, branch, group.items, None, group.namespaces, group.writes == 1)
        except BaseException as exc:
            group.error = exc
            raise
        finally:
            group.done.set()
            with lane.cond:
                lane.busy = False
                lane.crowd.leave(group.writes)
                lane.cond.notify_all()

    def _gather(self, lane: _Lane, group: _Group) -> None:
        """Wait (``lane``'s lock held, at most ``GATHER_S``) until ``group`` holds as many writes as the
        lane had inside at once lately; a lone writer goes at once (see ``crowd``)."""
        now = time.monotonic()
        if group.writes >= lane.crowd.expected(now):
            return
        lane.pending = group  # writes arriving meanwhile join it
        lane.gathering = True
        from lakemount.graveler.staging.crowd import GATHER_S

        deadline = now + GATHER_S
        self.gathers += 1
        while group.writes < lane.crowd.expected(now) and now < deadline:
            lane.cond.wait(deadline - now)
            now = time.monotonic()
        lane.gathering = False

    def _write(self, repo: str, branch: str, items: dict[bytes, bytes | None], check: StageCheck | None,
               namespaces: set[str], alone: bool = True) -> None:
        """One write transaction staging ``items`` (see :meth:`stage`); ``alone``: of one writer only."""
        postgres = self.refs.dialect == "postgresql"
        # A checked write locks the row exclusively: two checked writers (and a commit's swap of
        # the tokens) wait for each other, so the state one checked is the state it writes over.
        lock = (" FOR UPDATE OF br" if check is not None else " FOR SHARE OF br") if postgres else ""
        select = self._fast.sql(
            "SELECT br.staging_token, br.commit_id, br.sealed_tokens, r.storage_namespace FROM lm_branches br "
            "JOIN lm_repositories r ON r.name = br.repo WHERE br.repo = ? AND br.name = ?" + lock
        )
        upsert = self._fast.sql(
            "INSERT INTO lm_staging (token, key, value) VALUES (?, ?, ?) "
            "ON CONFLICT (token, key) DO UPDATE SET value = excluded.value"
        )

        def work(cur: Any) -> None:
            cur.execute(select, (repo, branch))
            row = cur.fetchone()
            if row is None:
                cur.execute("ROLLBACK")
                self.refs.get_branch(repo, branch)  # raises the precise NotFound
                raise BranchNotFound(repo, branch)
            if any(ns != row[3] for ns in namespaces):
                cur.execute("ROLLBACK")
                raise PreconditionFailed(f"repository {repo} was created again with another storage namespace")
            token = row[0]
            if check is not None:
                check(branch_from(branch, row[1], row[0], row[2]), lambda tokens, key: self._staged_in(cur, tokens, key))
            cur.executemany(upsert, [(token, k, v) for k, v in items.items()])
            if inline:
                cur.execute(
                    "SELECT pg_notify(%s, %s)",
                    (notify.CHANNEL, notify.payload(self.refs.sender, notify.STAGING, repo, branch, notice=inline)
                     + (f"\t{detail}" if detail else "")),
                )

        # Every listening backend runs a transaction per notice it is woken by: notices are paced (``notify.Pacer``),
        # and a staging near the time its branch's owed notice is due carries that one too (``carry``).
        dirs = notify.dirs_detail(items) if postgres else ""
        inline = self.refs.pacer.inline(repo, branch, carry=True) if postgres else None
        detail = inline.detail(dirs) if inline else dirs
        try:
            self._fast.run(work, transaction=True, retry=True)
        except BaseException:
            if inline:
                self.refs.pacer.failed(repo, branch, inline)
            elif postgres:
                self.refs.pacer.owe(repo, branch, dirs)  # it may have committed; and the pacer counts it held until owed
            raise
        if postgres and not inline:
            self.refs.pacer.owe(repo, branch, dirs)
        self.refs.changed(repo, branch, alone=alone)

    def _staged_in(self, cur: Any, tokens: Sequence[StagingToken], key: bytes) -> tuple[bool, bytes | None]:
        """``staged_get`` inside the transaction of ``cur`` (a checked write reads what it holds locked)."""
        marks = ",".join("?" * len(tokens))
        cur.execute(self._fast.sql(f"SELECT token, value FROM lm_staging WHERE key = ? AND token IN ({marks})"), (key, *tokens))
        return _first(tokens, {r[0]: r[1] for r in cur.fetchall()})

    def staged_get(self, tokens: Sequence[StagingToken], key: bytes) -> tuple[bool, bytes | None]:
        marks = ",".join("?" * len(tokens))
        rows = self._fast.query(f"SELECT token, value FROM lm_staging WHERE key = ? AND token IN ({marks})", (key, *tokens))
        return _first(tokens, {r[0]: r[1] for r in rows})

    def staged_first(
        self, tokens: Sequence[StagingToken], start: bytes = b"", stop: bytes | None = None
    ) -> tuple[bytes, bytes] | None:
        from lakemount.graveler.staging.first import first_of

        return first_of(tokens, start, stop, self._first_value, self.staged_get)

    def _first_value(self, token: StagingToken, start: bytes, stop: bytes | None) -> tuple[bytes, bytes] | None:
        """One token's first staged value in [start, stop): one row read, through ``lm_staging_live``
        (which holds no tombstone), however many deletions lie before it."""
        text = "SELECT key, value FROM lm_staging WHERE token = ? AND key >= ? AND value IS NOT NULL"
        params: list[Any] = [token, start]
        if stop is not None:
            text += " AND key < ?"
            params.append(stop)
        rows = self._fast.query(text + " ORDER BY key LIMIT 1", params)
        return (bytes(rows[0][0]), bytes(rows[0][1])) if rows else None

    def staged_hidden(self, tokens: Sequence[StagingToken], keys: Sequence[bytes]) -> set[bytes]:
        hidden: set[bytes] = set()
        if not tokens:
            return hidden
        marks = ",".join("?" * len(tokens))
        for i in range(0, len(keys), HIDDEN_BATCH):
            batch = keys[i : i + HIDDEN_BATCH]
            rows = self._fast.query(
                f"SELECT key, token, value FROM lm_staging WHERE token IN ({marks}) AND key IN ({','.join('?' * len(batch))})",
                (*tokens, *batch),
            )
            by_key: dict[bytes, dict[Any, Any]] = {}
            for k, t, v in rows:
                by_key.setdefault(bytes(k), {})[t] = v
            hidden.update(k for k, found in by_key.items() if _first(tokens, found) == (True, None))
        return hidden

    def _branch_of(self, repo: str, name: str, rows: Sequence[Any]) -> Branch:
        """The branch of a combined statement's kind-0 row; raises what ``get_branch`` raises when there is none."""
        for row in rows:
            if row[0] == 0:
                return branch_from(name, row[1], row[2], row[3])
        return self.refs.get_branch(repo, name)  # raises BranchNotFound or RepositoryNotFound

    def branch_staged_get(
        self, repo: str, name: str, tokens: Sequence[StagingToken], key: bytes
    ) -> tuple[Branch, bool, bytes | None]:
        # One statement (one snapshot): the branch row, and the staged rows of
        # ``key`` under the tokens the caller expects the branch to have.
        marks = ",".join("?" * len(tokens))
        rows = self._fast.query(
            "SELECT 0, commit_id, staging_token, sealed_tokens, NULL FROM lm_branches WHERE repo = ? AND name = ? "
            f"UNION ALL SELECT 1, token, NULL, NULL, value FROM lm_staging WHERE key = ? AND token IN ({marks})",
            (repo, name, key, *tokens),
        )
        branch = self._branch_of(repo, name, rows)
        return (branch, *_first(tokens, {r[1]: r[4] for r in rows if r[0] == 1}))

    def branch_staged_scan(
        self, repo: str, name: str, token: StagingToken, start: bytes = b"", stop: bytes | None = None
    ) -> tuple[Branch, list[tuple[bytes, bytes | None]], bool]:
        # One statement (one snapshot): the branch row and the first page of the token's entries.
        text = "SELECT key, value FROM lm_staging WHERE token = ? AND key >= ?"
        params: list[Any] = [repo, name, token, start]
        if stop is not None:
            text += " AND key < ?"
            params.append(stop)
        rows = self._fast.query(
            "SELECT 0, commit_id, staging_token, sealed_tokens, NULL, NULL FROM lm_branches WHERE repo = ? AND name = ? "
            f"UNION ALL SELECT 1, NULL, NULL, NULL, s.key, s.value FROM ({text} ORDER BY key LIMIT {SCAN_BATCH}) AS s",
            params,
        )
        branch = self._branch_of(repo, name, rows)
        page = sorted((bytes(r[4]), bytes(r[5]) if r[5] is not None else None) for r in rows if r[0] == 1)
        return branch, page, len(page) < SCAN_BATCH

    def branch_staged_scans(
        self, repo: str, name: str, token: StagingToken, ranges: Sequence[tuple[bytes, bytes | None]]
    ) -> tuple[Branch, list[tuple[list[tuple[bytes, bytes | None]], bool]]]:
        # One statement (one snapshot): the branch row and the first page of the token's entries in each range.
        params: list[Any] = [repo, name]
        parts = []
        for i, (start, stop) in enumerate(ranges, 1):
            text = "SELECT key, value FROM lm_staging WHERE token = ? AND key >= ?"
            params += [token, start]
            if stop is not None:
                text += " AND key < ?"
                params.append(stop)
            parts.append(f"SELECT {i}, NULL, NULL, NULL, s.key, s.value FROM ({text} ORDER BY key LIMIT {SCAN_BATCH}) AS s")
        rows = self._fast.query(
            "SELECT 0, commit_id, staging_token, sealed_tokens, NULL, NULL FROM lm_branches WHERE repo = ? AND name = ? "
            + "".join(f"UNION ALL {part} " for part in parts),
            params,
        )
        branch = self._branch_of(repo, name, rows)
        pages: list[list[tuple[bytes, bytes | None]]] = [[] for _ in ranges]
        for r in rows:
            if r[0] != 0:
                pages[r[0] - 1].append((bytes(r[4]), bytes(r[5]) if r[5] is not None else None))
        return branch, [(sorted(page), len(page) < SCAN_BATCH) for page in pages]

    def branch_staged_probe(
        self, repo: str, name: str, token: StagingToken, key: bytes, start: bytes, stop: bytes | None, limit: int
    ) -> tuple[Branch, tuple[bool, bytes | None], list[tuple[bytes, bytes | None]], bool]:
        # One statement (one snapshot): the branch row, the token's entry of ``key``
        # and its first ``limit`` entries in [start, stop).
        text = "SELECT key, value FROM lm_staging WHERE token = ? AND key >= ?"
        params: list[Any] = [repo, name, token, key, token, start]
        if stop is not None:
            text += " AND key < ?"
            params.append(stop)
        rows = self._fast.query(
            "SELECT 0, commit_id, staging_token, sealed_tokens, NULL, NULL FROM lm_branches WHERE repo = ? AND name = ? "
            "UNION ALL SELECT 1, NULL, NULL, NULL, key, value FROM lm_staging WHERE token = ? AND key = ? "
            f"UNION ALL SELECT 2, NULL, NULL, NULL, s.key, s.value FROM ({text} ORDER BY key LIMIT {int(limit)}) AS s",
            params,
        )
        branch = self._branch_of(repo, name, rows)
        own: tuple[bool, bytes | None] = (False, None)
        for r in rows:
            if r[0] == 1:
                own = (True, bytes(r[5]) if r[5] is not None else None)
        page = sorted((bytes(r[4]), bytes(r[5]) if r[5] is not None else None) for r in rows if r[0] == 2)
        return branch, own, page, len(page) < limit

    def staged_scan(
        self, token: StagingToken, start: bytes = b"", stop: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes | None]]:
        lower = start
        inclusive = True
        while True:
            text = "SELECT key, value FROM lm_staging WHERE token = ? AND key " + (">= ?" if inclusive else "> ?")
            params: list[Any] = [token, lower]
            if stop is not None:
                text += " AND key < ?"
                params.append(stop)
            rows = self._fast.query(text + f" ORDER BY key LIMIT {SCAN_BATCH}", params)
            if self.refs.dialect == "postgresql":
                rows = [(bytes(k), bytes(v) if v is not None else None) for k, v in rows]
            yield from rows
            if len(rows) < SCAN_BATCH:
                return
            lower, inclusive = rows[-1][0], False

    def staged_count(self, token: StagingToken) -> int:
        import sqlalchemy as sa

        from lakemount.metastore.sqlschema import staging_t

        return int(self.refs._select(
            lambda conn: conn.execute(sa.select(sa.func.count()).select_from(staging_t).where(staging_t.c.token == token)).scalar_one()
        ))

    def noticed(self, detail: str) -> None:
        pass  # staged rows carry no detail in their notices: a read asks the database

    def collect_staging(self, namespace: str, *, grace_s: float | None = None) -> int:
        return 0  # staged rows are deleted with their token: no staging data is left on the block store

    def drop_staging(self, token: StagingToken, prefix: bytes = b"", key: bytes | None = None) -> None:
        if self.refs.dialect == "sqlite":  # no notice to send: FastSql, and a CLI commit loads no SQLAlchemy
            where, params = "token = ?", [token, *([] if key is None else [key])]
            if key is not None:
                where += " AND key = ?"
            elif prefix:
                end = prefix_end(prefix)
                where += " AND key >= ?" + ("" if end is None else " AND key < ?")
                params += [prefix, *([] if end is None else [end])]
            def drop(cur: Any) -> list[tuple[str, str]]:
                cur.execute(f"DELETE FROM lm_staging WHERE {where}", params)
                if key is None and not prefix:
                    return []
                # A partial reset of a branch's live token changes the branch: its stamp says so (a
                # mount keeps a directory's listing while the stamps show no change but its own).
                cur.execute("SELECT repo, name FROM lm_branches WHERE staging_token = ?", (token,))
                return list(cur.fetchall())

            for repo, branch in self._fast.run(drop, transaction=True):
                self.refs.changed(repo, branch)
            return
        import sqlalchemy as sa

        from lakemount.metastore.sqlschema import branches_t, staging_t

        cond = [staging_t.c.token == token]
        if key is not None:
            cond.append(staging_t.c.key == key)
        elif prefix:
            cond.append(staging_t.c.key >= prefix)
            end = prefix_end(prefix)
            if end is not None:
                cond.append(staging_t.c.key < end)
        refs = self.refs
        with refs._write() as conn:
            conn.execute(staging_t.delete().where(*cond))
            if prefix or key is not None:
                # A partial reset drops entries of a branch's live token: tell mounts, as a staged write
                # does.  Whole tokens are dropped after a commit or a full reset, which moved the head.
                owners = conn.execute(sa.select(branches_t.c.repo, branches_t.c.name).where(branches_t.c.staging_token == token))
                for repo, branch in owners.all():
                    refs._notify(conn, notify.STAGING, repo, branch)
