"""``SqlStagingLists``: per staging token, the L1 and L2 lists of staging files (docs/DESIGN.md §4), in one table.

Implements :class:`lakemount.graveler.ports.StagingLists` on the ref store's
database.  A list entry is one row of ``lm_staging_files``; its ``id`` (from
the database's sequence) orders a token's files, newest last.  An append is
one statement that reads the branch's current token under a share lock on the
branch row (PostgreSQL ``FOR SHARE``; SQLite runs one statement at a time), so
a commit's seal cannot slip between reading the token and inserting the file:
the append lands in the token the commit seals, and the commit sees it, or in
the next.  On PostgreSQL the same statement sends the change notice mounts
listen for, carrying the new row and, when the file is small, its bytes
(:meth:`SqlStagingLists.learn` reads them back on the other hosts): a host that
hears of a write serves it without reading the row or fetching the file.
Compaction's compare-and-set is one short transaction.

A small L1 file (``StagingFileInfo.inline``) is not on the block store: its
bytes go into ``lm_staging_inline`` under its row's id, in the append's
statement (PostgreSQL: one more CTE of it; SQLite: the same write transaction),
and go with the row (compaction and drops delete both at once).  Readers read
the bytes by id (:meth:`SqlStagingLists.inline_data`) only for files they have
not cached, never with the list: a list read is ids, as before.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import logging
import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Final, NoReturn, TypeVar

import sqlalchemy as sa

from lakemount.errors import BranchNotFound, PreconditionFailed
from lakemount.graveler.model import Branch, CommitID, StagingToken, prefix_end
from lakemount.graveler.staging.file import StagingFileInfo
from lakemount.metastore import notify
from lakemount.metastore.ddl import create_tables
from lakemount.metastore.fastsql import FastSql
from lakemount.metastore.sql import SqlRefStore

log = logging.getLogger(__name__)

metadata = sa.MetaData()

files_t = sa.Table(
    "lm_staging_files",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True),
    sa.Column("token", sa.String(64), nullable=False, index=True),
    sa.Column("level", sa.SmallInteger, nullable=False),
    sa.Column("url", sa.Text, nullable=False),
    sa.Column("min_key", sa.LargeBinary, nullable=False),
    sa.Column("max_key", sa.LargeBinary, nullable=False),
    sa.Column("count", sa.Integer, nullable=False),
    sa.Column("size", sa.BigInteger, nullable=False),
    sa.Column("checksum", sa.String(64), nullable=False),
    sqlite_autoincrement=True,
)
# The bytes of the inline files among those rows, by row id.  A table of its own, as
# ``lm_hidden_branches`` is (sqlschema.py): a database made before it gains it by ``create_all``
# without touching ``lm_staging_files``, and a list read (ids only) never reads past the bytes.
inline_t = sa.Table(
    "lm_staging_inline",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=False),
    sa.Column("data", sa.LargeBinary, nullable=False),
)

# A row read whole: its columns, and whether its file is inline (has bytes in lm_staging_inline).
_COLS: Final = ("token, level, id, url, min_key, max_key, count, size, checksum, "
                "EXISTS (SELECT 1 FROM lm_staging_inline i WHERE i.id = lm_staging_files.id)")
_IDS: Final = "token, level, id"
KNOWN_MAX: Final = 1 << 16  # list rows remembered by id before starting over
LISTS_MAX: Final = 1024  # token lists kept grouped and ordered, by the ids they hold, before starting over
GONE_MAX: Final = 1 << 12  # the newest row ids and tokens a compaction or a drop deleted, kept to refuse a late remember
# PostgreSQL refuses a NOTIFY payload of 8,000 bytes or more: a notice's detail stays under this budget
# (a one-write file of ~1.2 KB goes whole; a bigger one goes as its row, fetched when read).
NOTICE_MAX: Final = 7_600
# Connections a process's plain appends share, whichever threads flush: a flush is led by whichever writer
# came first, so per-thread connections gave a busy process a backend (and a first-flush connect) per
# writing thread.  Two let a flush that goes beside the one in flight append beside it.
APPEND_CONNECTIONS: Final = 2
_T = TypeVar("_T")


def _info(row: Sequence[Any]) -> StagingFileInfo:
    token, level, seq, url, lo, hi, count, size, digest, inline = row
    return StagingFileInfo(url, int(level), bytes(lo), bytes(hi), int(count), int(size), digest, int(seq),
                           StagingToken(token), bool(inline))


def _split(s: str) -> tuple[StagingToken, ...]:
    return tuple(StagingToken(p) for p in s.split(",") if p)


class SqlStagingLists:
    """The staging file lists of every branch, in the ref store's database."""

    def __init__(self, refs: SqlRefStore) -> None:
        """Lists beside ``refs``'s tables, on its connections; creates the table if missing."""
        self.refs = refs
        self._fast = refs._fast
        self.dialect = refs.dialect
        # A list row never changes once inserted (compaction and drops delete rows and insert new
        # ones, ids are never reused): the rows this process has read or appended are remembered
        # by id, and a read asks the database only which ids a token lists now (one statement,
        # one snapshot), not their keys, URLs and checksums again; rows it has not seen yet (another
        # process's appends) are read whole by id in a second statement.
        self._known: dict[StagingToken, dict[int, StagingFileInfo]] = {}
        self._known_count = 0
        # What a compaction or a drop deleted, newest last: a thread that read or appended a row before
        # the delete may remember it after the delete's forget (an append's insert returns, the compactor
        # lists, merges and deletes that row, then the append's thread runs on), which would keep a row
        # no list holds. The window is one statement's return, so the newest GONE_MAX are enough.
        self._gone_rows: dict[int, None] = {}
        self._gone_tokens: dict[StagingToken, None] = {}
        self._known_lock = threading.Lock()  # remember's check and insert against forget's record and pop
        self._lists: dict[tuple[tuple[StagingToken, ...], tuple[int, ...]], list[StagingFileInfo]] = {}
        self._idle: queue.SimpleQueue[FastSql] = queue.SimpleQueue()
        self._made = 0
        self._made_lock = threading.Lock()
        create_tables(refs.engine, metadata)

    # -- plumbing ----------------------------------------------------------------
    def _sql(self, text: str) -> str:
        return self._fast.sql(text)

    def _remember(self, info: StagingFileInfo) -> StagingFileInfo:
        with self._known_lock:
            if info.seq in self._gone_rows or info.token in self._gone_tokens:
                return info  # deleted meanwhile: never listed again
            if self._known_count >= KNOWN_MAX:
                self._known = {}
                self._known_count = 0
            # Changed in place: a copy per row cost every append of a lone writer, and every notice on
            # each other host, the whole token's history (0.3 ms per append at 20,000 rows); readers
            # only ``get`` by id, which a concurrent insert does not disturb.
            rows = self._known.setdefault(info.token, {})
            if info.seq not in rows:
                rows[info.seq] = info
                self._known_count += 1
        return info

    @staticmethod
    def _gone(gone: dict[Any, None], keys: Sequence[Any]) -> None:
        for key in keys:
            gone[key] = None
        excess = len(gone) - GONE_MAX
        if excess > 0:
            for old in list(itertools.islice(gone, excess)):
                del gone[old]

    def _forget(self, token: StagingToken, seqs: Sequence[int]) -> None:
        """Rows a compaction deleted: never listed again (ids are never reused)."""
        with self._known_lock:
            self._gone(self._gone_rows, seqs)
            rows = self._known.get(token)
            if rows is not None:
                for seq in seqs:
                    if rows.pop(seq, None) is not None:
                        self._known_count -= 1

    def _listed(self, tokens: Sequence[StagingToken], rows: Sequence[Sequence[Any]]) -> list[StagingFileInfo] | None:
        """:meth:`_infos` of ``rows``, :meth:`_grouped` by ``tokens``: the same rows (no change to the
        lists since) give the same list, kept from the last time (a warm lookup builds nothing)."""
        key = (tuple(tokens), tuple(r[2] for r in rows))
        got = self._lists.get(key)
        if got is None:
            infos = self._infos(rows)
            if infos is None:
                return None
            got = self._grouped(tokens, infos)
            if len(self._lists) >= LISTS_MAX:
                self._lists = {}
            self._lists[key] = got
        return list(got)

    def _infos(self, rows: Sequence[Sequence[Any]]) -> list[StagingFileInfo] | None:
        """The files of (token, level, id) ``rows``: remembered ones from memory, the others read by
        id in one more statement; None if one of those is gone meanwhile (a compaction or a drop
        deleted it after the rows were read: the caller reads the lists again)."""
        known = self._known
        infos: list[StagingFileInfo] = []
        missing: list[int] = []
        for token, _level, seq in rows:
            info = known.get(token, {}).get(seq)
            if info is None:
                missing.append(int(seq))
            else:
                infos.append(info)
        if missing:
            marks = ",".join("?" * len(missing))
            got = self._fast.query(f"SELECT {_COLS} FROM lm_staging_files WHERE id IN ({marks})", missing)
            if len(got) != len(missing):
                return None
            infos += [self._remember(_info(r)) for r in got]
        return infos

    # -- appends -----------------------------------------------------------------
    def _appending(self, work: Callable[[Any], _T], transaction: bool) -> _T:
        """``work`` on one of the process's ``APPEND_CONNECTIONS`` append connections (waiting for one)."""
        try:
            fast = self._idle.get_nowait()
        except queue.Empty:
            with self._made_lock:
                make = self._made < APPEND_CONNECTIONS
                self._made += make
            fast = self._fast.detached() if make else self._idle.get()
        try:
            return fast.run(work, transaction=transaction)
        finally:
            self._idle.put(fast)

    def append(
        self, repo: str, branch: str, namespace: str, info: StagingFileInfo,
        check: Callable[[Branch], None] | None = None, data: bytes | None = None,
    ) -> tuple[StagingToken, int]:
        inline = _inline_bytes(info, data)
        if check is not None:
            return self._append_checked(repo, branch, namespace, info, check, inline)
        values = (info.url, info.min_key, info.max_key, info.count, info.size, info.checksum)
        postgres = self.dialect == "postgresql"
        # Every listening backend runs a transaction per notice it is woken by: appends' notices are paced as
        # ``sql`` stagings' are (``notify.Pacer``); one that sends none owes the branch's next one.
        send = self.refs.pacer.inline(repo, branch) if postgres else None
        if postgres:
            # The notice ends with the new row's token and id (known only inside the statement) and
            # the rest of its row (and bytes), see ``learn``.
            head = notify.payload(self.refs.sender, notify.STAGING, repo, branch, notice=send)
            detail = _detail(info, data, NOTICE_MAX - len(head.encode()))
            text = (
                "WITH b AS (SELECT br.staging_token FROM lm_branches br JOIN lm_repositories r ON r.name = br.repo "
                "WHERE br.repo = %s AND br.name = %s AND r.storage_namespace = %s FOR SHARE OF br), "
                "ins AS (INSERT INTO lm_staging_files (token, level, url, min_key, max_key, count, size, checksum) "
                "SELECT staging_token, 1, %s, %s, %s, %s, %s, %s FROM b RETURNING token, id) "
                # An inline file's bytes go in with its row: still one statement.
                + (", dat AS (INSERT INTO lm_staging_inline (id, data) SELECT id, %s FROM ins) " if inline is not None else "")
                # The count sees the token's rows as of the statement's start: the new one is the + 1.
                + "SELECT token, 1 + (SELECT count(*) FROM lm_staging_files f WHERE f.token = ins.token AND f.level = 1), "
                "id, " + ("pg_notify(%s, " + ("%s || ins.token || ' ' || ins.id || ' ' || %s" if detail else "%s") + ")"
                          if send else "NULL") + " FROM ins"
            )
            params: tuple[Any, ...] = (
                repo, branch, namespace, *values, *(() if inline is None else (inline,)),
                *((notify.CHANNEL, *((head + "\t", detail) if detail else (head,))) if send else ()),
            )
        else:
            text = (
                "INSERT INTO lm_staging_files (token, level, url, min_key, max_key, count, size, checksum) "
                "SELECT br.staging_token, 1, ?, ?, ?, ?, ?, ? FROM lm_branches br JOIN lm_repositories r ON r.name = br.repo "
                "WHERE br.repo = ? AND br.name = ? AND r.storage_namespace = ? RETURNING token, "
                "1 + (SELECT count(*) FROM lm_staging_files f WHERE f.token = lm_staging_files.token AND f.level = 1 "
                "AND f.id < lm_staging_files.id), id"
            )
            params = (*values, repo, branch, namespace)

        def work(cur: Any) -> list[Any]:
            cur.execute(text, params)
            rows = list(cur.fetchall())
            if rows and inline is not None and self.dialect != "postgresql":
                cur.execute("INSERT INTO lm_staging_inline (id, data) VALUES (?, ?)", (rows[0][2], inline))
            return rows

        # SQLite: an inline file's row and bytes are two statements, in one write transaction.
        try:
            rows = self._appending(work, transaction=inline is not None and self.dialect != "postgresql")
        except BaseException:
            if send:
                self.refs.pacer.failed(repo, branch)
            elif postgres:
                self.refs.pacer.owe(repo, branch, _dirs(info))  # it may have committed; and the pacer counts it held until owed
            raise
        if send and not rows:
            self.refs.pacer.failed(repo, branch)  # no row inserted: the notice never went
        if postgres and not send:
            self.refs.pacer.owe(repo, branch, _dirs(info))  # no row inserted: a notice of nothing, but the hold ends
        if rows:
            self.refs.changed(repo, branch, alone=False)  # before the flush's writes (of any writer) are acknowledged
            token = StagingToken(rows[0][0])
            self._remember(replace(info, level=1, seq=int(rows[0][2]), token=token))
            return token, int(rows[0][1])
        return self._missing(repo, branch, namespace)

    def _missing(self, repo: str, branch: str, namespace: str) -> NoReturn:
        """Raise why an append found no branch row: gone, or its repository created again elsewhere."""
        self.refs.get_branch(repo, branch)  # raises RepositoryNotFound/BranchNotFound
        if self.refs.get_repository(repo).storage_namespace != namespace:
            raise PreconditionFailed(f"repository {repo} was created again with another storage namespace")
        raise BranchNotFound(repo, branch)

    def learn(self, detail: str) -> tuple[StagingFileInfo, bytes | None] | None:
        """The file another process appended, from its change notice's ``detail``: its row is
        remembered (a read of the list then needs no second statement for it), and its bytes are
        returned when the notice carried them.  None for a detail this version cannot read."""
        try:
            token, seq, rest = detail.split(" ", 2)
            d = json.loads(rest)
            info = StagingFileInfo(d["url"], 1, bytes.fromhex(d["min"]), bytes.fromhex(d["max"]), int(d["count"]),
                                   int(d["size"]), d["checksum"], int(seq), StagingToken(token), bool(d.get("inline")))
            data = base64.b64decode(d["data"], validate=True) if "data" in d else None
        except (ValueError, KeyError, TypeError, binascii.Error) as exc:
            log.debug("staging notice not understood: %s", exc)
            return None
        return self._remember(info), data

    def _append_checked(
        self, repo: str, branch: str, namespace: str, info: StagingFileInfo, check: Callable[[Branch], None],
        inline: bytes | None,
    ) -> tuple[StagingToken, int]:
        # The branch row locked FOR UPDATE waits out plain appends (FOR SHARE), commits' swaps and
        # other checked appends; on SQLite, BEGIN IMMEDIATE holds the one write lock.  The check's
        # file lookups use this thread's connection, hence this transaction.
        lock = " FOR UPDATE OF br" if self.dialect == "postgresql" else ""
        select = self._sql(
            "SELECT br.staging_token, br.commit_id, br.sealed_tokens FROM lm_branches br "
            "JOIN lm_repositories r ON r.name = br.repo WHERE br.repo = ? AND br.name = ? AND r.storage_namespace = ?"
            + lock
        )
        insert = self._sql(
            "INSERT INTO lm_staging_files (token, level, url, min_key, max_key, count, size, checksum) "
            "VALUES (?, 1, ?, ?, ?, ?, ?, ?) RETURNING id"
        )

        count = self._sql("SELECT count(*) FROM lm_staging_files WHERE token = ? AND level = 1")

        def work(cur: Any) -> tuple[StagingToken, int] | None:
            cur.execute(select, (repo, branch, namespace))
            row = cur.fetchone()
            if row is None:
                return None
            token = StagingToken(row[0])
            check(Branch(branch, CommitID(row[1]), token, _split(row[2])))
            cur.execute(insert, (token, info.url, info.min_key, info.max_key, info.count, info.size, info.checksum))
            self._put_inline(cur, int(cur.fetchone()[0]), inline)
            if send:
                cur.execute("SELECT pg_notify(%s, %s)",
                            (notify.CHANNEL, notify.payload(self.refs.sender, notify.STAGING, repo, branch, notice=send)))
            cur.execute(count, (token,))
            return token, int(cur.fetchone()[0])

        postgres = self.dialect == "postgresql"
        send = self.refs.pacer.inline(repo, branch) if postgres else None  # paced as a plain append's notice (``append``)
        try:
            found = self._fast.run(work, transaction=True)
        except BaseException:
            if send:
                self.refs.pacer.failed(repo, branch)
            elif postgres:
                self.refs.pacer.owe(repo, branch, _dirs(info))  # it may have committed; and the pacer counts it held until owed
            raise
        if found is None:
            if send:
                self.refs.pacer.failed(repo, branch)
            elif postgres:
                self.refs.pacer.owe(repo, branch, _dirs(info))  # nothing staged, but the hold ends
            self._missing(repo, branch, namespace)
        if postgres and not send:
            self.refs.pacer.owe(repo, branch, _dirs(info))
        self.refs.changed(repo, branch)
        return found

    def _put_inline(self, cur: Any, seq: int, inline: bytes | None) -> None:
        """In a write transaction on ``cur``: the bytes of the inline file just appended as row ``seq``."""
        if inline is not None:
            cur.execute(self._sql("INSERT INTO lm_staging_inline (id, data) VALUES (?, ?)"), (seq, inline))

    def append_to_token(self, token: StagingToken, info: StagingFileInfo, data: bytes | None = None) -> None:
        inline = _inline_bytes(info, data)
        text = self._sql(
            "INSERT INTO lm_staging_files (token, level, url, min_key, max_key, count, size, checksum) "
            "VALUES (?, 1, ?, ?, ?, ?, ?, ?) RETURNING id"
        )
        params = (token, info.url, info.min_key, info.max_key, info.count, info.size, info.checksum)

        def work(cur: Any) -> list[tuple[str, str]]:
            cur.execute(text, params)
            self._put_inline(cur, int(cur.fetchone()[0]), inline)
            # A partial reset of a branch's live token is a staging change: tell mounts, as an append does
            # (its stamp on every database, a notice on PostgreSQL).
            cur.execute(self._sql("SELECT repo, name FROM lm_branches WHERE staging_token = ?"), (token,))
            owners = list(cur.fetchall())
            if self.dialect == "postgresql":
                for repo, branch in owners:
                    cur.execute("SELECT pg_notify(%s, %s)",
                                (notify.CHANNEL, notify.payload(self.refs.sender, notify.STAGING, repo, branch)))
            return owners

        for repo, branch in self._fast.run(work, transaction=True):
            self.refs.changed(repo, branch)

    # -- reads -------------------------------------------------------------------
    @staticmethod
    def _where(tokens: Sequence[StagingToken], start: bytes, stop: bytes | None) -> tuple[str, list[Any]]:
        marks = ",".join("?" * len(tokens))
        text = f"token IN ({marks}) AND max_key >= ?"
        params: list[Any] = [*tokens, start]
        if stop is not None:
            text += " AND min_key <= ?"
            params.append(stop)
        return text, params

    @staticmethod
    def _grouped(tokens: Sequence[StagingToken], infos: list[StagingFileInfo]) -> list[StagingFileInfo]:
        """Files grouped by token in the order of ``tokens``, each group L1 newest first, then L2."""
        order = {t: i for i, t in enumerate(tokens)}
        return sorted(infos, key=lambda f: (order.get(f.token, len(order)), f.level, -f.seq))

    def files(self, tokens: Sequence[StagingToken], start: bytes = b"", stop: bytes | None = None) -> list[StagingFileInfo]:
        if not tokens:
            return []
        where, params = self._where(tokens, start, stop)
        while True:
            infos = self._listed(tokens, self._fast.query(f"SELECT {_IDS} FROM lm_staging_files WHERE {where}", params))
            if infos is not None:
                return infos

    def branch_files(
        self, repo: str, name: str, tokens: Sequence[StagingToken], start: bytes = b"", stop: bytes | None = None
    ) -> tuple[Branch, list[StagingFileInfo]]:
        # One statement (one snapshot): the branch row and the ids of the tokens' file rows.
        if tokens:
            where, params = self._where(tokens, start, stop)
            rest = f" UNION ALL SELECT 1, NULL, NULL, NULL, {_IDS} FROM lm_staging_files WHERE {where}"
        else:
            rest, params = "", []
        while True:
            rows = self._fast.query(
                "SELECT 0, commit_id, staging_token, sealed_tokens, NULL, NULL, NULL "
                "FROM lm_branches WHERE repo = ? AND name = ?" + rest,
                [repo, name, *params],
            )
            branch: Branch | None = None
            ids: list[Any] = []
            for r in rows:
                if r[0] == 0:
                    branch = Branch(name, CommitID(r[1]), StagingToken(r[2]), _split(r[3]))
                else:
                    ids.append(r[4:])
            infos = self._listed(tokens, ids)
            if infos is not None:
                break
        if branch is None:
            branch = self.refs.get_branch(repo, name)  # raises BranchNotFound or RepositoryNotFound
        return branch, infos

    def inline_data(self, seqs: Sequence[int]) -> dict[int, bytes]:
        if not seqs:
            return {}
        marks = ",".join("?" * len(seqs))
        rows = self._fast.query(f"SELECT id, data FROM lm_staging_inline WHERE id IN ({marks})", list(seqs))
        return {int(r[0]): bytes(r[1]) for r in rows}

    def referenced(self, url_prefix: str) -> set[str]:
        end = prefix_end(url_prefix.encode())
        text = "SELECT url FROM lm_staging_files WHERE url >= ?"
        params: list[Any] = [url_prefix]
        if end is not None:
            text += " AND url < ?"
            params.append(end.decode("utf-8", "surrogateescape"))
        return {r[0] for r in self._fast.query(text, params)}

    # -- compaction and drops ------------------------------------------------------
    def compact(
        self, token: StagingToken, consumed: Sequence[int], old_l2: Sequence[int], new_l2: StagingFileInfo | None,
        data: bytes | None = None,
    ) -> bool:
        inline = None if new_l2 is None else _inline_bytes(new_l2, data)

        def work(cur: Any) -> bool:
            # Every row of the token locked at once, in id order, as ``drop`` locks them: two
            # statements that lock a token's rows in different orders could deadlock.
            lock = " ORDER BY id FOR UPDATE" if self.dialect == "postgresql" else ""
            cur.execute(self._sql("SELECT id, level FROM lm_staging_files WHERE token = ?" + lock), (token,))
            if sorted(int(r[0]) for r in cur.fetchall() if r[1] == 2) != sorted(old_l2):
                raise _Lost
            marks = ",".join("?" * len(consumed))  # one statement, however many files were merged
            cur.execute(self._sql(f"DELETE FROM lm_staging_files WHERE token = ? AND id IN ({marks})"), (token, *consumed))
            if cur.rowcount != len(consumed):
                raise _Lost  # a reset or a commit dropped some meanwhile
            cur.execute(self._sql(f"DELETE FROM lm_staging_inline WHERE id IN ({marks})"), tuple(consumed))
            if new_l2 is not None:
                cur.execute(
                    self._sql(
                        "INSERT INTO lm_staging_files (token, level, url, min_key, max_key, count, size, checksum) "
                        "VALUES (?, 2, ?, ?, ?, ?, ?, ?) RETURNING id"
                    ),
                    (token, new_l2.url, new_l2.min_key, new_l2.max_key, new_l2.count, new_l2.size, new_l2.checksum),
                )
                seq = int(cur.fetchone()[0])
                self._put_inline(cur, seq, inline)
                made.append(seq)
            return True

        made: list[int] = []
        try:
            done = self._fast.run(work, transaction=True)
        except _Lost:
            return False
        self._forget(token, consumed)
        if new_l2 is not None and made:
            # Its row, as an append's: the next listing (the next compaction's, a read's) need not read it whole.
            self._remember(replace(new_l2, level=2, seq=made[-1], token=token, inline=inline is not None))
        return done

    def drop(self, token: StagingToken) -> None:
        with self._known_lock:
            self._gone(self._gone_tokens, [token])
            rows = self._known.pop(token, None)  # its rows go
            if rows is not None:
                self._known_count -= len(rows)
        if self.dialect == "postgresql":
            # One statement: rows locked in id order, as compaction locks them, and their inline bytes with them.
            text = ("WITH d AS (DELETE FROM lm_staging_files WHERE id IN "
                    "(SELECT id FROM lm_staging_files WHERE token = %s ORDER BY id FOR UPDATE) RETURNING id) "
                    "DELETE FROM lm_staging_inline WHERE id IN (SELECT id FROM d)")
            self._fast.run(lambda cur: cur.execute(text, (token,)))
            return

        def work(cur: Any) -> None:
            cur.execute("DELETE FROM lm_staging_inline WHERE id IN (SELECT id FROM lm_staging_files WHERE token = ?)", (token,))
            cur.execute("DELETE FROM lm_staging_files WHERE token = ?", (token,))

        self._fast.run(work, transaction=True)


