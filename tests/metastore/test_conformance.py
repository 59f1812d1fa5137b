"""One conformance suite for ``SqlRefStore``, run on SQLite and on PostgreSQL.

Every test takes ``ref_url`` (see conftest.py), so the same assertions hold on both
backends: repositories, branches and their compare-and-swap, tags, commits, staging
(multi-token precedence, scans, drops), protection, the schema version guard, and
concurrent committers in several processes.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import sqlalchemy as sa

from lakemount.block import LocalAdapter, MemoryAdapter
from lakemount.cache.ram import RamCache
from lakemount.errors import (
    AlreadyExists,
    BranchNotFound,
    CommitNotFound,
    LakeMountError,
    NotFound,
    PreconditionFailed,
    RepositoryNotFound,
    SchemaTooNew,
)
from lakemount.graveler.committed.store import CommittedStore
from lakemount.graveler.graveler import Graveler, new_token
from lakemount.graveler.journal import Journal
from lakemount.graveler.model import (
    EMPTY_METARANGE,
    Branch,
    Commit,
    CommitID,
    Entry,
    MetaRangeID,
    Repository,
    StagingToken,
    Tag,
)
from lakemount.graveler.ports import StagingStore
from lakemount.graveler.recover import recover
from lakemount.metastore.sql import SCHEMA_VERSION, SqlRefStore
from lakemount.metastore.sql_staging import SCAN_BATCH, SqlStaging
from tests.graveler._support import STAGING_BACKENDS, make_staging

from . import _workers


def mk_commit(n: int, parents: tuple[str, ...] = (), **kw: object) -> Commit:
    fields: dict[str, object] = {
        "metarange_id": MetaRangeID(f"{n:064x}"),
        "metarange_checksum": f"{n:032x}",
        "message": f"commit {n} – ünïcode",
        "committer": "tester",
        "creation_date": 1_700_000_000.123456 + n,
        "metadata": (("a", "1"), ("b", "two")),
        "generation": len(parents) + 1,
    }
    fields.update(kw)
    cid = Commit.compute_id(
        parents,
        str(fields["metarange_id"]),
        str(fields["message"]),
        "tester",
        float(fields["creation_date"]),
        fields["metadata"],
    )  # type: ignore[arg-type]
    return Commit(cid, tuple(CommitID(p) for p in parents), **fields)  # type: ignore[arg-type]


ROOT = mk_commit(0)


@pytest.fixture
def store(ref_url: str) -> SqlRefStore:
    s = SqlRefStore(ref_url)
    s.create_repository(
        Repository("repo", "mem://repo", "main", 1.5), Branch("main", ROOT.id, StagingToken("t-main")), ROOT
    )
    return s


class Stores(NamedTuple):
    """A ref store and a staging backend beside it: the staging tests run against each backend."""

    refs: SqlRefStore
    staging: StagingStore


@pytest.fixture(params=STAGING_BACKENDS)
def staged(store: SqlRefStore, request: pytest.FixtureRequest) -> Stores:
    """``store`` with the staging backend of the parameter (the SQL rows, or LSM staging files)."""
    return Stores(store, make_staging(store, MemoryAdapter(), request.param, l1_max=4))


# --------------------------------------------------------------------------- repositories


def test_repositories(store: SqlRefStore) -> None:
    assert store.get_repository("repo") == Repository("repo", "mem://repo", "main", 1.5)
    with pytest.raises(AlreadyExists):
        store.create_repository(Repository("repo", "mem://x", "main", 2.0), Branch("main", ROOT.id, new_token()), ROOT)
    other = mk_commit(1)
    store.create_repository(Repository("abc", "mem://abc", "trunk", 2.0), Branch("trunk", other.id, new_token()), other)
    assert [r.name for r in store.list_repositories()] == ["abc", "repo"]
    assert store.get_commit("abc", other.id) == other
    assert store.get_branch("abc", "trunk").commit_id == other.id
    with pytest.raises(RepositoryNotFound):
        store.get_repository("nope")
    staging = SqlStaging(store)
    token = store.get_branch("abc", "trunk").staging_token
    staging.stage("abc", "trunk", [(b"k", b"v")])
    store.create_tag("abc", Tag("t", other.id))
    store.set_protection("abc", ["trunk"])
    store.delete_repository("abc")
    with pytest.raises(RepositoryNotFound):
        store.get_repository("abc")
    with pytest.raises(RepositoryNotFound):
        store.get_branch("abc", "trunk")
    with pytest.raises(RepositoryNotFound):
        store.delete_repository("abc")
    with pytest.raises(RepositoryNotFound):
        store.get_protection("abc")
    assert [r.name for r in store.list_repositories()] == ["repo"]
    assert staging.staged_count(token) == 0  # its staged rows went in the same transaction
    # Everything of the deleted repository is gone: recreating it starts empty.
    store.create_repository(Repository("abc", "mem://abc2", "main", 3.0), Branch("main", ROOT.id, new_token()), ROOT)
    assert store.list_tags("abc") == []
    assert store.get_protection("abc") == []
    with pytest.raises(CommitNotFound):
        store.get_commit("abc", other.id)
    assert [c.id for c in store.list_commits("abc")] == [ROOT.id]


# --------------------------------------------------------------------------- branches and CAS


def test_branches(store: SqlRefStore) -> None:
    b = Branch("dev", ROOT.id, StagingToken("t1"), (StagingToken("s2"), StagingToken("s1")))
    store.create_branch("repo", b)
    assert store.get_branch("repo", "dev") == b
    with pytest.raises(AlreadyExists):
        store.create_branch("repo", Branch("dev", ROOT.id, StagingToken("t9")))
    with pytest.raises(RepositoryNotFound):
        store.create_branch("nope", Branch("dev", ROOT.id, StagingToken("t9")))
    with pytest.raises(BranchNotFound):
        store.get_branch("repo", "nope")
    with pytest.raises(RepositoryNotFound):
        store.get_branch("nope", "main")
    assert [x.name for x in store.list_branches("repo")] == ["dev", "main"]
    with pytest.raises(RepositoryNotFound):
        store.list_branches("nope")
    assert store.delete_branch("repo", "dev") == b
    with pytest.raises(BranchNotFound):
        store.delete_branch("repo", "dev")
    with pytest.raises(RepositoryNotFound):
        store.delete_branch("nope", "dev")
    assert [x.name for x in store.list_branches("repo")] == ["main"]


def test_get_branches_reads_many_branches_in_one_statement(store: SqlRefStore, monkeypatch: pytest.MonkeyPatch) -> None:
    from lakemount.metastore import sql

    other = mk_commit(1)
    store.create_repository(Repository("abc", "mem://abc", "main", 2.0), Branch("main", other.id, StagingToken("t-abc")), other)
    dev = Branch("dev", ROOT.id, StagingToken("t1"), (StagingToken("s2"), StagingToken("s1")))
    store.create_branch("repo", dev)
    keys = [("repo", "main"), ("abc", "main"), ("repo", "dev"), ("repo", "nope"), ("nope", "main"), ("repo", "main")]
    statements = []
    fast = store._fast
    query = fast.query
    monkeypatch.setattr(fast, "query", lambda text, params: statements.append(text) or query(text, params))
    got = store.get_branches(keys)
    assert len(statements) == 1
    assert got == {
        ("repo", "main"): Branch("main", ROOT.id, StagingToken("t-main")),
        ("abc", "main"): Branch("main", other.id, StagingToken("t-abc")),
        ("repo", "dev"): dev,
    }
    assert store.get_branches([]) == {}
    # More keys than one statement takes: several statements, same answer.
    monkeypatch.setattr(sql, "BRANCHES_PER_STATEMENT", 2)
    statements.clear()
    assert store.get_branches(keys) == got
    assert len(statements) == 3  # five distinct keys, two per statement


def test_cas_branch(store: SqlRefStore) -> None:
    c1 = mk_commit(1, (ROOT.id,))
    store.put_commit("repo", c1)
    cur = store.get_branch("repo", "main")
    sealed = Branch("main", cur.commit_id, StagingToken("t2"), (cur.staging_token,))
    assert store.cas_branch("repo", cur, sealed)
    assert store.get_branch("repo", "main") == sealed
    # Every field of the expected row counts: a stale commit, token or sealed list loses.
    stale = [
        cur,
        Branch("main", c1.id, sealed.staging_token, sealed.sealed_tokens),
        Branch("main", sealed.commit_id, StagingToken("other"), sealed.sealed_tokens),
        Branch("main", sealed.commit_id, sealed.staging_token, ()),
        Branch("main", sealed.commit_id, sealed.staging_token, (StagingToken("x"), cur.staging_token)),
    ]
    for expected in stale:
        assert not store.cas_branch("repo", expected, Branch("main", c1.id, StagingToken("bad"), ()))
        assert store.get_branch("repo", "main") == sealed
    assert not store.cas_branch("repo", Branch("nope", ROOT.id, StagingToken("t")), sealed)
    final = Branch("main", c1.id, StagingToken("t2"), ())
    assert store.cas_branch("repo", sealed, final)
    assert store.get_branch("repo", "main") == final


def test_cas_exactly_one_winner(store: SqlRefStore) -> None:
    """Threads racing to swap from the same expected state: one wins, the others see False."""

    errors: list[BaseException] = []  # a swapper that raised must fail the test, not count as a loser

    def swap(cur: Branch, barrier: threading.Barrier, wins: list[int], losses: list[int], round_: int, i: int) -> None:
        try:
            barrier.wait()
            won = store.cas_branch("repo", cur, Branch("main", cur.commit_id, StagingToken(f"r{round_}-{i}"), ()))
            (wins if won else losses).append(i)
        except BaseException as exc:
            errors.append(exc)

    for round_ in range(5):
        cur = store.get_branch("repo", "main")
        wins: list[int] = []
        losses: list[int] = []
        barrier = threading.Barrier(6)
        threads = [threading.Thread(target=swap, args=(cur, barrier, wins, losses, round_, i)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        assert len(wins) == 1 and len(losses) == 5
        assert store.get_branch("repo", "main").staging_token == f"r{round_}-{wins[0]}"


# --------------------------------------------------------------------------- tags


def test_tags(store: SqlRefStore) -> None:
    store.create_tag("repo", Tag("v1", ROOT.id))
    store.create_tag("repo", Tag("a.b-c_d", ROOT.id))
    assert store.get_tag("repo", "v1") == Tag("v1", ROOT.id)
    with pytest.raises(AlreadyExists):
        store.create_tag("repo", Tag("v1", ROOT.id))
    with pytest.raises(RepositoryNotFound):
        store.create_tag("nope", Tag("v1", ROOT.id))
    assert [t.name for t in store.list_tags("repo")] == ["a.b-c_d", "v1"]
    store.delete_tag("repo", "v1")
    with pytest.raises(NotFound):
        store.get_tag("repo", "v1")
    with pytest.raises(NotFound):
        store.delete_tag("repo", "v1")
    with pytest.raises(RepositoryNotFound):
        store.delete_tag("nope", "v1")


# --------------------------------------------------------------------------- commits


def test_commits(store: SqlRefStore, ref_url: str) -> None:
    c1 = mk_commit(1, (ROOT.id,))
    c2 = mk_commit(2, (c1.id, ROOT.id), metadata=(), message="", generation=7)
    for c in (c1, c2):
        store.put_commit("repo", c)
        store.put_commit("repo", c)  # again: a no-op
    # A fresh store (no commit cache) reads back every field exactly.
    fresh = SqlRefStore(ref_url)
    for c in (ROOT, c1, c2):
        assert fresh.get_commit("repo", c.id) == c
    assert fresh.get_commit("repo", c2.id).parents == (c1.id, ROOT.id)
    assert sorted(c.id for c in fresh.list_commits("repo")) == sorted([ROOT.id, c1.id, c2.id])
    with pytest.raises(CommitNotFound):
        fresh.get_commit("repo", "f" * 64)
    with pytest.raises(CommitNotFound):
        fresh.get_commit("other", c1.id)
    # Prefix lookups: ordered, limited, exact on full ids.
    ids = sorted([ROOT.id, c1.id, c2.id])
    assert fresh.commits_with_prefix("repo", "", limit=10) == ids
    assert fresh.commits_with_prefix("repo", "", limit=2) == ids[:2]
    for cid in ids:
        assert fresh.commits_with_prefix("repo", cid, limit=5) == [cid]
        assert cid in fresh.commits_with_prefix("repo", cid[:3], limit=5)
    assert fresh.commits_with_prefix("repo", "zz", limit=5) == []
    assert fresh.commits_with_prefix("other", ROOT.id[:6], limit=5) == []


def test_empty_metarange_commit_round_trip(store: SqlRefStore) -> None:
    c = mk_commit(3, (ROOT.id,), metarange_id=EMPTY_METARANGE, metarange_checksum="")
    store.put_commit("repo", c)
    assert store.get_commit("repo", c.id) == c


# --------------------------------------------------------------------------- staging


def test_stage_goes_to_the_current_token(staged: Stores) -> None:
    staged.staging.stage("repo", "main", [(b"a", b"1"), (b"b", None), (b"a", b"2")])  # last write of a key wins
    assert list(staged.staging.staged_scan(StagingToken("t-main"))) == [(b"a", b"2"), (b"b", None)]
    cur = staged.refs.get_branch("repo", "main")
    assert staged.refs.cas_branch("repo", cur, Branch("main", cur.commit_id, StagingToken("t-next"), (cur.staging_token,)))
    staged.staging.stage("repo", "main", [(b"a", b"3"), (b"c", b"new")])
    assert list(staged.staging.staged_scan(StagingToken("t-main"))) == [(b"a", b"2"), (b"b", None)]
    assert list(staged.staging.staged_scan(StagingToken("t-next"))) == [(b"a", b"3"), (b"c", b"new")]
    assert staged.staging.staged_count(StagingToken("t-main")) == 2
    assert staged.staging.staged_count(StagingToken("t-next")) == 2
    assert staged.staging.staged_count(StagingToken("never")) == 0
    with pytest.raises(BranchNotFound):
        staged.staging.stage("repo", "nope", [(b"a", b"1")])
    with pytest.raises(RepositoryNotFound):
        staged.staging.stage("nope", "main", [(b"a", b"1")])


def test_a_checked_stage_sees_its_locked_branch_and_exactly_one_racer_passes(staged: Stores) -> None:
    """``stage(..., check)``: the check gets the branch row and the staged values inside the write's
    transaction; raising writes nothing; of threads checking the same value, one writes."""
    staged.staging.stage("repo", "main", [(b"ptr", b"v0")])
    seen: list[tuple[Branch, tuple[bool, bytes | None]]] = []
    staged.staging.stage("repo", "main", [(b"ptr", b"v1")], lambda b, get: seen.append((b, get(b.tokens, b"ptr"))))
    assert seen == [(staged.refs.get_branch("repo", "main"), (True, b"v0"))]

    def refuse(b: Branch, get: object) -> None:
        raise PreconditionFailed("no")

    with pytest.raises(PreconditionFailed):
        staged.staging.stage("repo", "main", [(b"ptr", b"never"), (b"other", b"never")], refuse)
    assert staged.staging.staged_get(staged.refs.get_branch("repo", "main").tokens, b"ptr") == (True, b"v1")
    assert staged.staging.staged_get(staged.refs.get_branch("repo", "main").tokens, b"other") == (False, None)

    errors: list[BaseException] = []
    wins: list[int] = []
    barrier = threading.Barrier(6)

    def racer(i: int) -> None:
        def expect_v1(b: Branch, get: Any) -> None:
            if get(b.tokens, b"ptr") != (True, b"v1"):
                raise PreconditionFailed("moved")
        try:
            barrier.wait()
            staged.staging.stage("repo", "main", [(b"ptr", f"w{i}".encode())], expect_v1)
            wins.append(i)
        except PreconditionFailed:
            pass
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    assert len(wins) == 1
    assert staged.staging.staged_get(staged.refs.get_branch("repo", "main").tokens, b"ptr") == (True, f"w{wins[0]}".encode())


def test_staged_get_precedence(staged: Stores) -> None:
    t1, t2, t3 = StagingToken("p1"), StagingToken("p2"), StagingToken("p3")
    for token, items in (
        (t3, [(b"k", b"old"), (b"only3", b"3")]),
        (t2, [(b"k", None), (b"only2", b"2")]),
        (t1, [(b"k", b"new")]),
    ):
        cur = staged.refs.get_branch("repo", "main")
        staged.refs.cas_branch("repo", cur, Branch("main", cur.commit_id, token, cur.sealed_tokens))
        staged.staging.stage("repo", "main", items)
    assert staged.staging.staged_get([t1, t2, t3], b"k") == (True, b"new")
    assert staged.staging.staged_get([t2, t3], b"k") == (True, None)  # a tombstone is found, with no value
    assert staged.staging.staged_get([t3], b"k") == (True, b"old")
    assert staged.staging.staged_get([t3, t2], b"k") == (True, b"old")  # the order given is the precedence
    assert staged.staging.staged_get([t1, t2, t3], b"only3") == (True, b"3")
    assert staged.staging.staged_get([t1, t2, t3], b"missing") == (False, None)
    assert staged.staging.staged_get([t1], b"only2") == (False, None)


def test_branch_row_and_staged_entries_in_one_statement(staged: Stores, monkeypatch: pytest.MonkeyPatch) -> None:
    """The combined reads of a branch's row with its staged entries: one statement each, same answers
    as ``get_branch`` plus ``staged_get``/``staged_scan``, whatever tokens the caller expected."""
    from lakemount.graveler.staging import lsm
    from lakemount.metastore import sql_staging

    main = staged.refs.get_branch("repo", "main")
    t = main.staging_token
    staged.staging.stage("repo", "main", [(b"a", b"1"), (b"d/1", b"x"), (b"d/2", None), (b"d/3", b"z"), (b"e", b"e")])
    statements: list[str] = []
    fast = staged.refs._fast
    query = fast.query
    monkeypatch.setattr(fast, "query", lambda text, params: statements.append(text) or query(text, params))
    assert staged.staging.branch_staged_get("repo", "main", [t], b"a") == (main, True, b"1")
    assert staged.staging.branch_staged_get("repo", "main", [t], b"d/2") == (main, True, None)  # a tombstone
    assert staged.staging.branch_staged_get("repo", "main", [t], b"zz") == (main, False, None)
    # Tokens the branch no longer has: the row tells, the staged answer is theirs.
    assert staged.staging.branch_staged_get("repo", "main", [StagingToken("gone")], b"a") == (main, False, None)
    assert staged.staging.branch_staged_scan("repo", "main", t, b"d/", b"d0") == (main, [(b"d/1", b"x"), (b"d/2", None), (b"d/3", b"z")], True)
    assert staged.staging.branch_staged_scan("repo", "main", t, b"b") == (main, [(b"d/1", b"x"), (b"d/2", None), (b"d/3", b"z"), (b"e", b"e")], True)
    assert staged.staging.branch_staged_probe("repo", "main", t, b"d", b"d/", b"d0", 2) == (main, (False, None), [(b"d/1", b"x"), (b"d/2", None)], False)
    assert staged.staging.branch_staged_probe("repo", "main", t, b"a", b"a/", b"a0", 2) == (main, (True, b"1"), [], True)
    assert staged.staging.branch_staged_probe("repo", "main", t, b"d/2", b"d/2/", b"d/20", 2) == (main, (True, None), [], True)
    assert len(statements) == 9
    monkeypatch.setattr(sql_staging, "SCAN_BATCH", 2)
    monkeypatch.setattr(lsm, "SCAN_PAGE", 2)
    assert staged.staging.branch_staged_scan("repo", "main", t, b"d/", b"d0") == (main, [(b"d/1", b"x"), (b"d/2", None)], False)
    for call in (
        lambda repo, name: staged.staging.branch_staged_get(repo, name, [t], b"a"),
        lambda repo, name: staged.staging.branch_staged_scan(repo, name, t),
        lambda repo, name: staged.staging.branch_staged_probe(repo, name, t, b"a", b"a/", b"a0", 2),
    ):
        with pytest.raises(BranchNotFound):
            call("repo", "nope")
        with pytest.raises(RepositoryNotFound):
            call("nope", "main")


def test_the_pages_of_several_ranges_with_the_branch_row_in_one_statement(store: SqlRefStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stop 55 (``Reads.scans_ahead``): the branch row and the first page of each range, one statement for all,
    each page what ``branch_staged_scan`` of that range answers.  The SQL staging's (``lsm`` reads one range a
    statement: ``Reads`` reads each scan on its own there)."""
    from lakemount.metastore import sql_staging

    sql = SqlStaging(store)
    staged = Stores(store, sql)
    scans = sql.branch_staged_scans
    main = staged.refs.get_branch("repo", "main")
    t = main.staging_token
    staged.staging.stage("repo", "main", [(b"a/1", b"1"), (b"d/1", b"x"), (b"d/2", None), (b"d/3", b"z"), (b"e", b"e")])
    ranges: list[tuple[bytes, bytes | None]] = [(b"d/", b"d0"), (b"a/", b"a0"), (b"x/", b"x0"), (b"b", None)]
    statements: list[str] = []
    fast = staged.refs._fast
    query = fast.query
    monkeypatch.setattr(fast, "query", lambda text, params: statements.append(text) or query(text, params))
    branch, pages = scans("repo", "main", t, ranges)
    assert len(statements) == 1
    assert branch == main and pages == [staged.staging.branch_staged_scan("repo", "main", t, *r)[1:] for r in ranges]
    assert pages[0] == ([(b"d/1", b"x"), (b"d/2", None), (b"d/3", b"z")], True) and pages[2] == ([], True)
    monkeypatch.setattr(sql_staging, "SCAN_BATCH", 2)
    assert scans("repo", "main", t, ranges)[1][0] == ([(b"d/1", b"x"), (b"d/2", None)], False)
    with pytest.raises(BranchNotFound):
        scans("repo", "nope", t, ranges)


