"""Move records (a directory rename in constant time): a model-based test against a dict, and the cases by name.

The model is one dict per branch state: what a reader of the branch sees.  A move of
``old/`` to ``new/`` in it puts every key under ``old/`` under ``new/`` (over what
``new/`` held; what it held and ``old/`` did not stays) and empties ``old/``.  After
every step the branch is compared point by point, by scan, by ``diff_uncommitted``,
from a second Graveler on the same stores (another process), and after a commit
the commit's tree; both staging backends (LSM with compaction between steps).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from lakemount.errors import InvalidArgument, NothingToCommit
from lakemount.graveler.graveler import Graveler
from lakemount.graveler.model import Entry, decode_value
from lakemount.graveler.moves import MAX_MOVES, Layers, Move, move_of, remap_names
from tests.budget import examples

from ._support import STAGING_BACKENDS, build_graveler, content, fresh_view, val

R = "repo"
DIRS = [b"a/", b"b/", b"c/", b"a/s/", b"b/s/"]
NAMES = [b"x", b"y", b"s/z"]
KEYS = sorted({d + n for d in DIRS for n in NAMES})

Model = dict[bytes, str]


def moved(model: Model, old: bytes, new: bytes) -> Model:
    out = {k: v for k, v in model.items() if not k.startswith(old)}
    out.update({new + k[len(old) :]: v for k, v in model.items() if k.startswith(old)})
    return out


class MoveMachine(RuleBasedStateMachine):
    STAGING = "sql"

    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.mkdtemp(prefix="lm-mv-")
        self.g: Graveler = build_graveler(Path(self.tmp) / "refs.db", staging=self.STAGING, **(
            {"l1_max": 3} if self.STAGING == "lsm" else {}))
        self.g.create_repository(R, "mem://repo")
        self.other = fresh_view(self.g)
        self.view: Model = {}
        self.committed: Model = {}
        self.n = 0

    def teardown(self) -> None:
        self.g.refs.engine.dispose()  # type: ignore[attr-defined]
        shutil.rmtree(self.tmp, ignore_errors=True)

    @initialize(keys=st.sets(st.sampled_from(KEYS), min_size=4, max_size=10), committed=st.booleans())
    def some_files(self, keys: set[bytes], committed: bool) -> None:
        """Files in several directories from the first step (a move then often meets what its target holds)."""
        for i, key in enumerate(sorted(keys)):
            self.write(key, "123"[i % 3])
        if committed:
            self.commit()

    @rule(key=st.sampled_from(KEYS), c=st.sampled_from(["1", "2", "3"]))
    def write(self, key: bytes, c: str) -> None:
        self.g.set(R, "main", key, val(c))
        self.view[key] = c

    @rule(key=st.sampled_from(KEYS))
    def delete(self, key: bytes) -> None:
        if key in self.view:
            self.g.delete(R, "main", key)
            del self.view[key]

    @rule(old=st.sampled_from(DIRS), new=st.sampled_from(DIRS))
    def move(self, old: bytes, new: bytes) -> None:
        if old.startswith(new) or new.startswith(old):
            with pytest.raises(InvalidArgument):
                self.g.move(R, "main", old, new)
            return
        assert self.g.move(R, "main", old, new)
        self.view = moved(self.view, old, new)

    @rule()
    def commit(self) -> None:
        self.n += 1
        try:
            self.g.commit(R, "main", f"c{self.n}")
        except NothingToCommit:
            assert self.view == self.committed
            return
        self.committed = dict(self.view)
        assert self._read(self.g, "main@") == self.committed
        assert not self.g.has_uncommitted(R, self.g.get_branch(R, "main"))

    @rule()
    def reset_all(self) -> None:
        self.g.reset(R, "main")
        self.view = dict(self.committed)

    @rule(prefix=st.sampled_from([b"a/", b"c/", b"a/s/", b"d/"]))
    def reset_prefix(self, prefix: bytes) -> None:
        b = self.g.get_branch(R, "main")
        ranges = Layers(b.tokens).ranges() if any(move_of(t) for t in b.tokens) else []
        if any(prefix.startswith(lo) or lo.startswith(prefix) for lo, _hi in ranges):
            with pytest.raises(InvalidArgument):
                self.g.reset(R, "main", prefix=prefix)
            return
        self.g.reset(R, "main", prefix=prefix)
        self.view = {k: v for k, v in self.view.items() if not k.startswith(prefix)}
        self.view.update({k: v for k, v in self.committed.items() if k.startswith(prefix)})

    def _read(self, g: Graveler, ref: str, start: bytes = b"", stop: bytes | None = None) -> Model:
        out: Model = {}
        for k, v in g.scan(R, g.resolve(R, ref), start, stop):
            c = content(v)
            assert c is not None
            out[k] = c
        return out

    @invariant()
    def agrees(self) -> None:
        ref = self.g.resolve(R, "main")
        assert self._read(self.g, "main") == self.view
        assert self._read(self.other, "main") == self.view  # another process: the row carries the moves
        assert {k: e.etag for k, e in self.g.scan_entries(R, ref)} == self.view
        for lo, hi in [(b"a/", b"a0"), (b"a/s/", b"a/s0"), (b"b/x", b"c/y")]:
            assert self._read(self.g, "main", lo, hi) == {k: v for k, v in self.view.items() if lo <= k < hi}
        for k in KEYS:
            assert content(self.g.get(R, ref, k)) == self.view.get(k), k
        diff = {d.key: content(d.right) for d in self.g.diff_uncommitted(R, "main")}
        want = {k: self.view.get(k) for k in set(self.view) | set(self.committed) if self.view.get(k) != self.committed.get(k)}
        assert diff == want


_SETTINGS = settings(max_examples=examples(30), stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class TestMovesSql(MoveMachine.TestCase):  # type: ignore[name-defined,misc]
    settings = _SETTINGS


class LsmMoveMachine(MoveMachine):
    STAGING = "lsm"


class TestMovesLsm(LsmMoveMachine.TestCase):  # type: ignore[name-defined,misc]
    settings = _SETTINGS


@pytest.fixture(params=STAGING_BACKENDS)
def g(request: pytest.FixtureRequest, tmp_path: Path) -> Graveler:
    g = build_graveler(tmp_path / "refs.db", staging=request.param)
    g.create_repository(R, "mem://repo")
    return g


def _tree(g: Graveler, ref: str) -> dict[bytes, str | None]:
    return {k: content(v) for k, v in g.scan(R, g.resolve(R, ref))}


def test_a_rename_is_one_row_change_whatever_it_holds(g: Graveler) -> None:
    for i in range(300):
        g.set(R, "main", b"d/%03d" % i, val(str(i)))
    g.commit(R, "main", "tree")
    before = g.get_branch(R, "main")
    assert g.move(R, "main", b"d/", b"e/")
    after = g.get_branch(R, "main")
    assert after.commit_id == before.commit_id and after.sealed_tokens == (Move(b"d/", b"e/").token, *before.tokens)
    assert not g.count_changes(R, before)  # nothing was staged per key: the old token holds nothing
    tree = _tree(g, "main")
    assert len(tree) == 300 and all(k.startswith(b"e/") for k in tree)
    result = g.commit(R, "main", "moved")
    assert result.stats is not None and result.stats.changes_applied == 600
    assert _tree(g, "main@") == tree


def test_a_write_after_the_rename_keeps_its_name_and_one_before_moves(g: Graveler) -> None:
    g.set(R, "main", b"d/old", val("1"))
    assert g.move(R, "main", b"d/", b"e/")
    g.set(R, "main", b"d/new", val("2"))  # the old name made again after the rename
    assert _tree(g, "main") == {b"e/old": "1", b"d/new": "2"}
    g.commit(R, "main", "c")
    assert _tree(g, "main@") == {b"e/old": "1", b"d/new": "2"}


def test_renames_of_renames_and_reset(g: Graveler) -> None:
    g.set(R, "main", b"a/f", val("1"))
    g.commit(R, "main", "c")
    assert g.move(R, "main", b"a/", b"b/") and g.move(R, "main", b"b/", b"c/")
    g.set(R, "main", b"a/g", val("2"))
    assert g.move(R, "main", b"a/", b"b/")
    assert _tree(g, "main") == {b"c/f": "1", b"b/g": "2"}
    g.reset(R, "main")
    assert _tree(g, "main") == {b"a/f": "1"}


def test_a_write_into_the_target_that_raced_the_rename_is_kept(g: Graveler) -> None:
    g.set(R, "main", b"a/f", val("1"))
    g.set(R, "main", b"b/raced", val("2"))  # the front end checked b/ empty; another host wrote meanwhile
    assert g.move(R, "main", b"a/", b"b/")
    assert _tree(g, "main") == {b"b/f": "1", b"b/raced": "2"}


def test_the_source_wins_over_what_the_target_held_under_the_same_name(g: Graveler) -> None:
    g.set_many(R, "main", [(b"a/x", val("1")), (b"b/s/x", val("2"))])
    g.commit(R, "main", "c")
    g.set_many(R, "main", [(b"a/s/x", val("3")), (b"b/x", val("4")), (b"b/y", val("5"))])
    assert g.move(R, "main", b"a/", b"b/")
    want = {b"b/x": "1", b"b/s/x": "3", b"b/y": "5"}
    assert _tree(g, "main") == want
    ref = g.resolve(R, "main")
    assert {k: content(g.get(R, ref, k)) for k in want} == want
    g.commit(R, "main", "moved")
    assert _tree(g, "main@") == want


def test_a_commit_in_flight_keeps_the_move_staged_above_it(g: Graveler) -> None:
    g.set(R, "main", b"a/f", val("1"))
    b = g.get_branch(R, "main")
    # What a commit does first: seal the tokens.  The rename comes between the seal and the swap.
    from lakemount.graveler.graveler import new_token
    from lakemount.graveler.model import Branch

    assert g.refs.cas_branch(R, b, Branch(b.name, b.commit_id, new_token(), b.tokens))
    assert g.move(R, "main", b"a/", b"b/")
    assert _tree(g, "main") == {b"b/f": "1"}
    g.commit(R, "main", "c")
    assert _tree(g, "main@") == {b"b/f": "1"}


def test_past_max_moves_the_caller_is_told_to_stage_per_key(g: Graveler) -> None:
    for i in range(MAX_MOVES):
        assert g.move(R, "main", b"p%d/" % i, b"p%d/" % (i + 1))
    assert not g.move(R, "main", b"q/", b"r/")


def test_link_names_are_renamed_through_a_move_and_committed(g: Graveler) -> None:
    def linked(names: list[str]) -> bytes:
        return Entry("data/x", 1, "x", link="\0".join(["g1", *sorted(names)])).value()

    g.set_many(R, "main", [(b"a/f", linked(["a/f", "o"])), (b"o", linked(["a/f", "o"]))])
    g.commit(R, "main", "links")
    assert g.move(R, "main", b"a/", b"d/")
    ref = g.resolve(R, "main")
    want = decode_value(linked(["d/f", "o"])).link
    for key in (b"d/f", b"o"):
        value = g.get(R, ref, key)
        assert value is not None and decode_value(value).link == want
    g.commit(R, "main", "moved")
    at = g.resolve(R, "main@")
    assert {k: decode_value(v).link for k, v in g.scan(R, at)} == {b"d/f": want, b"o": want}
    assert remap_names(val("1"), Move(b"a/", b"d/")) == val("1")


def test_writes_racing_a_rename_each_land_under_exactly_one_name(g: Graveler) -> None:
    """Writers keep staging new files into d/ while d/ is renamed to e/ (and back and forth): every
    acknowledged write is found under exactly one of its two names, none lost, none doubled."""
    import threading
    import time

    g.set(R, "main", b"d/seed", val("s"))
    g.commit(R, "main", "seed")
    acked: list[bytes] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer(w: int) -> None:
        other = fresh_view(g)  # another process's Graveler on the same stores
        try:
            i = 0
            while not stop.is_set() or i < 20:
                name = b"w%d-%04d" % (w, i)
                other.set(R, "main", b"d/" + name, val(name.decode()))
                acked.append(name)
                i += 1
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(2)]
    for t in threads:
        t.start()
    def await_writes(n: int, what: str) -> None:
        deadline = time.monotonic() + 60
        while len(acked) < n and not errors:
            assert time.monotonic() < deadline, f"the writers never made {n} writes {what}"
            time.sleep(0.001)

    renames = 0
    try:
        await_writes(10, "before the first rename")
        for old, new in ((b"d/", b"e/"), (b"e/", b"f/")):
            assert g.move(R, "main", old, new)
            renames += 1
            await_writes(len(acked) + 10, f"after the rename of {old!r}")
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    if errors:
        raise errors[0]
    assert renames == 2
    tree = _tree(g, "main")
    for name in acked:
        found = [p for p in (b"d/", b"f/") if p + name in tree]
        assert len(found) == 1, (name, found)
        assert tree[found[0] + name] == name.decode()
    assert not any(k.startswith(b"e/") for k in tree)  # e/ moved on to f/ whole
    assert sum(1 for k in tree if k.startswith(b"f/")) > 1 and any(k.startswith(b"d/") for k in tree)
    g.commit(R, "main", "after the race")
    assert _tree(g, "main@") == tree
