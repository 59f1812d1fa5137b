"""``Graveler.first``: the first live record of a range, against a dict, and what it reads.

The model is the branch as a reader sees it (a dict); the machine writes, deletes, moves
directories, commits, and seals the current token (a commit in flight: the branch reads
its new token over the sealed one), so a key may be committed and deleted in staging,
staged and committed-absent, or staged in an older token and deleted in a newer one.
After every step ``first`` over each directory's range (and the whole branch, and the
commit alone) must be the smallest key of the model there, with its value.  The second
part counts the statements and rows ``first`` reads: the same after 100 deletions staged
in the range as after 2,000 (an ``rmdir`` after the files were renamed out).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from lakemount.errors import InvalidArgument, NothingToCommit
from lakemount.graveler.graveler import Graveler, new_token
from lakemount.graveler.model import Branch, prefix_end
from lakemount.graveler.refexpr import ResolvedRef
from lakemount.graveler.staging.lsm import LsmStaging
from tests.budget import examples

from ._support import STAGING_BACKENDS, build_graveler, content, val

R = "repo"
DIRS = [b"a/", b"b/", b"a/s/", b"b/s/"]
KEYS = sorted({d + n for d in DIRS for n in (b"x", b"y", b"s/z")} | {b"a", b"b/"})
RANGES = [(b"", None), *((d, prefix_end(d)) for d in DIRS), (b"a/x", b"b/s/")]

Model = dict[bytes, str]


def first_of(model: Model, start: bytes, stop: bytes | None) -> tuple[bytes, str] | None:
    inside = sorted(k for k in model if k >= start and (stop is None or k < stop))
    return (inside[0], model[inside[0]]) if inside else None


def got(g: Graveler, ref: ResolvedRef, start: bytes, stop: bytes | None) -> tuple[bytes, str] | None:
    record = g.first(R, ref, start, stop)
    if record is None:
        return None
    c = content(record[1])
    assert c is not None
    return record[0], c


class FirstMachine(RuleBasedStateMachine):
    STAGING = "sql"

    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.mkdtemp(prefix="lm-first-")
        self.g = build_graveler(Path(self.tmp) / "refs.db", staging=self.STAGING, **({"l1_max": 3} if self.STAGING == "lsm" else {}))
        self.g.create_repository(R, "mem://repo")
        self.view: Model = {}
        self.committed: Model = {}
        self.n = 0

    def teardown(self) -> None:
        self.g.refs.engine.dispose()  # type: ignore[attr-defined]
        shutil.rmtree(self.tmp, ignore_errors=True)

    @rule(keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=4), c=st.sampled_from(["1", "2", "3"]))
    def write(self, keys: list[bytes], c: str) -> None:
        self.g.set_many(R, "main", [(k, val(c)) for k in keys])
        self.view.update(dict.fromkeys(keys, c))

    @rule(keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=6))
    def delete(self, keys: list[bytes]) -> None:
        """Deletions, of keys present or not (a tombstone over nothing is staged all the same)."""
        self.g.set_many(R, "main", [(k, None) for k in keys])
        for k in keys:
            self.view.pop(k, None)

    @rule(old=st.sampled_from(DIRS), new=st.sampled_from(DIRS))
    def move(self, old: bytes, new: bytes) -> None:
        if old.startswith(new) or new.startswith(old):
            return
        try:
            self.g.move(R, "main", old, new)
        except InvalidArgument:
            return  # too many moves staged: a front end would rename key by key
        kept = {k: v for k, v in self.view.items() if not k.startswith(old)}
        kept.update({new + k[len(old) :]: v for k, v in self.view.items() if k.startswith(old)})
        self.view = kept

    @rule()
    def commit(self) -> None:
        self.n += 1
        try:
            self.g.commit(R, "main", f"c{self.n}")
        except NothingToCommit:
            return
        self.committed = dict(self.view)

    @rule()
    def seal(self) -> None:
        """A new current token over the old ones, as a commit in flight leaves the branch."""
        cur = self.g.get_branch(R, "main")
        if len(cur.tokens) < 3:
            assert self.g.refs.cas_branch(R, cur, Branch("main", cur.commit_id, new_token(), cur.tokens))

    @invariant()
    def first_is_the_models_smallest_key(self) -> None:
        ref = self.g.resolve(R, "main")
        head = self.g.resolve(R, "main@")
        for start, stop in RANGES:
            assert got(self.g, ref, start, stop) == first_of(self.view, start, stop), (start, stop)
            assert got(self.g, head, start, stop) == first_of(self.committed, start, stop), (start, stop)
        for d in DIRS:  # a path lookup: the name itself, and the first record below it
            name = d[:-1]
            own, below = self.g.probe(R, ref, name, d, prefix_end(d))
            assert content(own) == self.view.get(name)
            assert (None if below is None else (below[0], content(below[1]))) == first_of(self.view, d, prefix_end(d)), d


_SETTINGS = settings(max_examples=examples(40), stateful_step_count=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class TestFirstSql(FirstMachine.TestCase):  # type: ignore[name-defined,misc]
    settings = _SETTINGS


class LsmFirstMachine(FirstMachine):
    STAGING = "lsm"


class TestFirstLsm(LsmFirstMachine.TestCase):  # type: ignore[name-defined,misc]
    settings = _SETTINGS


def _reads(g: Graveler, n: int, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int, tuple[bytes, bytes] | None]:
    """(statements, rows) ``first`` reads over ``d/`` once ``n`` files were written and renamed out of it
    one by one (each rename a deletion staged under ``d/``), and what it returned."""
    g.set_many(R, "main", [(b"d/", val("marker"))])
    for i in range(n):
        g.set_many(R, "main", [(b"d/part-%05d" % i, val("p"))])
        g.set_many(R, "main", [(b"d/part-%05d" % i, None), (b"out/part-%05d" % i, val("p"))])
    if isinstance(g.staging, LsmStaging):
        assert g.staging.settle(60), "compaction never settled"
    ref = g.resolve(R, "main")
    g.first(R, ref, b"d/\x00", b"d0")  # what a process learns once (the head commit; lsm: the files, decoded)
    fast = g.refs._fast  # type: ignore[attr-defined]
    counted = [0, 0]
    query = fast.query

    def counting(text: str, params: Any) -> list[Any]:
        rows = query(text, params)
        counted[0] += 1
        counted[1] += len(rows)
        return rows

    monkeypatch.setattr(fast, "query", counting)
    record = g.first(R, ref, b"d/\x00", b"d0")  # past the marker: is anything else below d/?
    monkeypatch.undo()
    return counted[0], counted[1], record


@pytest.mark.parametrize("backend", STAGING_BACKENDS)
def test_first_reads_the_same_rows_after_100_or_2000_deletions(backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An emptiness check after N renames out of a directory: the statements and the rows they return do
    not grow with N (a scan read a row per tombstone, and a page of 5,000 per statement)."""
    small = build_graveler(tmp_path / "small.db", staging=backend)
    small.create_repository(R, "mem://small")
    big = build_graveler(tmp_path / "big.db", staging=backend)
    big.create_repository(R, "mem://big")
    few = _reads(small, 100, monkeypatch)
    many = _reads(big, 2000, monkeypatch)
    assert few[2] is None and many[2] is None  # the directory is empty: only its marker is left
    assert many[0] == few[0], (few, many)
    if backend == "sql":
        assert many[1] == few[1] <= 4, (few, many)  # the branch row, one staged value per token (none here)
    else:
        # Rows are the token's listed staging files (at most ``l1_max`` L1 and a few L2, however many keys
        # they hold), and the tombstones are stepped over in this process.
        assert many[1] < 50, (few, many)
    # The same check through a scan reads every tombstone (what the emptiness check did before).
    ref = big.resolve(R, "main")
    assert list(big.scan(R, ref, b"d/\x00", b"d0")) == []
    if backend == "sql":
        rows = big.refs._fast.query("SELECT count(*) FROM lm_staging WHERE key >= ? AND key < ? AND value IS NULL", (b"d/", b"d0"))  # type: ignore[attr-defined]
        assert rows[0][0] == 2000  # the deletions are there, and ``first`` read none of them