def test_graveler_reads_stay_current_when_the_branch_moves_under_them(ref_url: str, tmp_path: Path) -> None:
    """Reads pass the branch's last seen tokens to read row and staged entries in one statement;
    a commit elsewhere (new token, the old one dropped) is noticed in that same statement."""
    def graveler() -> Graveler:
        refs = SqlRefStore(ref_url)
        return Graveler(
            refs,
            CommittedStore(LocalAdapter(), RamCache(1 << 24)),
            Journal(LocalAdapter(), f"local://{tmp_path}/sys"),
            staging=SqlStaging(refs),
        )

    reader, writer = graveler(), graveler()
    writer.create_repository("repo", f"local://{tmp_path}/ns")
    v1, v2 = b"1" * 17, b"2" * 17  # values start with their 16-byte identity
    writer.set_many("repo", "main", [(b"d/f", v1), (b"g", v1)])
    ref = reader.resolve("repo", "main")
    assert reader.get("repo", ref, b"zz") is None  # learns the tokens (and reads the head commit, kept)
    statements: list[str] = []
    fast = reader.refs._fast
    query = fast.query
    fast.query = lambda text, params: statements.append(text) or query(text, params)  # type: ignore[method-assign]
    assert reader.get("repo", ref, b"g") == v1
    assert list(reader.scan("repo", ref, b"d/", b"d0")) == [(b"d/f", v1)]
    assert reader.probe("repo", ref, b"d", b"d/", b"d0") == (None, (b"d/f", v1))
    assert len(statements) == 3
    seen = reader.branch_seen("repo", "main")
    assert seen is not None and seen[0] == writer.get_branch("repo", "main")
    # Another process commits: the staged entries move into a commit, their token is dropped.
    writer.commit("repo", "main", "c1")
    writer.set_many("repo", "main", [(b"g", v2)])
    assert reader.get("repo", ref, b"g") == v2
    assert reader.get("repo", ref, b"d/f") == v1
    writer.commit("repo", "main", "c2")
    assert list(reader.scan("repo", ref, b"", None)) == [(b"d/f", v1), (b"g", v2)]
    writer.set_many("repo", "main", [(b"d/f", None)])
    writer.commit("repo", "main", "c3")
    assert reader.probe("repo", ref, b"g", b"g/", b"g0") == (v2, None)
    assert reader.probe("repo", ref, b"d", b"d/", b"d0") == (None, None)
    seen = reader.branch_seen("repo", "main")
    assert seen is not None and seen[0] == writer.get_branch("repo", "main")


