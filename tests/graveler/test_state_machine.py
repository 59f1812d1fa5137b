"""Model-based test: random branch/commit/merge/reset/revert/cherry-pick sequences against plain dicts.

The model keeps, per branch, its head commit and a staging dict (key -> content or
None for a tombstone), and per commit its parents and a snapshot dict.  Merge,
revert and cherry-pick are computed in the model from first principles (common
ancestors, per-key three-way rules), not by asking lakemount.  After every step
every branch is compared in its three views (``b``, ``b@``, ``b$``), and every
new commit's tree when it appears.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from lakemount.errors import (
    AlreadyExists,
    BranchNotFound,
    InvalidArgument,
    MergeConflict,
    NotFound,
    NothingToCommit,
    ObjectNotFound,
    PreconditionFailed,
)
from lakemount.graveler.graveler import Graveler
from tests.budget import examples

from ._support import build_graveler, content, val

R = "repo"
KEYS = [b"a", b"b", b"c/x", b"c/y", b"d"]
CONTENTS = ["1", "2", "3"]
BRANCHES = ["main", "b1", "b2", "b3"]
PREFIXES = [b"", b"c/", b"a", b"c/x", b"z"]
STRATEGIES = [None, "fail", "source-wins", "dest-wins"]

Snap = dict[bytes, str]


def ancestors(parents: dict[str, tuple[str, ...]], cid: str) -> set[str]:
    seen = {cid}
    todo = [cid]
    while todo:
        for p in parents[todo.pop()]:
            if p not in seen:
                seen.add(p)
                todo.append(p)
    return seen


def best_common_ancestors(parents: dict[str, tuple[str, ...]], a: str, b: str) -> list[str]:
    common = ancestors(parents, a) & ancestors(parents, b)
    return sorted(c for c in common if not any(c != d and c in ancestors(parents, d) for d in common))


def three_way(base: Snap, src: Snap, dst: Snap, strategy: str | None) -> tuple[Snap, list[bytes]]:
    out: Snap = {}
    conflicts: list[bytes] = []
    for k in sorted(set(base) | set(src) | set(dst)):
        b, s, d = base.get(k), src.get(k), dst.get(k)
        if s == d or s == b:
            r = d
        elif d == b:
            r = s
        elif strategy == "source-wins":
            r = s
        elif strategy == "dest-wins":
            r = d
        else:
            conflicts.append(k)
            r = d
        if r is not None:
            out[k] = r
    return out, conflicts


def overlay(committed: Snap, staging: dict[bytes, str | None]) -> Snap:
    out = dict(committed)
    for k, v in staging.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


class GravelerMachine(RuleBasedStateMachine):
    STAGING = "sql"
    STAGING_KW: dict[str, object] = {}

    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.mkdtemp(prefix="lm-sm-")
        self.g: Graveler = build_graveler(Path(self.tmp) / "refs.db", staging=self.STAGING, **self.STAGING_KW)
        self.g.create_repository(R, "mem://repo")
        root = self.g.resolve(R, "main").commit_id
        self.snaps: dict[str, Snap] = {root: {}}
        self.parents: dict[str, tuple[str, ...]] = {root: ()}
        self.heads: dict[str, str] = {"main": root}
        self.staging: dict[str, dict[bytes, str | None]] = {"main": {}}
        self.unchecked: list[str] = []
        self.tags: dict[str, str] = {}

    def teardown(self) -> None:
        try:
            for cid, snap in self.snaps.items():
                self.check_commit(cid, snap)
        finally:
            self.g.refs.engine.dispose()  # type: ignore[attr-defined]
            shutil.rmtree(self.tmp, ignore_errors=True)

    # -- helpers ---------------------------------------------------------------
    def scan(self, ref: str) -> Snap:
        out: Snap = {}
        resolved = self.g.resolve(R, ref)
        for k, v in self.g.scan(R, resolved):
            c = content(v)
            assert c is not None
            out[k] = c
        # The decoding scan (listings) agrees, also once its ranges keep decoded blocks.
        for _ in range(2):
            assert {k: e.etag for k, e in self.g.scan_entries(R, resolved)} == out, ref
        return out

    def check_commit(self, cid: str, snap: Snap) -> None:
        assert self.scan(cid) == snap, cid
        assert self.g.get_commit(R, cid).parents == self.parents[cid]

    def view(self, branch: str) -> Snap:
        return overlay(self.snaps[self.heads[branch]], self.staging[branch])

    def add_commit(self, cid: str, parents: tuple[str, ...], snap: Snap) -> None:
        assert cid not in self.snaps
        self.snaps[cid] = snap
        self.parents[cid] = parents
        self.unchecked.append(cid)

    def pick_commit(self, i: int) -> str:
        ids = sorted(self.snaps)
        return ids[i % len(ids)]

    def expect_missing_branch(self, branch: str) -> bool:
        return branch not in self.heads

    @initialize(n=st.integers(0, 3))
    def start_branches(self, n: int) -> None:
        for name in BRANCHES[1 : 1 + n]:
            self.g.create_branch(R, name, "main")
            self.heads[name] = self.heads["main"]
            self.staging[name] = {}

    # -- staging ---------------------------------------------------------------
    @rule(branch=st.sampled_from(BRANCHES), key=st.sampled_from(KEYS), c=st.sampled_from(CONTENTS))
    def put(self, branch: str, key: bytes, c: str) -> None:
        if branch not in self.heads:
            try:
                self.g.set(R, branch, key, val(c))
            except BranchNotFound:
                return
            raise AssertionError("set on a missing branch succeeded")
        self.g.set(R, branch, key, val(c))
        self.staging[branch][key] = c

    @rule(
        branch=st.sampled_from(BRANCHES),
        items=st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from([None, *CONTENTS])), max_size=4),
    )
    def put_many(self, branch: str, items: list[tuple[bytes, str | None]]) -> None:
        if branch not in self.heads:
            return
        self.g.set_many(R, branch, [(k, None if c is None else val(c)) for k, c in items])
        for k, c in items:
            self.staging[branch][k] = c

    @rule(branch=st.sampled_from(BRANCHES), key=st.sampled_from(KEYS))
    def delete(self, branch: str, key: bytes) -> None:
        if branch not in self.heads:
            return
        if key not in self.view(branch):
            try:
                self.g.delete(R, branch, key)
            except ObjectNotFound:
                return
            raise AssertionError("deleting an absent key succeeded")
        self.g.delete(R, branch, key)
        self.staging[branch][key] = None

    @rule(branch=st.sampled_from(BRANCHES))
    def reset_all(self, branch: str) -> None:
        if branch not in self.heads:
            return
        self.g.reset(R, branch)
        self.staging[branch] = {}

    @rule(branch=st.sampled_from(BRANCHES), prefix=st.sampled_from(PREFIXES))
    def reset_prefix(self, branch: str, prefix: bytes) -> None:
        if branch not in self.heads:
            return
        self.g.reset(R, branch, prefix=prefix)
        self.staging[branch] = {k: v for k, v in self.staging[branch].items() if not k.startswith(prefix)}

    @rule(branch=st.sampled_from(BRANCHES), key=st.sampled_from(KEYS))
    def reset_key(self, branch: str, key: bytes) -> None:
        if branch not in self.heads:
            return
        self.g.reset(R, branch, key=key)
        self.staging[branch].pop(key, None)

    # -- commits and branches -----------------------------------------------------
    @rule(branch=st.sampled_from(BRANCHES), allow_empty=st.booleans())
    def commit(self, branch: str, allow_empty: bool) -> None:
        if branch not in self.heads:
            try:
                self.g.commit(R, branch, "m", allow_empty=allow_empty)
            except BranchNotFound:
                return
            raise AssertionError("commit on a missing branch succeeded")
        head = self.heads[branch]
        new = self.view(branch)
        if not allow_empty and new == self.snaps[head]:
            try:
                self.g.commit(R, branch, "m")
            except NothingToCommit:
                return
            raise AssertionError(f"commit of no change succeeded (staging {self.staging[branch]})")
        cid = self.g.commit(R, branch, "m", allow_empty=allow_empty).commit.id
        self.add_commit(cid, (head,), new)
        self.heads[branch] = cid
        self.staging[branch] = {}

    @rule(
        branch=st.sampled_from(BRANCHES),
        items=st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from([None, *CONTENTS])), min_size=1, max_size=3),
    )
    def edit_and_commit(self, branch: str, items: list[tuple[bytes, str | None]]) -> None:
        """The common case, as one step: stage some changes and commit them."""
        if branch not in self.heads:
            return
        self.put_many(branch, items)
        self.commit(branch, False)

    @rule(name=st.sampled_from(BRANCHES), source=st.sampled_from(BRANCHES), at=st.one_of(st.none(), st.integers(0, 50)))
    def create_branch(self, name: str, source: str, at: int | None) -> None:
        src = source if at is None else self.pick_commit(at)
        if at is None and source not in self.heads:
            try:
                self.g.create_branch(R, name, src)
            except NotFound:
                return
            raise AssertionError("created a branch from a missing source")
        if name in self.heads:
            try:
                self.g.create_branch(R, name, src)
            except AlreadyExists:
                return
            raise AssertionError("created an existing branch")
        self.g.create_branch(R, name, src)
        self.heads[name] = self.heads[source] if at is None else src
        self.staging[name] = {}

    @rule(name=st.sampled_from(BRANCHES))
    def delete_branch(self, name: str) -> None:
        if name == "main":
            try:
                self.g.delete_branch(R, name)
            except InvalidArgument:
                return
            raise AssertionError("deleted the default branch")
        if name not in self.heads:
            try:
                self.g.delete_branch(R, name)
            except BranchNotFound:
                return
            raise AssertionError("deleted a missing branch")
        self.g.delete_branch(R, name)
        del self.heads[name]
        del self.staging[name]

    @rule(
        name=st.sampled_from(["t1", "t2"]),
        source=st.sampled_from(BRANCHES),
        at=st.one_of(st.none(), st.integers(0, 50)),
    )
    def create_tag(self, name: str, source: str, at: int | None) -> None:
        if at is None and source not in self.heads:
            return
        cid = self.heads[source] if at is None else self.pick_commit(at)
        if name in self.tags:
            try:
                self.g.create_tag(R, name, cid)
            except AlreadyExists:
                return
            raise AssertionError("created an existing tag")
        self.g.create_tag(R, name, cid)
        self.tags[name] = cid

    @rule(name=st.sampled_from(["t1", "t2"]))
    def delete_tag(self, name: str) -> None:
        if name not in self.tags:
            try:
                self.g.delete_tag(R, name)
            except NotFound:
                return
            raise AssertionError("deleted a missing tag")
        self.g.delete_tag(R, name)
        del self.tags[name]

    # -- merge ---------------------------------------------------------------------
    @rule(
        source=st.sampled_from(BRANCHES),
        dest=st.sampled_from(BRANCHES),
        strategy=st.sampled_from(STRATEGIES),
        squash=st.booleans(),
    )
    def merge(self, source: str, dest: str, strategy: str | None, squash: bool) -> None:
        def attempt() -> None:
            self.g.merge(R, source, dest, strategy=strategy, squash=squash)

        if dest not in self.heads:
            self._expect(attempt, BranchNotFound)
            return
        if self.dirty(dest):
            self._expect(attempt, PreconditionFailed)
            return
        if source not in self.heads:
            self._expect(attempt, NotFound)
            return
        src, dst = self.heads[source], self.heads[dest]
        if src in ancestors(self.parents, dst):
            res = self.g.merge(R, source, dest, strategy=strategy, squash=squash)
            assert not res.merged and res.commit_id == dst
            assert self.g.resolve(R, dest).commit_id == dst
            return
        if dst in ancestors(self.parents, src):
            bases = [dst]
            outcomes = [(dict(self.snaps[src]), [])]
        else:
            bases = best_common_ancestors(self.parents, src, dst)
            outcomes = [three_way(self.snaps[b], self.snaps[src], self.snaps[dst], strategy) for b in bases]
        try:
            res = self.g.merge(R, source, dest, strategy=strategy, squash=squash)
        except MergeConflict as exc:
            event("merge: conflict")
            expected = [[k.decode() for k in c] for _, c in outcomes if c]
            assert exc.paths in expected, (exc.paths, expected)
            assert self.g.resolve(R, dest).commit_id == dst
            return
        # Only a source the destination reaches is lakeFS's "no changes" (handled above); anything else, even
        # one whose changes add up to none, is a merge commit.
        assert res.merged, "a source the destination does not reach was refused as no changes"
        event(f"merge: merged ({strategy}, {len(outcomes)} base(s))")
        got = self.scan(res.commit_id)
        assert any(not c and snap == got for snap, c in outcomes), (got, outcomes)
        self.add_commit(res.commit_id, (dst,) if squash else (dst, src), got)
        self.heads[dest] = res.commit_id
        if self.staging[dest]:
            event("merge: over staged entries that change nothing")
        self.staging[dest] = {}  # entries that changed nothing went with the old head

    @rule(
        source=st.sampled_from(BRANCHES),
        dest=st.sampled_from(BRANCHES),
        strategy=st.sampled_from(STRATEGIES),
        squash=st.booleans(),
    )
    def commit_and_merge(self, source: str, dest: str, strategy: str | None, squash: bool) -> None:
        """Merge into a clean destination (the staging of both sides committed first), so merges really happen."""
        for b in {source, dest}:
            if b in self.heads and self.staging[b]:
                self.commit(b, False)
                if self.staging[b]:
                    self.reset_all(b)
        self.merge(source, dest, strategy, squash)

    def dirty(self, branch: str) -> bool:
        """Whether the branch's staging changes its head's tree (what refuses a merge, revert or cherry-pick):
        a value written and deleted again, or written as the commit holds it, changes nothing."""
        committed = self.snaps[self.heads[branch]]
        return any(committed.get(k) != v for k, v in self.staging[branch].items())

    def _expect(self, fn: object, exc: type[BaseException]) -> None:
        before = dict(self.heads)
        try:
            fn()  # type: ignore[operator]
        except exc:
            assert {b.name: b.commit_id for b in self.g.list_branches(R)} == before
            return
        raise AssertionError(f"expected {exc.__name__}")

    # -- revert / cherry-pick ----------------------------------------------------------
    def _pick(self, kind: str, branch: str, i: int, parent_number: int | None) -> None:
        cid = self.pick_commit(i)
        parents = self.parents[cid]
        fn = self.g.revert if kind == "revert" else self.g.cherry_pick

        def attempt() -> None:
            fn(R, branch, cid, parent_number=parent_number)

        if parents and (
            (len(parents) > 1 and parent_number is None)
            or (parent_number is not None and not 1 <= parent_number <= len(parents))
        ):
            self._expect(attempt, InvalidArgument)
            return
        if branch not in self.heads:
            self._expect(attempt, BranchNotFound)
            return
        if self.dirty(branch):
            self._expect(attempt, PreconditionFailed)
            return
        parent_snap = self.snaps[parents[(parent_number or 1) - 1]] if parents else {}
        head = self.heads[branch]
        if kind == "revert":
            result, conflicts = three_way(self.snaps[cid], parent_snap, self.snaps[head], "fail")
        else:
            result, conflicts = three_way(parent_snap, self.snaps[cid], self.snaps[head], "fail")
        if conflicts:
            try:
                attempt()
            except MergeConflict as exc:
                event(f"{kind}: conflict")
                assert exc.paths == [k.decode() for k in conflicts]
                assert self.g.resolve(R, branch).commit_id == head
                return
            raise AssertionError(f"{kind} should conflict on {conflicts}")
        if result == self.snaps[head]:
            self._expect(attempt, NothingToCommit)
            return
        new = fn(R, branch, cid, parent_number=parent_number)
        event(f"{kind}: committed" + (" (merge commit)" if len(parents) > 1 else ""))
        self.add_commit(new.id, (head,), result)
        self.heads[branch] = new.id
        self.staging[branch] = {}  # entries that changed nothing went with the old head

    @rule(branch=st.sampled_from(BRANCHES), i=st.integers(0, 50), parent_number=st.sampled_from([None, 1, 2, 3]))
    def revert(self, branch: str, i: int, parent_number: int | None) -> None:
        self._pick("revert", branch, i, parent_number)

    @rule(branch=st.sampled_from(BRANCHES), i=st.integers(0, 50), parent_number=st.sampled_from([None, 1, 2]))
    def cherry_pick(self, branch: str, i: int, parent_number: int | None) -> None:
        self._pick("cherry-pick", branch, i, parent_number)

    @rule(i=st.integers(0, 50), j=st.integers(0, 50))
    def diffs(self, i: int, j: int) -> None:
        left, right = self.pick_commit(i), self.pick_commit(j)
        a, b = self.snaps[left], self.snaps[right]
        expected = [
            (k, "added" if k not in a else "removed" if k not in b else "changed")
            for k in sorted(set(a) | set(b))
            if a.get(k) != b.get(k)
        ]
        assert [(d.key, d.kind) for d in self.g.diff(R, left, right)] == expected
        assert [d.key for d in self.g.diff(R, left, right, prefix=b"c/")] == [
            k for k, _ in expected if k.startswith(b"c/")
        ]
        # Three-way (what merging right into left would do), from every possible best base.
        bases = best_common_ancestors(self.parents, left, right)
        got = {d.key: d.kind for d in self.g.diff_three_way(R, left, right)}
        candidates = []
        for base in bases:
            result, conflicts = three_way(self.snaps[base], b, a, "fail")
            kinds = {k: "conflict" for k in conflicts}
            for k in set(result) | set(a):
                if k not in kinds and result.get(k) != a.get(k):
                    kinds[k] = "added" if k not in a else "removed" if k not in result else "changed"
            candidates.append(kinds)
        assert got in candidates, (got, candidates)

    # -- invariants -------------------------------------------------------------------
    @invariant()
    def branches_match(self) -> None:
        assert {b.name: b.commit_id for b in self.g.list_branches(R)} == self.heads
        for branch, head in self.heads.items():
            committed = self.snaps[head]
            staged = self.staging[branch]
            assert self.scan(branch) == overlay(committed, staged), branch
            assert self.scan(branch + "@") == committed, branch
            assert self.scan(branch + "$") == {k: v for k, v in staged.items() if v is not None}, branch
            changed = {k for k, v in staged.items() if committed.get(k) != v}
            assert {d.key for d in self.g.diff_uncommitted(R, branch)} == changed
            log = [c.id for c in self.g.log(R, branch, first_parent=True)]
            assert log == list(_first_parent_chain(self.parents, head))
            ref = self.g.resolve(R, branch)
            for k in KEYS:
                assert content(self.g.get(R, ref, k)) == overlay(committed, staged).get(k)
        assert {t.name: t.commit_id for t in self.g.list_tags(R)} == self.tags
        for name, cid in self.tags.items():
            assert self.scan(name) == self.snaps[cid]
            if self.parents[cid]:
                assert self.scan(name + "~1") == self.snaps[self.parents[cid][0]]
        for cid in self.unchecked:
            self.check_commit(cid, self.snaps[cid])
        self.unchecked.clear()


def _first_parent_chain(parents: dict[str, tuple[str, ...]], cid: str) -> Iterable[str]:
    while True:
        yield cid
        if not parents[cid]:
            return
        cid = parents[cid][0]


_SETTINGS = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.filter_too_much],
    "stateful_step_count": 40,
}


class TestGravelerModel(GravelerMachine.TestCase):  # type: ignore[name-defined,misc]
    settings = settings(max_examples=examples(35), **_SETTINGS)  # type: ignore[arg-type]


class LsmGravelerMachine(GravelerMachine):
    """The same model on the LSM staging; a short L1 list so that compaction runs between the steps."""

    STAGING = "lsm"
    STAGING_KW = {"l1_max": 3}


class TestGravelerModelLsm(LsmGravelerMachine.TestCase):  # type: ignore[name-defined,misc]
    settings = settings(max_examples=examples(35), **_SETTINGS)  # type: ignore[arg-type]


@pytest.mark.slow
class TestGravelerModelLong(GravelerMachine.TestCase):  # type: ignore[name-defined,misc]
    settings = settings(max_examples=400, **_SETTINGS)  # type: ignore[arg-type]
