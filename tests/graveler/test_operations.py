"""The lakeFS operation set on the Graveler facade: refs, log, diff, revert, cherry-pick, protection, bad input."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from lakemount.cache.ram import RamCache
from lakemount.errors import (
    AlreadyExists,
    AmbiguousRef,
    BranchNotFound,
    CommitNotFound,
    InvalidArgument,
    MergeConflict,
    NotFound,
    NothingToCommit,
    ObjectNotFound,
    PreconditionFailed,
    RefNotFound,
    RepositoryNotFound,
)
from lakemount.graveler.committed.store import CommittedStore
from lakemount.graveler.graveler import Graveler
from lakemount.graveler.refexpr import View

from ._support import STAGING_BACKENDS, content, val

Factory = Callable[..., Graveler]
R = "repo"


def snapshot(g: Graveler, ref: str) -> dict[bytes, str | None]:
    return {k: content(v) for k, v in g.scan(R, g.resolve(R, ref))}


def state(g: Graveler) -> Any:
    """Everything committed: branch heads, tags, all commits (and each commit's tree)."""
    return (
        {b.name: b.commit_id for b in g.list_branches(R)},
        {t.name: t.commit_id for t in g.list_tags(R)},
        sorted(c.id for c in g.refs.list_commits(R)),
    )


@contextmanager
def unchanged(g: Graveler) -> Iterator[None]:
    before = state(g)
    yield
    assert state(g) == before


@pytest.fixture(params=STAGING_BACKENDS)
def g(make_graveler: Factory, request: pytest.FixtureRequest) -> Graveler:
    """A Graveler with one repository, once per staging backend."""
    g = make_graveler(staging=request.param)
    g.create_repository(R, "mem://repo")
    return g


def put(g: Graveler, branch: str, **files: str) -> None:
    g.set_many(R, branch, [(k.replace("__", "/").encode(), val(v)) for k, v in files.items()])


def commit(g: Graveler, branch: str, msg: str = "c", **files: str) -> str:
    put(g, branch, **files)
    return g.commit(R, branch, msg).commit.id


# --------------------------------------------------------------------------- ref expressions


def test_ref_expressions(g: Graveler) -> None:
    c1 = commit(g, "main", "one", a="1")
    c2 = commit(g, "main", "two", a="2")
    g.create_branch(R, "dev", "main~1")
    d1 = commit(g, "dev", "dev", b="1")
    m = g.merge(R, "dev", "main").commit_id
    c0 = g.commit_of(R, "main~3").id
    assert g.commit_of(R, c0).parents == ()
    assert g.resolve(R, "main").commit_id == m
    assert g.resolve(R, "main~1").commit_id == c2
    assert g.resolve(R, "main~").commit_id == c2
    assert g.resolve(R, "main~2").commit_id == c1
    assert g.resolve(R, "main^").commit_id == c2
    assert g.resolve(R, "main^1").commit_id == c2
    assert g.resolve(R, "main^2").commit_id == d1
    assert g.resolve(R, "main^2~1").commit_id == c1
    assert g.resolve(R, "main~0").commit_id == m
    assert g.resolve(R, "main^0").commit_id == m
    assert g.resolve(R, "main~1^1").commit_id == c1
    assert g.resolve(R, "main~1^1~1").commit_id == c0
    with pytest.raises(RefNotFound):
        g.resolve(R, "main~4")
    with pytest.raises(RefNotFound):
        g.resolve(R, "main^3")
    with pytest.raises(RefNotFound):
        g.resolve(R, "main~1^2")

    # Commit ids: full, unique prefix, too short, unknown.
    assert g.resolve(R, m).commit_id == m
    assert g.resolve(R, m[:8]).kind == "commit"
    assert g.resolve(R, m[:8] + "~1").commit_id == c2
    with pytest.raises(RefNotFound):
        g.resolve(R, m[:3])
    with pytest.raises(RefNotFound):
        g.resolve(R, "0000000f")
    with pytest.raises(RefNotFound):
        g.resolve(R, "nope")

    # Tags.
    g.create_tag(R, "v1.0", "main~1")
    r = g.resolve(R, "v1.0")
    assert (r.kind, r.commit_id, r.view) == ("tag", c2, View.COMMITTED)
    assert g.resolve(R, "v1.0~1").commit_id == c1
    with pytest.raises(InvalidArgument):
        g.resolve(R, "v1.0@")
    with pytest.raises(InvalidArgument):
        g.resolve(R, m[:10] + "$")


def test_branch_views(g: Graveler) -> None:
    commit(g, "main", a="1", b="1")
    put(g, "main", a="2", c="new")
    g.delete(R, "main", b"b")
    assert snapshot(g, "main") == {b"a": "2", b"c": "new"}
    assert snapshot(g, "main@") == {b"a": "1", b"b": "1"}
    assert snapshot(g, "main$") == {b"a": "2", b"c": "new"}
    assert g.resolve(R, "main@").view is View.COMMITTED
    assert g.resolve(R, "main$").view is View.STAGING
    assert g.resolve(R, "main").writable and not g.resolve(R, "main@").writable
    assert g.get(R, g.resolve(R, "main$"), b"b") is None  # a tombstone reads as absent
    assert content(g.get(R, g.resolve(R, "main@"), b"b")) == "1"
    with pytest.raises(InvalidArgument):
        g.resolve(R, "main~1@")
    with pytest.raises(InvalidArgument):
        g.resolve(R, "main@@")
    for bad in ("", "@", "$", "~1", "a b", "main/x"):
        with pytest.raises(InvalidArgument):
            g.resolve(R, bad)


def test_ambiguous_prefix_always(g: Graveler) -> None:
    # Make commits until two ids share a 4-hex prefix (birthday bound: ~300 commits expected at most rarely).
    seen: dict[str, str] = {}
    i = 0
    while True:
        cid = commit(g, "main", f"m{i}", k=str(i))
        if cid[:4] in seen:
            break
        seen[cid[:4]] = cid
        i += 1
    with pytest.raises(AmbiguousRef):
        g.resolve(R, cid[:4])
    # One more hex digit (or the rest) disambiguates.
    n = next(n for n in range(5, 65) if cid[:n] != seen[cid[:4]][:n])
    assert g.resolve(R, cid[:n]).commit_id == cid


# --------------------------------------------------------------------------- log


def test_log_filters(g: Graveler) -> None:
    c1 = commit(g, "main", "a1", **{"a__x": "1"})
    c2 = commit(g, "main", "b1", **{"b__y": "1"})
    g.create_branch(R, "dev", "main")
    d1 = commit(g, "dev", "dev a", **{"a__z": "1"})
    c3 = commit(g, "main", "b2", **{"b__y": "2"})
    m = g.merge(R, "dev", "main").commit_id
    c4 = commit(g, "main", "a2", **{"a__x": "2"})
    root = g.commit_of(R, c1).parents[0]

    ids = lambda it: [c.id for c in it]  # noqa: E731
    assert ids(g.log(R, "main")) == [c4, m, c3, d1, c2, c1, root]
    assert ids(g.log(R, "main", first_parent=True)) == [c4, m, c3, c2, c1, root]
    assert ids(g.log(R, "main", limit=2)) == [c4, m]
    assert ids(g.log(R, "main", limit=0)) == []
    assert ids(g.log(R, "main", paths=[b"a/x"])) == [c4, c1]
    assert ids(g.log(R, "main", paths=[b"b/y"])) == [c3, c2]
    # The merge brought a/z into main: a path filter keeps it (it differs from its first parent).
    assert ids(g.log(R, "main", prefixes=[b"a/"])) == [c4, m, d1, c1]
    assert ids(g.log(R, "main", prefixes=[b"a/"], first_parent=True)) == [c4, m, c1]
    assert ids(g.log(R, "main", prefixes=[b"nothing/"])) == []
    assert ids(g.log(R, "main", paths=[b"a/x", b"b/y"], limit=3)) == [c4, c3, c2]
    since = g.commit_of(R, c3).creation_date
    assert ids(g.log(R, "main", since=since)) == [c4, m, c3]  # d1 is older than c3
    assert ids(g.log(R, "dev")) == [d1, c2, c1, root]
    assert ids(g.log(R, "main~2")) == [c3, c2, c1, root]


# --------------------------------------------------------------------------- diff


def test_diffs(g: Graveler) -> None:
    commit(g, "main", a="1", b="1", c="1")
    g.create_branch(R, "dev", "main")
    commit(g, "dev", a="2", d="1")
    g.delete(R, "dev", b"b")
    g.commit(R, "dev", "del b")
    commit(g, "main", c="2", a="3")

    two = {(d.key, d.kind, content(d.left), content(d.right)) for d in g.diff(R, "main", "dev")}
    assert two == {
        (b"a", "changed", "3", "2"),
        (b"b", "removed", "1", None),
        (b"c", "changed", "2", "1"),
        (b"d", "added", None, "1"),
    }
    assert list(g.diff(R, "main", "main")) == []
    assert {d.key for d in g.diff(R, "main", "dev", prefix=b"b")} == {b"b"}
    assert [d.key for d in g.diff(R, "main", "dev")] == sorted(d.key for d in g.diff(R, "main", "dev"))

    three = {(d.key, d.kind, content(d.left), content(d.right)) for d in g.diff_three_way(R, "main", "dev")}
    assert three == {
        (b"a", "conflict", "3", "2"),
        (b"b", "removed", "1", None),
        (b"d", "added", None, "1"),
    }

    put(g, "main", c="9", e="1")
    g.delete(R, "main", b"a")
    put(g, "main", b="1")  # equal to committed: not a change
    unc = {(d.key, d.kind, content(d.left), content(d.right)) for d in g.diff_uncommitted(R, "main")}
    assert unc == {(b"a", "removed", "3", None), (b"c", "changed", "2", "9"), (b"e", "added", None, "1")}
    assert {d.key for d in g.diff_uncommitted(R, "main", prefix=b"e")} == {b"e"}
    # Two-way diff of a branch uses its committed head, not its staging.
    assert {d.key for d in g.diff(R, "main", "main@")} == set()


# --------------------------------------------------------------------------- merge


def test_merge_conflicts_list_paths_and_change_nothing(g: Graveler) -> None:
    commit(g, "main", **{"p__a": "0", "p__b": "0", "q": "0", "r": "0"})
    g.create_branch(R, "dev", "main")
    commit(g, "dev", **{"p__a": "dev", "p__b": "same", "q": "dev", "new": "dev"})
    g.delete(R, "dev", b"r")
    g.commit(R, "dev", "del r")
    commit(g, "main", **{"p__a": "main", "p__b": "same", "r": "main", "new": "main"})
    with unchanged(g), pytest.raises(MergeConflict) as ei:
        g.merge(R, "dev", "main")
    assert ei.value.paths == ["new", "p/a", "r"]
    g.merge(R, "dev", "main", strategy="dest-wins")
    assert snapshot(g, "main") == {b"p/a": "main", b"p/b": "same", b"q": "dev", b"r": "main", b"new": "main"}
    with pytest.raises(InvalidArgument):
        g.merge(R, "dev", "main", strategy="ours")


def test_merge_into_dirty_branch_refused(g: Graveler) -> None:
    commit(g, "main", a="1")
    g.create_branch(R, "dev", "main")
    commit(g, "dev", b="1")
    put(g, "main", c="1")
    with unchanged(g), pytest.raises(PreconditionFailed):
        g.merge(R, "dev", "main")


def test_staged_entries_that_change_nothing_do_not_block_a_merge(g: Graveler) -> None:
    # An editor's swap file written and deleted in the mount, and a key rewritten as committed, leave
    # staged entries that change nothing: lakeFS merges over them (its checkEmpty), and so do we.
    # Before, the merge was refused as dirty while a commit said "nothing to commit".
    commit(g, "main", a="1")
    g.create_branch(R, "dev", "main")
    commit(g, "dev", b="1", c="1")
    put(g, "main", a="1", b="x")  # b: the merge brings it; its tombstone must not hide it
    g.delete(R, "main", b"b")
    g.set(R, "main", b"tmp.swp", val("x"))
    g.delete(R, "main", b"tmp.swp")
    main = g.get_branch(R, "main")
    assert list(g.diff_uncommitted(R, "main")) == [] and g.has_uncommitted(R, main) and not g.has_changes(R, main)
    with pytest.raises(NothingToCommit):
        g.commit(R, "main", "nothing")
    res = g.merge(R, "dev", "main")
    assert res.merged and snapshot(g, "main") == {b"a": "1", b"b": "1", b"c": "1"}
    assert not g.has_uncommitted(R, g.get_branch(R, "main"))  # the no-op entries went with the old head
    put(g, "main", d="1")  # a real change still refuses, and stays staged
    assert g.has_changes(R, g.get_branch(R, "main"))
    g.create_branch(R, "dev2", "dev")
    commit(g, "dev2", e="1")
    with unchanged(g), pytest.raises(PreconditionFailed):
        g.merge(R, "dev2", "main")
    assert snapshot(g, "main") == {b"a": "1", b"b": "1", b"c": "1", b"d": "1"}
    g.delete(R, "main", b"d")  # written and deleted: nothing again, so revert goes through too
    g.revert(R, "main", res.commit_id, parent_number=1)
    assert snapshot(g, "main") == {b"a": "1"} and not g.has_uncommitted(R, g.get_branch(R, "main"))


def test_merge_squash(g: Graveler) -> None:
    base = commit(g, "main", a="1")
    g.create_branch(R, "dev", "main")
    commit(g, "dev", b="1")
    commit(g, "dev", c="1")
    commit(g, "main", d="1")
    res = g.merge(R, "dev", "main", squash=True, message="squashed")
    c = g.commit_of(R, "main")
    assert c.id == res.commit_id and len(c.parents) == 1 and c.message == "squashed"
    assert snapshot(g, "main") == {b"a": "1", b"b": "1", b"c": "1", b"d": "1"}
    assert g.merge_base(R, g.resolve(R, "dev").commit_id, c.id) == base


# --------------------------------------------------------------------------- revert / cherry-pick


def test_revert_and_cherry_pick(g: Graveler) -> None:
    commit(g, "main", a="1", b="1")
    c2 = commit(g, "main", a="2", c="1")
    commit(g, "main", b="2")
    g.revert(R, "main", c2)
    assert snapshot(g, "main") == {b"a": "1", b"b": "2"}
    assert g.commit_of(R, "main").message.startswith("Revert ")
    # Reverting again conflicts? No: reverting the revert restores c2's changes.
    g.revert(R, "main", "main")
    assert snapshot(g, "main") == {b"a": "2", b"b": "2", b"c": "1"}

    g.create_branch(R, "dev", "main~4")
    g.cherry_pick(R, "dev", c2)
    assert snapshot(g, "dev") == {b"a": "2", b"b": "1", b"c": "1"}
    with unchanged(g), pytest.raises(NothingToCommit):
        g.cherry_pick(R, "dev", c2)
    # A revert that conflicts with later changes lists the paths.
    commit(g, "dev", a="3")
    with unchanged(g), pytest.raises(MergeConflict) as ei:
        g.revert(R, "dev", c2)
    assert ei.value.paths == ["a"]
    put(g, "dev", z="1")
    with unchanged(g), pytest.raises(PreconditionFailed):
        g.revert(R, "dev", "dev~1")


def test_revert_and_cherry_pick_merge_commits(g: Graveler) -> None:
    commit(g, "main", a="1", b="1")
    g.create_branch(R, "dev", "main")
    commit(g, "dev", b="dev", d="dev")
    commit(g, "main", a="main", m="main")
    merge = g.merge(R, "dev", "main").commit_id
    assert snapshot(g, "main") == {b"a": "main", b"b": "dev", b"d": "dev", b"m": "main"}

    with unchanged(g), pytest.raises(InvalidArgument):
        g.revert(R, "main", merge)  # a merge commit needs a parent number
    with unchanged(g), pytest.raises(InvalidArgument):
        g.revert(R, "main", merge, parent_number=3)
    with unchanged(g), pytest.raises(InvalidArgument):
        g.revert(R, "main", merge, parent_number=0)

    # Parent 1 (mainline): undo what the merge brought from dev.
    g.create_branch(R, "r1", "main")
    g.revert(R, "r1", merge, parent_number=1)
    assert snapshot(g, "r1") == {b"a": "main", b"b": "1", b"m": "main"}
    # Parent 2: undo what main had that dev did not.
    g.create_branch(R, "r2", "main")
    g.revert(R, "r2", merge, parent_number=2)
    assert snapshot(g, "r2") == {b"a": "1", b"b": "dev", b"d": "dev"}

    # Cherry-pick the merge onto a branch at the old base: parent 1 brings dev's changes.
    g.create_branch(R, "p1", "main~2")
    assert snapshot(g, "p1") == {b"a": "1", b"b": "1"}
    g.cherry_pick(R, "p1", merge, parent_number=1)
    assert snapshot(g, "p1") == {b"a": "1", b"b": "dev", b"d": "dev"}
    g.create_branch(R, "p2", "main~2")
    g.cherry_pick(R, "p2", merge, parent_number=2)
    assert snapshot(g, "p2") == {b"a": "main", b"b": "1", b"m": "main"}
    with pytest.raises(InvalidArgument):
        g.cherry_pick(R, "p2", merge)


# --------------------------------------------------------------------------- reset


def test_reset(g: Graveler) -> None:
    commit(g, "main", **{"a__1": "0", "a__2": "0", "b__1": "0"})
    put(g, "main", **{"a__1": "x", "a__3": "x", "b__1": "x", "c": "x"})
    g.delete(R, "main", b"a/2")
    g.reset(R, "main", key=b"c")
    assert snapshot(g, "main$") == {b"a/1": "x", b"a/3": "x", b"b/1": "x"}
    g.reset(R, "main", prefix=b"a/")
    assert snapshot(g, "main") == {b"a/1": "0", b"a/2": "0", b"b/1": "x"}
    g.reset(R, "main")
    assert snapshot(g, "main") == snapshot(g, "main@")
    assert list(g.diff_uncommitted(R, "main")) == []
    with pytest.raises(NothingToCommit):
        g.commit(R, "main", "nothing")


# --------------------------------------------------------------------------- protection


def test_protection_rules_are_stored_not_enforced(g: Graveler) -> None:
    # Graveler keeps the rules (journaled for recovery); the catalog enforces
    # them (tests/catalog/test_protection.py), so graveler itself still writes.
    g.set_protection_rules(R, ["release-*", "main", "main"])
    assert g.protection_rules(R) == ["main", "release-*"]
    commit(g, "main", a="1")
    assert snapshot(g, "main") == {b"a": "1"}
    g.set_protection_rules(R, [])
    assert g.protection_rules(R) == []
    with pytest.raises(RepositoryNotFound):
        g.protection_rules("nope")


# --------------------------------------------------------------------------- bad input


def test_invalid_namespaces(g: Graveler) -> None:
    # Names are the catalog's rule (tests/catalog/test_names.py); graveler refuses what breaks its own store.
    with pytest.raises(InvalidArgument):
        g.create_repository("other", "no-scheme")
    with pytest.raises(AlreadyExists):
        g.create_repository(R, "mem://elsewhere")
    with pytest.raises(AlreadyExists):
        g.create_repository("other", "mem://repo/")
    assert [r.name for r in g.list_repositories()] == [R]


def test_hex_branch_names_as_in_lakefs(g: Graveler) -> None:
    # Hex names are branch names like any other (lakeFS's rule); only an existing commit's exact id is taken.
    head = g.get_branch(R, "main").commit_id
    with unchanged(g):
        with pytest.raises(AlreadyExists, match="commit"):
            g.create_branch(R, head, "main")
    for name in ("f" * 40, "f" * 64, head[:12]):
        b = g.create_branch(R, name, "main")
        assert g.get_branch(R, name) == b and g.resolve(R, name).kind == "branch"
        g.delete_branch(R, name)
    assert g.resolve(R, head).kind == "commit"


def test_unknown_things(g: Graveler) -> None:
    commit(g, "main", a="1")
    with unchanged(g):
        with pytest.raises(RepositoryNotFound):
            g.resolve("nope-repo", "main")
        with pytest.raises(RepositoryNotFound):
            g.set("nope-repo", "main", b"a", val("1"))
        with pytest.raises(RepositoryNotFound):
            g.list_branches("nope-repo")
        with pytest.raises(BranchNotFound):
            g.set(R, "nope", b"a", val("1"))
        with pytest.raises(BranchNotFound):
            g.commit(R, "nope", "m")
        with pytest.raises(NotFound):
            g.create_branch(R, "x", "nope")
        with pytest.raises(NotFound):
            g.create_tag(R, "t", "nope")
        with pytest.raises(NotFound):
            g.merge(R, "nope", "main")
        with pytest.raises(BranchNotFound):
            g.merge(R, "main", "nope")
        with pytest.raises(BranchNotFound):
            g.delete_branch(R, "nope")
        with pytest.raises(NotFound):
            g.delete_tag(R, "nope")
        with pytest.raises(ObjectNotFound):
            g.delete(R, "main", b"missing")
        with pytest.raises(CommitNotFound):
            g.get_commit(R, "0" * 64)
        with pytest.raises(InvalidArgument):
            g.commit(R, "main", "")
    with pytest.raises(RepositoryNotFound):
        g.delete_repository("nope-repo")


def test_default_branch_and_name_clashes(g: Graveler) -> None:
    commit(g, "main", a="1")
    with unchanged(g), pytest.raises(InvalidArgument):
        g.delete_branch(R, "main")
    with unchanged(g), pytest.raises(AlreadyExists):
        g.create_branch(R, "main", "main")
    g.create_tag(R, "v1", "main")
    with unchanged(g), pytest.raises(AlreadyExists):
        g.create_tag(R, "v1", "main")
    with unchanged(g), pytest.raises(AlreadyExists):
        g.create_tag(R, "main", "main")  # a tag may not hide a branch
    with unchanged(g), pytest.raises(AlreadyExists):
        g.create_branch(R, "v1", "main")  # nor a branch a tag (lakeFS refuses both)
    g.delete_tag(R, "v1")
    g.create_branch(R, "v1", "main")


def test_nothing_to_commit(g: Graveler) -> None:
    commit(g, "main", a="1")
    with unchanged(g), pytest.raises(NothingToCommit):
        g.commit(R, "main", "empty")
    put(g, "main", a="1")  # the same value again
    with unchanged(g), pytest.raises(NothingToCommit):
        g.commit(R, "main", "same")
    g.reset(R, "main")
    c = g.commit(R, "main", "empty on purpose", allow_empty=True).commit
    assert c.metarange_id == g.commit_of(R, "main~1").metarange_id
    assert g.commit(R, "main", "meta", allow_empty=True, metadata=[("k", "v")]).commit.metadata == (("k", "v"),)


def test_delete_repository(g: Graveler, make_graveler: Factory) -> None:
    commit(g, "main", a="1")
    g.create_branch(R, "dev", "main")
    put(g, "dev", b="1")
    g.delete_repository(R)
    with pytest.raises(RepositoryNotFound):
        g.resolve(R, "main")
    assert g.list_repositories() == []
    g.create_repository(R, "mem://repo2")
    assert snapshot(g, "main") == {}


# --------------------------------------------------------------------------- the boundary property


def test_one_change_rewrites_one_range(g: Graveler) -> None:
    n = 20_000
    g.set_many(R, "main", [(b"data/%06d" % i, val(f"v{i}")) for i in range(n)])
    first = g.commit(R, "main", "bulk")
    assert first.stats is not None and first.stats.ranges_written > 5
    total = first.stats.ranges_written

    for key in (b"data/000000", b"data/010007", b"data/019999"):
        # A cold store: what a new process does. It may read the one range the key falls in, nothing else.
        repo = g.get_repository(R)
        g.committed = CommittedStore(g.committed.adapter, RamCache(1 << 26))
        before = (g.committed.stats.tables_loaded, g.committed.stats.tables_written)
        g.set(R, "main", key, val("changed" + key.decode()))
        res = g.commit(R, "main", f"change {key!r}")
        assert res.stats is not None
        assert res.stats.ranges_written == 1, res.stats
        assert res.stats.ranges_reused == total - 1
        assert res.stats.changes_applied == 1
        loaded = g.committed.stats.tables_loaded - before[0]
        written = g.committed.stats.tables_written - before[1]
        assert written == 2  # the range and the metarange
        assert loaded == 2  # the base metarange and the one range the change falls in
        mr = g.metarange_of(repo, res.commit)
        assert len(mr.ranges) == total
        assert mr.count() == n
    assert content(g.get(R, g.resolve(R, "main"), b"data/010007")) == "changeddata/010007"


def test_repository_recreated_by_another_process(make_graveler: Factory) -> None:
    """A long-running process must not keep using a deleted repository's storage namespace."""
    from lakemount.block import MemoryAdapter

    from ._support import fresh_view

    adapter = MemoryAdapter()
    mount = make_graveler(adapter)
    mount.create_repository(R, "mem://old")
    commit(mount, "main", a="old")
    cli = fresh_view(mount)
    cli.delete_repository(R)
    cli.create_repository(R, "mem://new")
    # The mount writes and commits on the new repository...
    commit(mount, "main", b="new")
    # ...and every other process reads what it wrote.
    reader = fresh_view(mount)
    assert snapshot(reader, "main") == {b"b": "new"}
    assert mount.get_repository(R).storage_namespace == "mem://new"


def test_many_ranges_random_changes_diff_and_merge(g: Graveler) -> None:
    """Changes scattered over a multi-range tree (inserts, deletes, boundary keys): scans, two- and
    three-way diffs and merges agree with plain dicts, and unchanged ranges stay shared by id."""
    import random

    rng = random.Random(11)
    n = 12_000
    base = {b"k/%06d" % (i * 2): f"v{i}" for i in range(n)}
    g.set_many(R, "main", [(k, val(v)) for k, v in base.items()])
    g.commit(R, "main", "base")
    repo = g.get_repository(R)
    mr = g.metarange_of(repo, g.commit_of(R, "main"))
    assert len(mr.ranges) > 5
    boundaries = [r.max_key for r in mr.ranges] + [r.min_key for r in mr.ranges]
    trees = {"main": dict(base)}

    def mutate(branch: str, count: int) -> None:
        tree = trees[branch]
        items: list[tuple[bytes, bytes | None]] = []
        for _ in range(count):
            roll = rng.random()
            if roll < 0.3:
                k = rng.choice(boundaries)  # the keys where ranges are cut
            elif roll < 0.6:
                k = b"k/%06d" % (rng.randrange(n) * 2 + 1)  # a new key between two others
            else:
                k = b"k/%06d" % (rng.randrange(n) * 2)
            if k in tree and rng.random() < 0.4:
                items.append((k, None))
                del tree[k]
            else:
                v = f"{branch}{rng.randrange(1000)}"
                items.append((k, val(v)))
                tree[k] = v
        g.set_many(R, branch, items)
        g.commit(R, branch, f"{count} changes")

    def as_dict(ref: str) -> dict[bytes, str | None]:
        return {k: content(v) for k, v in g.scan(R, g.resolve(R, ref))}

    g.create_branch(R, "a", "main")
    g.create_branch(R, "b", "main")
    trees["a"], trees["b"] = dict(base), dict(base)
    shared_checked = 0
    for round_ in range(6):
        mutate("a", rng.choice([1, 2]))
        mutate("b", rng.choice([1, 3, 20]))
        for br in ("a", "b"):
            assert as_dict(br) == trees[br]
        ta, tb = trees["a"], trees["b"]
        expected = {
            (k, "added" if k not in ta else "removed" if k not in tb else "changed")
            for k in set(ta) | set(tb)
            if ta.get(k) != tb.get(k)
        }
        got = [(d.key, d.kind) for d in g.diff(R, "a", "b")]
        assert got == sorted(got) and set(got) == expected, round_
        assert {d.key for d in g.diff(R, "a", "b", prefix=b"k/0001")} == {k for k, _ in expected if k.startswith(b"k/0001")}
        # Every base range no change reached is still shared, by id, by both branches: a range is
        # rewritten only if a key in (previous max key, its max key] changed or the cut before it went.
        def untouched(tree: dict[bytes, str]) -> set[str]:
            changed = sorted(k for k in set(tree) | set(base) if tree.get(k) != base.get(k))
            out = set()
            for i, r in enumerate(mr.ranges):
                lo = mr.ranges[i - 1].max_key if i else b""
                if any(lo < k <= r.max_key for k in changed) or (i and lo not in tree):
                    continue
                out.add(r.id)
            return out

        ids_a = {r.id for r in g.metarange_of(repo, g.commit_of(R, "a")).ranges}
        ids_b = {r.id for r in g.metarange_of(repo, g.commit_of(R, "b")).ranges}
        assert untouched(ta) <= ids_a and untouched(tb) <= ids_b
        assert untouched(ta) & untouched(tb) <= ids_a & ids_b
        shared_checked += len(untouched(ta) & untouched(tb))

    assert shared_checked > 0

    # Three-way: merge b into a with each strategy on fresh copies of a, with conflicts on cut keys.
    k1, k2 = mr.ranges[3].max_key, mr.ranges[5].min_key
    for br, items in (("a", [(k1, "ca"), (k2, None)]), ("b", [(k1, "cb"), (k2, "cb")])):
        for k, v in items:
            if v is None:
                if k in trees[br]:
                    g.delete(R, br, k)
                    del trees[br][k]
            else:
                g.set(R, br, k, val(v))
                trees[br][k] = v
        g.commit(R, br, "conflicting")
    base_tree = base
    ta, tb = trees["a"], trees["b"]
    conflicts = sorted(
        k for k in set(base_tree) | set(ta) | set(tb)
        if ta.get(k) != base_tree.get(k) and tb.get(k) != base_tree.get(k) and ta.get(k) != tb.get(k)
    )
    for strategy in ("source-wins", "dest-wins", None):
        name = f"m-{strategy}"
        g.create_branch(R, name, "a")
        if strategy is None:
            assert conflicts
            with pytest.raises(MergeConflict) as ei:
                g.merge(R, "b", name)
            assert ei.value.paths == [k.decode() for k in conflicts]
            continue
        g.merge(R, "b", name, strategy=strategy)
        want: dict[bytes, str | None] = {}
        for k in set(base_tree) | set(ta) | set(tb):
            b0, s, d = base_tree.get(k), tb.get(k), ta.get(k)
            r = d if (s == b0 or s == d) else s if d == b0 else (s if strategy == "source-wins" else d)
            if r is not None:
                want[k] = r
        assert as_dict(name) == want, strategy
    three = {d.key: d.kind for d in g.diff_three_way(R, "a", "b")}
    assert sorted(k for k, kind in three.items() if kind == "conflict") == conflicts