def test_graveler_reads_across_sealed_tokens(ref_url: str, tmp_path: Path) -> None:
    """A branch's view merges its staging token over its sealed ones (commits in flight), newest first."""
    refs = SqlRefStore(ref_url)
    g = Graveler(
        refs,
        CommittedStore(LocalAdapter(), RamCache(1 << 24)),
        Journal(LocalAdapter(), f"local://{tmp_path}/sys"),
        staging=SqlStaging(refs),
    )
    g.create_repository("repo", f"local://{tmp_path}/ns")
    g.set_many("repo", "main", [(b"a", b"\0" * 16 + b"x"), (b"b", b"\0" * 16 + b"x"), (b"c", b"\0" * 16 + b"x")])
    for items in ([(b"a", b"1" * 17), (b"b", None)], [(b"a", b"2" * 17), (b"d", b"2" * 17)]):
        cur = g.refs.get_branch("repo", "main")
        g.refs.cas_branch("repo", cur, Branch("main", cur.commit_id, new_token(), cur.tokens))
        g.set_many("repo", "main", items)
    ref = g.resolve("repo", "main")
    assert list(g.scan("repo", ref)) == [(b"a", b"2" * 17), (b"c", b"\0" * 16 + b"x"), (b"d", b"2" * 17)]
    assert list(g.scan("repo", ref, b"b", b"d")) == [(b"c", b"\0" * 16 + b"x")]
    assert g.get("repo", ref, b"b") is None
    assert g.get("repo", ref, b"a") == b"2" * 17
    # Committing takes every token's entries, newest winning.
    g.commit("repo", "main", "all")
    assert list(g.scan("repo", g.resolve("repo", "main@"))) == list(g.scan("repo", ref))
    assert all(g.staging.staged_count(t) == 0 for t in g.refs.get_branch("repo", "main").tokens)


