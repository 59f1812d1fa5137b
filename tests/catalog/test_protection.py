"""Branch protection in the catalog: a protected branch changes only by merge or revert."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from lakemount.app import App
from lakemount.catalog.catalog import Catalog
from lakemount.catalog.protection import validate_pattern
from lakemount.config import load
from lakemount.errors import (
    AlreadyExists,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ProtectedBranch,
    RepositoryNotFound,
    category_of,
)
from lakemount.graveler.model import Entry

R = "prot"


@pytest.fixture
def cat(tmp_path: Path) -> Catalog:
    app = App(load(env={"LAKEMOUNT_HOME": str(tmp_path / "home"), "LAKEMOUNT_CACHE_DISK_BYTES": "0"}))
    c = app.catalog
    c.create_repository(R)
    c.put(R, "main", "a", b"1")
    c.commit(R, "main", "first")
    c.create_branch(R, "dev", "main")
    c.put(R, "dev", "b", b"2")
    c.commit(R, "dev", "on dev")
    return c


def state(c: Catalog) -> Any:
    heads = {b.name: b.commit_id for b in c.list_branches(R)}
    staged = {b: [r.key for r in c.diff_uncommitted(R, b)] for b in heads}
    return heads, staged


@contextmanager
def unchanged(c: Catalog) -> Iterator[None]:
    before = state(c)
    yield
    assert state(c) == before


def test_rules_add_list_delete(cat: Catalog) -> None:
    assert cat.protection.rules(R) == []
    assert cat.protection.add(R, "release-*") == ["release-*"]
    assert cat.protection.add(R, "main") == ["main", "release-*"]
    with pytest.raises(AlreadyExists):
        cat.protection.add(R, "main")
    assert cat.protection.matching(R, "release-2") == "release-*"
    assert cat.protection.matching(R, "dev") is None
    assert cat.protection.delete(R, "release-*") == ["main"]
    with pytest.raises(NotFound):
        cat.protection.delete(R, "release-*")
    with pytest.raises(RepositoryNotFound):
        cat.protection.add("nope", "main")


@pytest.mark.parametrize("bad", ["", "has space", "x" * 256, "[abc", "tab\there"])
def test_bad_patterns_are_refused(cat: Catalog, bad: str) -> None:
    with pytest.raises(InvalidArgument):
        validate_pattern(bad)
    with pytest.raises(InvalidArgument):
        cat.protection.add(R, bad)
    assert cat.protection.rules(R) == []


@pytest.mark.parametrize("branch", ["main", "release-1"])
def test_direct_changes_are_refused(cat: Catalog, branch: str) -> None:
    cat.create_branch(R, "release-1", "main")
    cat.put(R, branch, "staged-before", b"s")  # something a reset would drop
    cat.protection.add(R, "main")
    cat.protection.add(R, "release-*")
    entry = Entry("data/x", 1, "e", 0)
    refused = {
        "put": lambda: cat.put(R, branch, "x", b"x"),
        "put_entry": lambda: cat.put_entry(R, branch, "x", entry),
        "apply": lambda: cat.apply(R, branch, [("x", entry), ("a", None)]),
        "delete": lambda: cat.delete(R, branch, "a"),
        "commit": lambda: cat.commit(R, branch, "m", allow_empty=True),
        "reset": lambda: cat.reset(R, branch),
        "reset prefix": lambda: cat.reset(R, branch, prefix="staged"),
        "reset path": lambda: cat.reset_path(R, branch, "staged-before"),
        "stage_records": lambda: cat.stage_records(R, branch, [(b"x", entry.value())]),
        "cherry-pick": lambda: cat.cherry_pick(R, branch, "dev"),
        "delete branch": lambda: cat.delete_branch(R, branch),
        "writable_branch": lambda: cat.writable_branch(R, branch),
    }
    for what, call in refused.items():
        with unchanged(cat), pytest.raises(ProtectedBranch) as info:
            call()
        assert category_of(info.value) is PermissionDenied, what
        assert info.value.branch == branch and info.value.pattern in ("main", "release-*"), what
        assert "protected" in str(info.value)
    # Unprotected branches are untouched by the rules.
    cat.put(R, "dev", "c", b"3")


def test_merge_and_revert_are_the_way_in(cat: Catalog) -> None:
    cat.protection.add(R, "main")
    res = cat.merge(R, "dev", "main")
    assert res.merged
    assert cat.stat(R, "main", "b").size == 1
    reverted = cat.revert(R, "main", "main", parent_number=1)
    assert reverted.parents[0] == res.commit_id
    assert cat.get_optional(R, "main", "b") is None
    cat.protection.delete(R, "main")
    cat.put(R, "main", "x", b"x")
    cat.commit(R, "main", "direct again")
    assert cat.stat(R, "main", "x").size == 1


def test_kept_rules_change_at_once_when_this_process_changes_them(cat: Catalog) -> None:
    """Rules kept for a while (``keep_for``: the mount's ``--head-ttl``) are read again at once after a
    change made through this catalog, by any of its verbs, and after one made beneath it by a
    process of this node (the node's stamp of the repository); another node's: test below."""
    cat.protection.keep_for(60.0)
    cat.check_writable(R, "main")  # kept: no rule
    cat.protection.add(R, "main")
    with pytest.raises(ProtectedBranch):
        cat.check_writable(R, "main")
    cat.set_protection_rules(R, ["dev"])
    cat.check_writable(R, "main")
    with pytest.raises(ProtectedBranch):
        cat.check_writable(R, "dev")
    cat.swap_protection_rules(R, {"main": 0}, lambda rules, approvals: None)
    cat.check_writable(R, "dev")
    with pytest.raises(ProtectedBranch):
        cat.check_writable(R, "main")
    cat.protection.delete(R, "main")
    cat.check_writable(R, "main")
    cat.graveler.set_protection_rules(R, ["main"])  # as another process of this node would: its stamp says so
    with pytest.raises(ProtectedBranch):
        cat.check_writable(R, "main")


def test_a_rule_added_on_another_node_is_honoured_within_the_bound(cat: Catalog, tmp_path: Path) -> None:
    """A node that shares no stamps with this one (its own home) and sends no notice (SQLite): the kept
    rules let writes through for at most ``keep_for`` seconds after the rule was added, then refuse them
    (docs/SEMANTICS.md, "Writes reuse what they read")."""
    bound = 0.5
    cat.protection.keep_for(bound)
    cat.put(R, "main", "kept", b"1")  # keeps the rules: none
    other = App(load(env={"LAKEMOUNT_HOME": str(tmp_path / "other"), "LAKEMOUNT_CACHE_DISK_BYTES": "0",
                          "LAKEMOUNT_METADATA_DB_URL": cat.graveler.refs._url}))  # type: ignore[attr-defined]
    reads = cat.kept.reads
    other.catalog.protection.add(R, "main")
    added = time.monotonic()
    refused = None
    while refused is None:
        try:
            cat.put(R, "main", "late", b"2")
        except ProtectedBranch:
            refused = time.monotonic()
        assert time.monotonic() - added < bound + 2.0, "the rule added on the other node was never honoured"
    assert refused - added <= bound + 0.25, f"honoured {refused - added:.3f} s after it was added (bound {bound} s)"
    assert cat.kept.reads > reads  # the rules were read again: what it kept was old enough