def _detail(info: StagingFileInfo, data: bytes | None, budget: int) -> str:
    """The tail of an append's notice after ``token id``: the row's other columns as JSON, with the
    file's bytes if they fit in ``budget`` bytes; empty if not even the row fits."""
    row: dict[str, Any] = {"url": info.url, "min": info.min_key.hex(), "max": info.max_key.hex(), "count": info.count,
                           "size": info.size, "checksum": info.checksum}
    if info.inline:
        row["inline"] = 1
    room = budget - 64  # the token and the id
    if data is not None and 4 * (len(data) + 2) // 3 + 16 < room - len(json.dumps(row).encode()):
        text = json.dumps({**row, "data": base64.b64encode(data).decode()})
    else:
        text = json.dumps(row)
    return text if len(text.encode()) <= room else ""


def _dirs(info: StagingFileInfo) -> str:
    """The directories an appended file changed, for an owed paced notice (``notify.dirs_detail``): a file of one
    key names its directory; a wider one names none (the whole branch), its keys not known here."""
    return notify.dirs_detail([info.min_key]) if info.min_key == info.max_key else ""


def _inline_bytes(info: StagingFileInfo, data: bytes | None) -> bytes | None:
    """The bytes an append puts into the row: ``data`` for an inline file (which must come with it)."""
    if not info.inline:
        return None
    if data is None:
        raise ValueError(f"inline staging file {info.url.rsplit('/', 1)[-1]} appended without its bytes")
    return data


class _Lost(Exception):
    """Compaction's compare-and-set found the lists changed (rolls the transaction back)."""