def test_staged_first_and_hidden_across_tokens(staged: Stores) -> None:
    """``staged_first`` is the first key whose newest entry is a value, past tombstones and keys a newer
    token deletes; ``staged_hidden`` the keys whose newest entry is a tombstone."""
    t1, t2 = StagingToken("f1"), StagingToken("f2")
    for token, items in (
        (t2, [(b"a", None), (b"b", b"old"), (b"c", b"c"), (b"e", b"e")]),
        (t1, [(b"b", None), (b"c", b"new"), (b"d", None)]),
    ):
        cur = staged.refs.get_branch("repo", "main")
        staged.refs.cas_branch("repo", cur, Branch("main", cur.commit_id, token, cur.sealed_tokens))
        staged.staging.stage("repo", "main", items)
    first = staged.staging.staged_first
    assert first([t1, t2]) == (b"c", b"new")  # a: deleted; b: deleted by the newer token
    assert first([t1, t2], b"c\x00") == (b"e", b"e")  # d: a tombstone over nothing
    assert first([t1, t2], b"a", b"c") is None
    assert first([t2, t1]) == (b"b", b"old")  # the order given is the precedence
    assert first([t1]) == (b"c", b"new")
    assert first([t1], b"d") is None
    assert first([]) is None
    hidden = staged.staging.staged_hidden
    assert hidden([t1, t2], [b"a", b"b", b"c", b"d", b"e", b"zz"]) == {b"a", b"b", b"d"}
    assert hidden([t2, t1], [b"a", b"b", b"c", b"d"]) == {b"a", b"d"}
    assert hidden([t1, t2], []) == set() and hidden([], [b"a"]) == set()
    many = [b"m/%05d" % i for i in range(1200)]  # more keys than one statement asks about
    staged.staging.stage("repo", "main", [(k, None) for k in many[::2]])
    assert hidden([t1, t2], many) == set(many[::2])


