"""``SqlRefStore``: the ref store on SQLAlchemy Core, SQLite (WAL) or PostgreSQL.

Repositories, branches, tags, commits and protection rules, and the plumbing every
store on this database shares: the engine, FastSql's connections, write and read
transactions with their retry policy, change notices, the schema.  Staged entries
are :mod:`lakemount.metastore.sql_staging` and the staging file lists
:mod:`lakemount.metastore.staging_lists`, on these same connections.

Branch updates are compare-and-swap on the whole branch row.

The hot reads (repositories, branch heads, commits, tags) run on FastSql's
plain DBAPI connections.  On a SQLite file whose schema is in place nothing
else is needed, so SQLAlchemy (~0.15 s to import) is loaded, and the engine
built, only when a statement needs them: ``lakemount fs cat`` never pays for
it.  :mod:`lakemount.metastore.sqlschema` holds the tables.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypeVar

from lakemount.errors import (
    AlreadyExists,
    BranchNotFound,
    CommitNotFound,
    NotFound,
    RepositoryNotFound,
    SchemaTooNew,
    Unavailable,
)
from lakemount.graveler.model import Branch, Commit, CommitID, MetaRangeID, Repository, StagingToken, Tag
from lakemount.metastore import notify
from lakemount.metastore.fastsql import FastSql
from lakemount.metastore.stamps import NodeStamps
from lakemount.metastore.urls import KEY

if TYPE_CHECKING:
    import sqlalchemy as sa
    from sqlalchemy.engine import Connection, Engine

    from lakemount.metastore.sqlschema import (
        branches_t,
        commits_t,
        hidden_t,
        make_engine,
        meta_t,
        metadata,
        protection_t,
        repos_t,
        staging_live_ix,
        tags_t,
    )

SCHEMA_VERSION: Final = 1
_CHANGED: Final = "lm_changed"  # a write connection's info: the branches its transaction notified
BRANCHES_PER_STATEMENT: Final = 200  # get_branches: 400 parameters, under every SQLite build's limit
# Every table of the schema (tests/metastore/test_fastsql.py checks it against sqlschema.metadata).
TABLES: Final = frozenset({"lm_meta", "lm_repositories", "lm_branches", "lm_tags", "lm_commits", "lm_staging", "lm_protection", "lm_hidden_branches"})
# Indexes a database made before them gains at start (``create_all`` adds an index only with its table).
INDEXES: Final = frozenset({"lm_staging_live"})
_SCHEMA_NAMES: Final = frozenset(
    {"branches_t", "hidden_t", "commits_t", "make_engine", "meta_t", "metadata", "protection_t", "repos_t", "tags_t", "sa"}
)

_load_lock = threading.Lock()
_T = TypeVar("_T")


def _load_sqlalchemy() -> None:
    """Bind ``sa`` and the tables of :mod:`lakemount.metastore.sqlschema` in this module, once.

    The methods that build SQLAlchemy statements refer to them as module
    globals; each reaches them through ``SqlRefStore.engine``, which calls this first.
    """
    if "sa" in globals():
        return
    with _load_lock:
        if "sa" in globals():
            return
        import sqlalchemy

        from lakemount.metastore import sqlschema

        globals().update({name: getattr(sqlschema, name) for name in sqlschema.__all__})
        globals()["sa"] = sqlalchemy


def __getattr__(name: str) -> Any:
    """``lakemount.metastore.sql.metadata`` and the other schema names still resolve (loading SQLAlchemy)."""
    if name in _SCHEMA_NAMES:
        _load_sqlalchemy()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _sqlite_path(url: str) -> str | None:
    """The file of a plain ``sqlite:///path`` URL (None for anything else: memory, options, other databases)."""
    if url.startswith("sqlite:///") and "?" not in url and len(url) > len("sqlite:///"):
        return url[len("sqlite:///") :]
    return None


class _CommitRow(NamedTuple):
    """A row of ``lm_commits`` read through FastSql, shaped like SQLAlchemy's rows for ``_commit``."""

    id: str
    parents: str
    metarange_id: str
    metarange_checksum: str
    message: str
    committer: str
    creation_date: float
    metadata: str
    generation: int