@pytest.mark.parametrize("backend", STAGING_BACKENDS)
def test_first_pages_through_committed_keys_deleted_in_staging(backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Committed keys staged as deleted are asked about a growing page at a time: 1,000 of them cost a
    handful of statements, and the first one left is found."""
    g = build_graveler(tmp_path / "refs.db", staging=backend)
    g.create_repository(R, "mem://repo")
    g.set_many(R, "main", [(b"c/%05d" % i, val("c")) for i in range(1001)])
    g.commit(R, "main", "many")
    g.set_many(R, "main", [(b"c/%05d" % i, None) for i in range(1000)])
    ref = g.resolve(R, "main")
    fast = g.refs._fast  # type: ignore[attr-defined]
    statements: list[str] = []
    query = fast.query
    monkeypatch.setattr(fast, "query", lambda text, params: statements.append(text) or query(text, params))
    assert g.first(R, ref, b"c/", b"c0") == (b"c/01000", val("c"))
    assert len(statements) <= 8, statements
    g.set_many(R, "main", [(b"c/01000", None)])
    assert g.first(R, g.resolve(R, "main"), b"c/", b"c0") is None


@pytest.mark.parametrize("backend", STAGING_BACKENDS)
def test_a_lookup_past_a_page_of_deletions_reads_none_of_them(backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``probe`` (a mount's lookup of a name) reads one page of staged entries below the name with the
    branch row; when the page holds only deletions, ``first`` answers past it: the same statements after
    100 deletions as after 2,000, and the live key after them (or a committed one they do not hide) found."""
    counts = []
    for n in (100, 2000):
        g = build_graveler(tmp_path / f"{n}.db", staging=backend)
        g.create_repository(R, "mem://repo")
        g.set_many(R, "main", [(b"d/zz", val("c"))])
        g.commit(R, "main", "one committed key below d/, after the deletions")
        g.set_many(R, "main", [(b"d/f%05d" % i, None) for i in range(n)])
        g.set_many(R, "main", [(b"d/y", val("y"))])
        if isinstance(g.staging, LsmStaging):
            assert g.staging.settle(60), "compaction never settled"
        ref = g.resolve(R, "main")
        assert g.probe(R, ref, b"d", b"d/", b"d0") == (None, (b"d/y", val("y")))  # learns the branch's tokens
        fast = g.refs._fast  # type: ignore[attr-defined]
        statements: list[str] = []
        query = fast.query
        monkeypatch.setattr(
            fast, "query", lambda text, params, _seen=statements, _query=query: _seen.append(text) or _query(text, params)
        )
        assert g.probe(R, ref, b"d", b"d/", b"d0") == (None, (b"d/y", val("y")))
        monkeypatch.undo()
        g.set_many(R, "main", [(b"d/y", None)])
        assert g.probe(R, ref, b"d", b"d/", b"d0") == (None, (b"d/zz", val("c")))
        g.set_many(R, "main", [(b"d/zz", None)])
        assert g.probe(R, ref, b"d", b"d/", b"d0") == (None, None)
        counts.append(len(statements))
    assert counts[0] == counts[1] <= 4, counts