def test_a_database_made_before_the_live_index_gains_it(ref_url: str) -> None:
    """``lm_staging_live`` (``staged_first``'s index) is created when a store opens a database without it."""
    SqlRefStore(ref_url).engine.dispose()
    engine = sa.create_engine(ref_url)
    with engine.begin() as conn:
        conn.execute(sa.text("DROP INDEX lm_staging_live"))
    assert "lm_staging_live" not in {ix["name"] for ix in sa.inspect(engine).get_indexes("lm_staging")}
    SqlRefStore(ref_url).engine.dispose()
    assert "lm_staging_live" in {ix["name"] for ix in sa.inspect(engine).get_indexes("lm_staging")}
    engine.dispose()


def test_staged_scan_order_bounds_and_paging(staged: Stores) -> None:
    t = staged.refs.get_branch("repo", "main").staging_token
    keys = [b"\x00", b"\x00\x00", b"a", b"a\x00", b"a\xff", b"b", b"\xff", b"\xff\xff"]
    staged.staging.stage("repo", "main", [(k, b"v" + k) for k in keys])
    assert [k for k, _ in staged.staging.staged_scan(t)] == keys  # bytewise order on both backends
    assert [k for k, _ in staged.staging.staged_scan(t, b"a", b"b")] == [b"a", b"a\x00", b"a\xff"]
    assert [k for k, _ in staged.staging.staged_scan(t, b"a\x01")] == [b"a\xff", b"b", b"\xff", b"\xff\xff"]
    assert [k for k, _ in staged.staging.staged_scan(t, b"", b"\x00\x00")] == [b"\x00"]
    assert all(isinstance(k, bytes) and isinstance(v, bytes) for k, v in staged.staging.staged_scan(t))
    # More than one page.
    n = SCAN_BATCH * 2 + 7
    staged.staging.stage("repo", "main", [(b"p/%06d" % i, b"%d" % i) for i in range(n)])
    got = list(staged.staging.staged_scan(t, b"p/", b"p0"))
    assert [k for k, _ in got] == [b"p/%06d" % i for i in range(n)]
    assert got[-1][1] == b"%d" % (n - 1)
    assert [k for k, _ in staged.staging.staged_scan(t, b"p/%06d" % (SCAN_BATCH - 1), b"p/%06d" % (SCAN_BATCH + 2))] == [
        b"p/%06d" % i for i in range(SCAN_BATCH - 1, SCAN_BATCH + 2)
    ]