def _split(s: str) -> tuple[str, ...]:
    return tuple(p for p in s.split(",") if p)


def branch_from(name: str, commit_id: str, token: str, sealed: str) -> Branch:
    """A ``Branch`` from the columns of its ``lm_branches`` row (a statement of another store may read them too)."""
    return Branch(name, CommitID(commit_id), StagingToken(token), tuple(StagingToken(t) for t in _split(sealed)))


def _lost(exc: sa.exc.DBAPIError) -> bool:
    """Whether ``exc`` says the database did not answer (unreachable, or the connection died), not that it refused a statement."""
    return isinstance(exc, (sa.exc.OperationalError, sa.exc.InterfaceError)) or exc.connection_invalidated


class SqlRefStore:
    """The ref store of every repository in one SQL database."""

    def __init__(self, engine: Engine | str, *, stamps: NodeStamps | None = None) -> None:
        """A store on ``engine`` (or a database URL); creates the schema if missing.

        ``stamps``: where this node's processes see each other's branch changes
        (:mod:`~lakemount.metastore.stamps`); by default this process alone.
        Raises ``InvalidArgument`` for a bad URL, ``SchemaTooNew`` for a database
        written by a newer lakemount and ``Unavailable`` when it cannot be reached.
        """
        self.stamps = stamps if stamps is not None else NodeStamps(None)
        self._commit_cache: OrderedDict[tuple[str, str], Commit] = OrderedDict()
        self._token_drops: dict[str, Callable[[Connection, list[str]], None]] = {}
        self._lock = threading.Lock()
        self._engine: Engine | None = None
        path = _sqlite_path(engine) if isinstance(engine, str) else None
        if isinstance(engine, str) and path is not None:
            self._url = engine
            self.dialect = "sqlite"
            self._fast = FastSql.sqlite(path)
        else:
            _load_sqlalchemy()
            self._engine = make_engine(engine) if isinstance(engine, str) else engine
            self.dialect = self._engine.dialect.name
            self._fast = FastSql(self._engine)
        self.sender = uuid.uuid4().hex[:12]  # names this process in change notices
        self.pacer = notify.Pacer(self._send_paced)  # this process's staging notices, paced per branch (PostgreSQL)
        self.where = self._fast.where  # the server (or SQLite file), for messages
        if path is None or not os.path.exists(path) or not self._schema_ready():
            self._init_schema()

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine; built, and SQLAlchemy imported, on first use."""
        if self._engine is None:
            with self._lock:
                if self._engine is None:
                    _load_sqlalchemy()
                    self._engine = make_engine(self._url)
        return self._engine

    def _schema_ready(self) -> bool:
        """Whether every table and the schema version are in place (SQLite, through FastSql).

        Raises ``SchemaTooNew`` like ``_init_schema``.
        """
        found = {row[0] for row in self._query("SELECT name FROM sqlite_master WHERE type IN ('table', 'index')", ())}
        if not TABLES | INDEXES <= found:
            return False
        rows = self._query("SELECT value FROM lm_meta WHERE key = 'schema_version'", ())
        if not rows:
            return False
        if int(rows[0][0]) > SCHEMA_VERSION:
            raise SchemaTooNew(int(rows[0][0]), SCHEMA_VERSION)
        return True

    # -- plumbing ----------------------------------------------------------------
    @contextmanager
    def _write(self) -> Iterator[Connection]:
        # Never repeated: whether a write whose connection died applied is unknown.
        changed: list[tuple[str, str]] = []
        try:
            with self.engine.connect().execution_options(lm_write=True) as conn:
                conn.info[_CHANGED] = changed  # what ``_notify`` names, stamped once committed
                try:
                    with conn.begin():
                        yield conn
                finally:
                    del conn.info[_CHANGED]
        except sa.exc.DBAPIError as exc:
            if not _lost(exc):
                raise
            raise Unavailable(self._fast.message(exc)) from exc
        for repo, branch in changed:
            self.changed(repo, branch)

    def _select(self, work: Callable[[Connection], _T]) -> _T:
        """``work(conn)`` in a read transaction; raises ``Unavailable`` when the database cannot answer.

        The pool pings a connection before handing it out, but a server that
        dies during the transaction breaks it there: a read is safe to repeat,
        so it runs once more on a fresh connection.
        """
        for again in (True, False):
            try:
                with self.engine.connect() as conn, conn.begin():
                    return work(conn)
            except sa.exc.DBAPIError as exc:
                if not _lost(exc):
                    raise
                if not again:
                    raise Unavailable(self._fast.message(exc)) from exc
        raise AssertionError("unreachable")

    def _notify(self, conn: Connection, kind: str, repo: str, branch: str) -> None:
        """Tell listening nodes (PostgreSQL) that ``repo``/``branch`` changed, when ``conn``'s transaction
        commits; this node's processes learn it from its stamp (``_write`` stamps it after the commit)."""
        if self.dialect == "postgresql":
            conn.execute(sa.select(sa.func.pg_notify(notify.CHANNEL, notify.payload(self.sender, kind, repo, branch))))
        conn.info[_CHANGED].append((repo, branch))

    def _send_paced(self, repo: str, branch: str, detail: str, notice: notify.Notice) -> None:
        """One paced staging notice of ``repo``/``branch`` naming ``detail`` (what :class:`notify.Pacer` owes), alone."""
        text = notify.payload(self.sender, notify.STAGING, repo, branch, notice=notice) + (f"\t{detail}" if detail else "")
        self._fast.run(lambda cur: cur.execute("SELECT pg_notify(%s, %s)", (notify.CHANNEL, text)), retry=True)

    def changed(self, repo: str, branch: str, *, alone: bool = True) -> None:
        """Stamp ``repo``/``branch`` as changed by this node (see :mod:`~lakemount.metastore.stamps`).

        Called after every committed transaction that changed a branch (one that sends a change
        notice on PostgreSQL), before the change is acknowledged, on every database: a mount keeps
        the listing of a directory it writes into while the stamps show no change but its own
        (``lakemount.fuse.stamps``).  ``alone``: the transaction held only the calling thread's
        change (False for a group commit of several writers: then no thread records the stamp as its own).
        """
        self.stamps.stamp(repo, branch, record=alone)

    def stamp_of(self, repo: str, branch: str) -> int:
        """The node's stamp of ``repo``/``branch`` now: note it before a read you keep (``changed``)."""
        return self.stamps.of(repo, branch)

    def slot_stamp(self, repo: str, branch: str) -> tuple[int, int]:
        """``(slot, stamp)`` of ``repo``/``branch`` now (``NodeStamps.slot_stamp``)."""
        return self.stamps.slot_stamp(repo, branch)

    def recording(self) -> AbstractContextManager[list[tuple[int, int, int]]]:
        """The stamps the calling thread's changes write inside the block (``NodeStamps.recording``)."""
        return self.stamps.recording()

    def listen(self, callback: notify.Callback) -> notify.Listener | None:
        """Start a thread calling ``callback`` with branch changes made by any process (PostgreSQL).

        Returns the running listener (stop it with ``stop()``), or ``None`` where
        the database has no notification (SQLite: rely on polling).  It listens while the process uses what
        notices keep true (its ``use()``, stop 56), ``notify.IDLE_S`` at least since the last use on the host.
        """
        if self.dialect != "postgresql" or self.engine.driver != "psycopg2":
            return None
        return notify.Listener(self.engine.url, callback, idle=notify.IDLE_S).start()

    # Hot paths (branch heads, staged lookups, staging writes) go through FastSql.
    def _raw(self) -> Any:
        return self._fast.connection()

    def _sql(self, text: str) -> str:
        return self._fast.sql(text)

    def _query(self, text: str, params: Sequence[Any]) -> list[Any]:
        return self._fast.query(text, params)

    def _init_schema(self) -> None:
        try:
            self._create_schema()
        except (sa.exc.ProgrammingError, sa.exc.DatabaseError) as exc:
            if isinstance(exc, (sa.exc.OperationalError, sa.exc.InterfaceError)):
                raise
            raise Unavailable(f"{self._fast.message(exc)} (creating the schema; check the rights of the user in {KEY})") from exc

    def _create_schema(self) -> None:
        with self._write() as conn:
            metadata.create_all(conn)
            staging_live_ix.create(conn, checkfirst=True)
            row = conn.execute(sa.select(meta_t.c.value).where(meta_t.c.key == "schema_version")).first()
            if row is None:
                conn.execute(meta_t.insert().values(key="schema_version", value=str(SCHEMA_VERSION)))
            elif int(row[0]) > SCHEMA_VERSION:
                raise SchemaTooNew(int(row[0]), SCHEMA_VERSION)

    def drop_with_repository(self, table: str, drop: Callable[[Connection, list[str]], None]) -> None:
        """Have ``delete_repository`` call ``drop(conn, tokens)`` in its transaction with the staging tokens of
        the repository's branches, for what another store keeps per token in ``table`` (one drop per table).

        A staged write holds its branch row (``FOR SHARE``, or SQLite's write lock) while it inserts, so
        its rows either land before the deletion and go with it, or find no branch: none is left behind.
        """
        self._token_drops[table] = drop

    # -- repositories --------------------------------------------------------------
    def create_repository(self, repo: Repository, branch: Branch, commit: Commit) -> None:
        try:
            with self._write() as conn:
                if conn.execute(sa.select(repos_t.c.name).where(repos_t.c.name == repo.name)).first():
                    raise AlreadyExists(f"repository already exists: {repo.name}")
                conn.execute(
                    repos_t.insert().values(
                        name=repo.name,
                        storage_namespace=repo.storage_namespace,
                        default_branch=repo.default_branch,
                        creation_date=repo.creation_date,
                    )
                )
                conn.execute(commits_t.insert().values(**self._commit_row(repo.name, commit)))
                conn.execute(branches_t.insert().values(**self._branch_row(repo.name, branch)))
        except sa.exc.IntegrityError as exc:
            raise AlreadyExists(f"repository already exists: {repo.name}") from exc

    def get_repository(self, name: str) -> Repository:
        rows = self._query(
            "SELECT storage_namespace, default_branch, creation_date FROM lm_repositories WHERE name = ?", (name,)
        )
        if not rows:
            raise RepositoryNotFound(name)
        ns, default_branch, created = rows[0]
        return Repository(name, ns, default_branch, created)

    def list_repositories(self) -> list[Repository]:
        rows = self._select(lambda conn: conn.execute(sa.select(repos_t).order_by(repos_t.c.name)).all())
        return [Repository(r.name, r.storage_namespace, r.default_branch, r.creation_date) for r in rows]

    def delete_repository(self, name: str) -> None:
        with self._write() as conn:
            if conn.execute(repos_t.delete().where(repos_t.c.name == name)).rowcount == 0:
                raise RepositoryNotFound(name)
            rows = conn.execute(
                sa.select(branches_t.c.name, branches_t.c.staging_token, branches_t.c.sealed_tokens).where(branches_t.c.repo == name)
            ).all()
            tokens = [t for row in rows for t in (row.staging_token, *_split(row.sealed_tokens))]
            if tokens:
                for drop in self._token_drops.values():
                    drop(conn, tokens)
            for t in (branches_t, hidden_t, tags_t, commits_t, protection_t):
                conn.execute(t.delete().where(t.c.repo == name))
            for row in rows:  # every branch is gone: mounts drop what they cache of it now
                self._notify(conn, notify.HEAD, name, row.name)
        self.stamps.stamp(name, "")  # the record: processes of this node that keep it drop it now (catalog/kept.py)
        with self._lock:
            for k in [k for k in self._commit_cache if k[0] == name]:
                del self._commit_cache[k]

    # -- branches ------------------------------------------------------------------
    @staticmethod
    def _branch_row(repo: str, b: Branch) -> dict[str, Any]:
        return {
            "repo": repo,
            "name": b.name,
            "commit_id": b.commit_id,
            "staging_token": b.staging_token,
            "sealed_tokens": ",".join(b.sealed_tokens),
        }

    @staticmethod
    def _branch(row: Any) -> Branch:
        return branch_from(row.name, row.commit_id, row.staging_token, row.sealed_tokens)

    def _require_repo(self, conn: Connection, repo: str) -> None:
        if conn.execute(sa.select(repos_t.c.name).where(repos_t.c.name == repo)).first() is None:
            raise RepositoryNotFound(repo)

    def get_branch(self, repo: str, name: str) -> Branch:
        rows = self._query(
            "SELECT commit_id, staging_token, sealed_tokens FROM lm_branches WHERE repo = ? AND name = ?", (repo, name)
        )
        if not rows:
            if not self._query("SELECT 1 FROM lm_repositories WHERE name = ?", (repo,)):
                raise RepositoryNotFound(repo)
            raise BranchNotFound(repo, name)
        cid, token, sealed = rows[0]
        return branch_from(name, cid, token, sealed)

    def get_branches(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Branch]:
        # One statement for up to BRANCHES_PER_STATEMENT branches: a mount's
        # head poll asks for every branch it watches at once.
        found: dict[tuple[str, str], Branch] = {}
        wanted = list(dict.fromkeys(keys))
        for i in range(0, len(wanted), BRANCHES_PER_STATEMENT):
            chunk = wanted[i:i + BRANCHES_PER_STATEMENT]
            where = " OR ".join(["(repo = ? AND name = ?)"] * len(chunk))
            params = [v for key in chunk for v in key]
            for repo, name, cid, token, sealed in self._query(
                f"SELECT repo, name, commit_id, staging_token, sealed_tokens FROM lm_branches WHERE {where}", params
            ):
                found[(repo, name)] = branch_from(name, cid, token, sealed)
        return found

    def list_branches(self, repo: str) -> list[Branch]:
        def select(conn: Connection) -> Sequence[Any]:
            self._require_repo(conn, repo)
            rows = conn.execute(sa.select(branches_t).where(branches_t.c.repo == repo).order_by(branches_t.c.name)).all()
            hidden = {r.name for r in conn.execute(sa.select(hidden_t.c.name).where(hidden_t.c.repo == repo))}
            return rows, hidden

        rows, hidden = self._select(select)
        return [dataclasses.replace(b, hidden=True) if b.name in hidden else b for b in map(self._branch, rows)]

    def create_branch(self, repo: str, branch: Branch) -> None:
        try:
            with self._write() as conn:
                self._require_repo(conn, repo)
                if conn.execute(
                    sa.select(branches_t.c.name).where(branches_t.c.repo == repo, branches_t.c.name == branch.name)
                ).first():
                    raise AlreadyExists(f"branch already exists: {repo}/{branch.name}")
                conn.execute(branches_t.insert().values(**self._branch_row(repo, branch)))
                if branch.hidden:
                    conn.execute(hidden_t.insert().values(repo=repo, name=branch.name))
                self._notify(conn, notify.HEAD, repo, branch.name)
        except sa.exc.IntegrityError as exc:
            raise AlreadyExists(f"branch already exists: {repo}/{branch.name}") from exc

    def delete_branch(self, repo: str, name: str) -> Branch:
        with self._write() as conn:
            row = conn.execute(
                sa.select(branches_t).where(branches_t.c.repo == repo, branches_t.c.name == name)
            ).first()
            if row is None:
                self._require_repo(conn, repo)
                raise BranchNotFound(repo, name)
            conn.execute(branches_t.delete().where(branches_t.c.repo == repo, branches_t.c.name == name))
            conn.execute(hidden_t.delete().where(hidden_t.c.repo == repo, hidden_t.c.name == name))
            self._notify(conn, notify.HEAD, repo, name)
        return self._branch(row)

    def cas_branch(self, repo: str, expected: Branch, new: Branch) -> bool:
        if self.dialect == "sqlite":  # no change notice to send: FastSql, and a CLI commit loads no SQLAlchemy
            sql = self._sql(
                "UPDATE lm_branches SET commit_id = ?, staging_token = ?, sealed_tokens = ?"
                " WHERE repo = ? AND name = ? AND commit_id = ? AND staging_token = ? AND sealed_tokens = ?")
            values = (new.commit_id, new.staging_token, ",".join(new.sealed_tokens), repo, expected.name,
                      expected.commit_id, expected.staging_token, ",".join(expected.sealed_tokens))
            return bool(self._fast.run(lambda cur: cur.execute(sql, values).rowcount == 1, transaction=True))
        with self._write() as conn:
            res = conn.execute(
                branches_t.update()
                .where(
                    branches_t.c.repo == repo,
                    branches_t.c.name == expected.name,
                    branches_t.c.commit_id == expected.commit_id,
                    branches_t.c.staging_token == expected.staging_token,
                    branches_t.c.sealed_tokens == ",".join(expected.sealed_tokens),
                )
                .values(
                    commit_id=new.commit_id,
                    staging_token=new.staging_token,
                    sealed_tokens=",".join(new.sealed_tokens),
                )
            )
            if res.rowcount != 1:
                return False
            self._notify(conn, notify.HEAD, repo, expected.name)
            return True

    # -- tags ----------------------------------------------------------------------
    def create_tag(self, repo: str, tag: Tag) -> None:
        try:
            with self._write() as conn:
                self._require_repo(conn, repo)
                if conn.execute(sa.select(tags_t.c.name).where(tags_t.c.repo == repo, tags_t.c.name == tag.name)).first():
                    raise AlreadyExists(f"tag already exists: {repo}/{tag.name}")
                conn.execute(tags_t.insert().values(repo=repo, name=tag.name, commit_id=tag.commit_id))
        except sa.exc.IntegrityError as exc:
            raise AlreadyExists(f"tag already exists: {repo}/{tag.name}") from exc

    def get_tag(self, repo: str, name: str) -> Tag:
        rows = self._query("SELECT commit_id FROM lm_tags WHERE repo = ? AND name = ?", (repo, name))
        if not rows:
            raise NotFound(f"tag not found: {repo}/{name}")
        return Tag(name, CommitID(rows[0][0]))

    def list_tags(self, repo: str) -> list[Tag]:
        rows = self._select(lambda conn: conn.execute(sa.select(tags_t).where(tags_t.c.repo == repo).order_by(tags_t.c.name)).all())
        return [Tag(r.name, CommitID(r.commit_id)) for r in rows]

    def delete_tag(self, repo: str, name: str) -> None:
        with self._write() as conn:
            if conn.execute(tags_t.delete().where(tags_t.c.repo == repo, tags_t.c.name == name)).rowcount == 0:
                self._require_repo(conn, repo)
                raise NotFound(f"tag not found: {repo}/{name}")

    # -- commits -------------------------------------------------------------------
    @staticmethod
    def _commit_row(repo: str, c: Commit) -> dict[str, Any]:
        return {
            "repo": repo,
            "id": c.id,
            "parents": ",".join(c.parents),
            "metarange_id": c.metarange_id,
            "metarange_checksum": c.metarange_checksum,
            "message": c.message,
            "committer": c.committer,
            "creation_date": c.creation_date,
            "metadata": json.dumps(dict(c.metadata), sort_keys=True),
            "generation": c.generation,
        }

    @staticmethod
    def _commit(row: Any) -> Commit:
        return Commit(
            CommitID(row.id),
            tuple(CommitID(p) for p in _split(row.parents)),
            MetaRangeID(row.metarange_id),
            row.metarange_checksum,
            row.message,
            row.committer,
            row.creation_date,
            tuple(sorted(json.loads(row.metadata).items())),
            row.generation,
        )

    def put_commit(self, repo: str, commit: Commit) -> None:
        if self.dialect == "sqlite":  # as cas_branch: the two writes of a commit go through FastSql there
            row = self._commit_row(repo, commit)
            sql = self._sql(f"INSERT INTO lm_commits ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})"
                            " ON CONFLICT (repo, id) DO NOTHING")
            self._fast.run(lambda cur: cur.execute(sql, tuple(row.values())), transaction=True)
            return
        with self._write() as conn:
            exists = conn.execute(
                sa.select(commits_t.c.id).where(commits_t.c.repo == repo, commits_t.c.id == commit.id)
            ).first()
            if not exists:
                conn.execute(commits_t.insert().values(**self._commit_row(repo, commit)))

    def get_commit(self, repo: str, commit_id: str) -> Commit:
        key = (repo, commit_id)
        with self._lock:
            c = self._commit_cache.get(key)
        if c is not None:
            return c
        rows = self._query(
            "SELECT id, parents, metarange_id, metarange_checksum, message, committer, creation_date, metadata, generation "
            "FROM lm_commits WHERE repo = ? AND id = ?",
            (repo, commit_id),
        )
        if not rows:
            raise CommitNotFound(repo, commit_id)
        c = self._commit(_CommitRow(*rows[0]))
        with self._lock:
            self._commit_cache[key] = c
            if len(self._commit_cache) > 100_000:
                self._commit_cache.popitem(last=False)
        return c

    def commits_with_prefix(self, repo: str, prefix: str, limit: int = 2) -> list[CommitID]:
        rows = self._query(
            f"SELECT id FROM lm_commits WHERE repo = ? AND id >= ? AND id < ? ORDER BY id LIMIT {int(limit)}",
            (repo, prefix, prefix + "g"),
        )
        return [CommitID(r[0]) for r in rows]

    def list_commits(self, repo: str) -> Iterator[Commit]:
        rows = self._select(lambda conn: conn.execute(sa.select(commits_t).where(commits_t.c.repo == repo).order_by(commits_t.c.id)).all())
        for r in rows:
            yield self._commit(r)

    # -- protection ----------------------------------------------------------------
    def get_protection(self, repo: str) -> list[str]:
        """The patterns of ``repo``, sorted; raises ``RepositoryNotFound``.  One statement (one snapshot) reads the
        repository's row with them: a write's check of the rules is one read, not two."""
        rows = self._query(
            "SELECT 0, NULL FROM lm_repositories WHERE name = ? UNION ALL SELECT 1, pattern FROM lm_protection WHERE repo = ?",
            (repo, repo),
        )
        if not any(r[0] == 0 for r in rows):
            raise RepositoryNotFound(repo)
        return sorted(r[1] for r in rows if r[0] == 1)

    def set_protection(self, repo: str, patterns: list[str]) -> None:
        with self._write() as conn:
            self._require_repo(conn, repo)
            conn.execute(protection_t.delete().where(protection_t.c.repo == repo))
            if patterns:
                conn.execute(protection_t.insert(), [{"repo": repo, "pattern": p} for p in patterns])
            self._notify(conn, notify.RULES, repo, "")
        self.stamps.stamp(repo, "")  # this node's processes that keep the rules drop them now (catalog/kept.py)

    def swap_protection(
        self, repo: str, patterns: list[str], approvals: dict[str, int],
        check: Callable[[list[str], dict[str, int]], None],
    ) -> None:
        """Replace the protection patterns of ``repo`` and the approvals pull requests need
        (``lm_pull_approval_rules``, pattern -> count; counts below 1 are dropped) in one write
        transaction, after ``check(patterns, approvals)`` saw the current ones: it raises to refuse.

        The transaction holds the database's write lock (SQLite, ``BEGIN IMMEDIATE``) or the
        repository's row lock (PostgreSQL, ``FOR UPDATE``) from the read to the commit, so of two
        writers that expect the same rules exactly one passes ``check``.  The pull request tables
        must exist (``SqlPullStore`` creates them).  Raises ``RepositoryNotFound``, what ``check`` raises.
        """
        from lakemount.metastore.pulls import rules_t

        with self._write() as conn:
            lock = sa.select(repos_t.c.name).where(repos_t.c.name == repo)
            if self.dialect == "postgresql":
                lock = lock.with_for_update()
            if conn.execute(lock).first() is None:
                raise RepositoryNotFound(repo)
            now = [r[0] for r in conn.execute(
                sa.select(protection_t.c.pattern).where(protection_t.c.repo == repo).order_by(protection_t.c.pattern))]
            counts = {r.pattern: r.required for r in conn.execute(sa.select(rules_t).where(rules_t.c.repo == repo))}
            check(now, counts)
            conn.execute(protection_t.delete().where(protection_t.c.repo == repo))
            if patterns:
                conn.execute(protection_t.insert(), [{"repo": repo, "pattern": p} for p in patterns])
            conn.execute(rules_t.delete().where(rules_t.c.repo == repo))
            wanted = [{"repo": repo, "pattern": p, "required": n} for p, n in sorted(approvals.items()) if n > 0]
            if wanted:
                conn.execute(rules_t.insert(), wanted)
            self._notify(conn, notify.RULES, repo, "")
        self.stamps.stamp(repo, "")