def test_drop_staging(staged: Stores) -> None:
    t = staged.refs.get_branch("repo", "main").staging_token
    keys = [b"a/1", b"a/2", b"ab", b"b", b"\xff", b"\xff\x01", b"\xff\xff\x00", b"c"]
    staged.staging.stage("repo", "main", [(k, b"v") for k in keys])
    staged.staging.drop_staging(t, key=b"b")
    staged.staging.drop_staging(t, key=b"zz")  # absent: nothing happens
    assert [k for k, _ in staged.staging.staged_scan(t)] == [b"a/1", b"a/2", b"ab", b"c", b"\xff", b"\xff\x01", b"\xff\xff\x00"]
    staged.staging.drop_staging(t, prefix=b"a/")
    assert [k for k, _ in staged.staging.staged_scan(t)] == [b"ab", b"c", b"\xff", b"\xff\x01", b"\xff\xff\x00"]
    staged.staging.drop_staging(t, prefix=b"\xff\xff")  # a prefix with no upper bound
    assert [k for k, _ in staged.staging.staged_scan(t)] == [b"ab", b"c", b"\xff", b"\xff\x01"]
    staged.staging.drop_staging(t, prefix=b"\xff")
    assert [k for k, _ in staged.staging.staged_scan(t)] == [b"ab", b"c"]
    other = StagingToken("other-token")
    cur = staged.refs.get_branch("repo", "main")
    staged.refs.cas_branch("repo", cur, Branch("main", cur.commit_id, other, (t,)))
    staged.staging.stage("repo", "main", [(b"ab", b"w")])
    staged.staging.drop_staging(t)
    assert list(staged.staging.staged_scan(t)) == []
    assert list(staged.staging.staged_scan(other)) == [(b"ab", b"w")]  # other tokens untouched


def test_protection(store: SqlRefStore) -> None:
    assert store.get_protection("repo") == []
    store.set_protection("repo", ["release-*", "main"])
    assert store.get_protection("repo") == ["main", "release-*"]
    store.set_protection("repo", [])
    assert store.get_protection("repo") == []
    with pytest.raises(RepositoryNotFound):
        store.set_protection("nope", ["main"])


def test_swap_protection_is_one_compare_and_set(store: SqlRefStore, ref_url: str) -> None:
    """Two writers (each its own store, as two API workers) expecting the same rules: the second waits
    for the first's transaction, then sees its rules and is refused -- not both pass the check."""
    from lakemount.metastore.pulls import SqlPullStore

    pulls = SqlPullStore(store.engine)
    other = SqlRefStore(ref_url)
    inside, b_locking = threading.Event(), threading.Event()
    results: dict[str, object] = {}

    @sa.event.listens_for(other.engine, "before_cursor_execute")
    def locking(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        # b's statement that takes the lock a holds: SQLite's BEGIN IMMEDIATE, PostgreSQL's SELECT ... FOR UPDATE
        if inside.is_set() and (statement.startswith("BEGIN IMMEDIATE") or "FOR UPDATE" in statement):
            b_locking.set()

    def b_waits_on_a_lock() -> bool:
        """SQLite shows nothing of a writer waiting (its busy handler retries): b's BEGIN IMMEDIATE was sent.
        PostgreSQL shows b's backend waiting for a's row lock."""
        if not b_locking.is_set():
            return False
        if store.engine.dialect.name != "postgresql":
            return True
        with store.engine.connect() as conn:
            return bool(conn.execute(sa.text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'")).scalar())

    def expect(patterns: list[str], approvals: dict[str, int], name: str) -> None:
        results[f"{name}-saw"] = (patterns, approvals)
        if (patterns, approvals) != ([], {}):
            raise PreconditionFailed(f"{name}: rules changed")
        if name == "a":
            inside.set()
            # b's transaction starts meanwhile: a commits only once b waits on its lock (not after a fixed
            # 0.5 s b could outlast on a loaded machine, and then never meet the lock)
            deadline = time.monotonic() + 60
            while not b_waits_on_a_lock():
                assert time.monotonic() < deadline, "b never began its transaction while a held the lock"
                time.sleep(0.01)
            results["b-waited"] = True

    errors: list[BaseException] = []

    def write(s: SqlRefStore, name: str, patterns: list[str], approvals: dict[str, int]) -> None:
        try:
            if name == "b":
                assert inside.wait(10)
            try:
                s.swap_protection("repo", patterns, approvals, lambda p, a: expect(p, a, name))
                results[name] = "won"
            except PreconditionFailed:
                results[name] = "refused"
        except BaseException as exc:  # re-raised by the test
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(store, "a", ["main"], {"main": 2})),
               threading.Thread(target=write, args=(other, "b", ["dev"], {}))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    assert (results["a"], results["b"]) == ("won", "refused")
    assert results.get("b-waited"), "a committed before b met its lock"
    assert results["b-saw"] == (["main"], {"main": 2})
    assert store.get_protection("repo") == ["main"] and pulls.required_approvals("repo") == {"main": 2}
    store.swap_protection("repo", ["a", "b"], {"a": 0, "b": 1}, lambda p, a: None)  # counts below 1 are dropped
    assert store.get_protection("repo") == ["a", "b"] and pulls.required_approvals("repo") == {"b": 1}
    with pytest.raises(RepositoryNotFound):
        store.swap_protection("nope", ["main"], {}, lambda p, a: None)


# --------------------------------------------------------------------------- schema


def test_schema_version_too_new(ref_url: str) -> None:
    s = SqlRefStore(ref_url)
    SqlRefStore(ref_url)  # opening an up-to-date store again is fine
    with s.engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE lm_meta SET value = :v WHERE key = 'schema_version'"), {"v": str(SCHEMA_VERSION + 1)}
        )
    with pytest.raises(SchemaTooNew) as ei:
        SqlRefStore(ref_url)
    assert (ei.value.found, ei.value.supported) == (SCHEMA_VERSION + 1, SCHEMA_VERSION)


# --------------------------------------------------------------------------- concurrency


def _spawn_committers(url: str, tmp_path: Path, workers: int, rounds: int, keys: int) -> Graveler:
    adapter = LocalAdapter()
    sys_ns = f"local://{tmp_path}/sys"
    refs = SqlRefStore(url)
    g = Graveler(refs, CommittedStore(adapter, RamCache(1 << 26)), Journal(adapter, sys_ns), staging=SqlStaging(refs))
    g.create_repository(_workers.REPO, f"local://{tmp_path}/ns")
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(workers)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_workers.commit_worker, args=(url, sys_ns, w, rounds, keys, barrier, out), daemon=True)
        for w in range(workers)
    ]
    for p in procs:
        p.start()
    try:
        reports = [out.get(timeout=240) for _ in procs]
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    errors = [err for _w, _r, err in reports if err]
    assert not errors, "\n".join(errors)

    head = g.resolve(_workers.REPO, "main@")
    committed = {k for k, _ in g.scan(_workers.REPO, head)}
    expected = {f"w{w}/r{r}/k{i:03d}".encode() for w in range(workers) for r in range(rounds) for i in range(keys)}
    assert committed == expected  # every staged key, nothing else
    assert list(g.diff_uncommitted(_workers.REPO, "main")) == []
    history = {c.id for c in g.log(_workers.REPO, "main")}
    made = [cid for _w, results, _e in reports for _r, cid in results if cid is not None]
    assert len(made) == len(set(made))
    assert set(made) <= history  # every commit a worker was told about is in the branch's history
    assert len(made) >= rounds  # at least one commit per round landed
    # Each commit holds its predecessor's keys plus new ones: history is linear and only grows.
    chain = list(g.log(_workers.REPO, "main", first_parent=True))
    assert all(len(c.parents) <= 1 for c in chain)
    sizes = [sum(1 for _ in g.scan(_workers.REPO, g.resolve(_workers.REPO, c.id))) for c in reversed(chain)]
    assert sizes == sorted(sizes) and sizes[-1] == len(expected)

    # The journal the racing processes wrote replays to the same history.
    rebuilt = SqlRefStore(f"sqlite:///{tmp_path}/recovered.db")
    report = recover(g.journal, rebuilt)
    assert report.warnings == []
    assert rebuilt.get_branch(_workers.REPO, "main").commit_id == g.resolve(_workers.REPO, "main").commit_id
    return g


def test_concurrent_committers_in_processes(ref_url: str, tmp_path: Path) -> None:
    _spawn_committers(ref_url, tmp_path, workers=4, rounds=3, keys=20)


@pytest.mark.slow
def test_concurrent_committers_in_processes_long(ref_url: str, tmp_path: Path) -> None:
    _spawn_committers(ref_url, tmp_path, workers=8, rounds=10, keys=50)


@pytest.mark.parametrize("backend", ["sql", "lsm"])
def test_a_directory_move_is_seen_by_another_host_at_once(ref_url: str, tmp_path: Path, backend: str) -> None:
    """A move record (issue 40) lives in the branch row: a second host that read the branch before it (its
    one-statement reads hold the old tokens) sees the move on its next read, writes on either side of it,
    and the commit either host makes holds the moved tree; on SQLite and PostgreSQL, both staging backends."""
    from tests.graveler._support import make_staging

    adapter = LocalAdapter()

    def host() -> Graveler:
        refs = SqlRefStore(ref_url)
        return Graveler(
            refs, CommittedStore(adapter, RamCache(1 << 24)), Journal(adapter, f"local://{tmp_path}/sys"),
            staging=make_staging(refs, adapter, backend),
        )

    a, b = host(), host()
    a.create_repository("repo", f"local://{tmp_path}/ns")
    v1, v2, v3 = (Entry(f"data/{c}", 1, c).value() for c in "123")
    a.set_many("repo", "main", [(b"d/x", v1), (b"d/sub/y", v2)])
    a.commit("repo", "main", "tree")
    a.set("repo", "main", b"d/staged", v3)
    ref = b.resolve("repo", "main")
    assert b.get("repo", ref, b"d/x") == v1  # b learns the tokens of its one-statement reads
    assert a.move("repo", "main", b"d/", b"e/")
    assert b.get("repo", ref, b"d/x") is None and b.get("repo", ref, b"e/x") == v1
    assert [k for k, _ in b.scan("repo", ref, b"d/", b"d0")] == []
    assert [k for k, _ in b.scan("repo", ref, b"e/", b"e0")] == [b"e/staged", b"e/sub/y", b"e/x"]
    b.set("repo", "main", b"d/after", v2)  # after the move: keeps its name
    b.commit("repo", "main", "moved")
    for g in (a, b):
        at = g.resolve("repo", "main@")
        assert [k for k, _ in g.scan("repo", at)] == [b"d/after", b"e/staged", b"e/sub/y", b"e/x"]


@pytest.mark.parametrize("cut", ["before", "after"])
def test_a_directory_move_when_postgresql_drops_every_connection(
    pg_cluster: Any, pg_url: str, tmp_path: Path, cut: str
) -> None:
    """Every server connection terminated right before, or right after, the swap that stages a move record
    (what a PostgreSQL restart does to them): the rename either happened whole or not at all, and done
    again it lands once (a second record of the same move changes nothing: the old prefix is empty)."""
    refs = SqlRefStore(pg_url)
    adapter = LocalAdapter()
    g = Graveler(refs, CommittedStore(adapter, RamCache(1 << 24)), Journal(adapter, f"local://{tmp_path}/sys"),
                 staging=SqlStaging(refs))
    g.create_repository("repo", f"local://{tmp_path}/ns")
    names = [b"%03d" % i for i in range(50)]
    g.set_many("repo", "main", [(b"d/" + n, Entry(f"data/{n.decode()}", 1, "x").value()) for n in names])
    g.commit("repo", "main", "tree")
    real = refs.cas_branch
    cuts: list[int] = []

    def terminate() -> None:
        admin = pg_cluster.admin()
        try:
            cur = admin.cursor()
            cur.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        "WHERE datname = %s AND pid <> pg_backend_pid()", (sa.engine.make_url(pg_url).database,))
            cuts.append(int(cur.fetchone()[0]))
        finally:
            admin.close()

    def cas(repo: str, expected: Branch, new: Branch) -> bool:
        if not cuts and cut == "before":
            terminate()
        swapped = real(repo, expected, new)
        if len(cuts) < 1 and cut == "after":
            terminate()
        return swapped

    refs.cas_branch = cas  # type: ignore[method-assign]
    try:
        moved = g.move("repo", "main", b"d/", b"e/")
    except LakeMountError as exc:
        moved = None
        assert cut == "before", f"the swap was made before the cut, yet the move failed: {exc}"
    assert cuts and cuts[0] >= 1, "no server connection was terminated"
    refs.cas_branch = real  # type: ignore[method-assign]
    ref = g.resolve("repo", "main")
    old = [k for k, _ in g.scan("repo", ref, b"d/", b"d0")]
    new = [k for k, _ in g.scan("repo", ref, b"e/", b"e0")]
    assert (old, new) in (([b"d/" + n for n in names], []), ([], [b"e/" + n for n in names]))
    if moved is None or old:
        assert g.move("repo", "main", b"d/", b"e/")
    assert g.move("repo", "main", b"d/", b"e/")  # the same rename again: nothing left to move, nothing lost
    g.commit("repo", "main", "moved")
    at = g.resolve("repo", "main@")
    assert [k for k, _ in g.scan("repo", at)] == [b"e/" + n for n in names]
