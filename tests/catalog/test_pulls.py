"""Pull requests: open, comment, approve (as the destination's rule requires), merge, close, reopen."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from lakemount.app import App
from lakemount.catalog.catalog import Catalog
from lakemount.config import load
from lakemount.errors import BranchNotFound, HookFailed, InvalidArgument, MergeConflict, NotFound, PreconditionFailed

R = "pulls"


@pytest.fixture
def cat(tmp_path: Path) -> Catalog:
    app = App(load(env={"LAKEMOUNT_HOME": str(tmp_path / "home"), "LAKEMOUNT_CACHE_DISK_BYTES": "0"}))
    c = app.catalog
    c.create_repository(R)
    c.put(R, "main", "a.csv", b"1")
    c.commit(R, "main", "seed")
    c.create_branch(R, "dev", "main")
    c.put(R, "dev", "b.csv", b"2")
    c.commit(R, "dev", "on dev")
    return c


def test_open_comment_approve_merge(cat: Catalog) -> None:
    pulls = cat.pulls
    cat.protection.add(R, "main")
    pulls.set_required(R, "main", 2)
    p = pulls.create(R, "dev", "main", "  Add b  ", "why: <b>bold</b>", author="ann")
    assert (p.id, p.status, p.title, p.author) == ("1", "open", "Add b", "ann")
    assert pulls.create(R, "dev", "main", "second", author="ann").id == "2"
    assert [x.id for x in pulls.list_pulls(R)] == ["1", "2"]
    c1 = pulls.comment(R, "1", "looks good", author="bob")
    c2 = pulls.comment(R, "1", "one question", author="ann")
    assert (c1.id, c2.id) == (1, 2) and [c.body for c in pulls.comments(R, "1")] == ["looks good", "one question"]
    with pytest.raises(PreconditionFailed, match="own pull request"):
        pulls.approve(R, "1", user="ann")
    pulls.approve(R, "1", user="bob")
    pulls.approve(R, "1", user="bob")  # once per user
    with pytest.raises(PreconditionFailed, match="has 1 of the 2 approvals main requires"):
        pulls.merge(R, "1")
    assert pulls.required(R, "main") == 2 and pulls.required(R, "dev") == 0
    assert [a.user for a in pulls.approve(R, "1", user="cy")] == ["bob", "cy"]
    merged, res = pulls.merge(R, "1", committer="cy")
    assert merged.status == "merged" and merged.merged_commit_id == res.commit_id and merged.closed_date
    c = cat.get_commit(R, res.commit_id)
    assert c.message == "Merge pull request #1: Add b" and dict(c.metadata) == {"lakemount.pull_request": "1"}
    assert cat.stat(R, "main", "b.csv").size == 1
    with pytest.raises(PreconditionFailed, match="is merged"):
        pulls.merge(R, "1")
    with pytest.raises(PreconditionFailed):
        pulls.reopen(R, "1")
    assert [x.id for x in pulls.list_pulls(R, "merged")] == ["1"]


def test_close_reopen_and_bad_input(cat: Catalog) -> None:
    pulls = cat.pulls
    p = pulls.create(R, "dev", "main", "t", author="ann")
    assert pulls.close(R, p.id).status == "closed"
    with pytest.raises(PreconditionFailed):
        pulls.approve(R, p.id, user="bob")
    with pytest.raises(PreconditionFailed):
        pulls.merge(R, p.id)
    assert pulls.reopen(R, p.id).status == "open" and pulls.get(R, p.id).closed_date is None
    assert pulls.edit(R, p.id, title="new", description="d").title == "new"
    with pytest.raises(InvalidArgument):
        pulls.create(R, "dev", "dev", "t", author="a")
    with pytest.raises(InvalidArgument):
        pulls.create(R, "dev", "main", "   ", author="a")
    with pytest.raises(BranchNotFound):
        pulls.create(R, "nope", "main", "t", author="a")
    with pytest.raises(InvalidArgument):
        pulls.comment(R, p.id, "", author="a")
    with pytest.raises(InvalidArgument):
        pulls.list_pulls(R, "weird")
    for missing in ("99", "abc", "../1"):
        with pytest.raises(NotFound):
            pulls.get(R, missing)


def test_conflicts_are_listed_and_the_pull_request_stays_open(cat: Catalog) -> None:
    pulls = cat.pulls
    cat.put(R, "main", "b.csv", b"main's")
    cat.commit(R, "main", "conflicting")
    p = pulls.create(R, "dev", "main", "t", author="ann")
    with pytest.raises(MergeConflict) as info:
        pulls.merge(R, p.id)
    assert info.value.paths == ["b.csv"]
    assert pulls.get(R, p.id).status == "open"
    merged, _res = pulls.merge(R, p.id, strategy="source-wins")
    assert merged.status == "merged" and cat.read(cat.repository(R), cat.stat(R, "main", "b.csv")) == b"2"


def test_a_pre_merge_hook_blocks_the_pull_request(cat: Catalog) -> None:
    cat.put(R, "main", "_lakefs_actions/g.yaml",
            b"name: g\non: {pre-merge: {}}\nhooks: [{id: c, type: lakemount_check, properties: {allowed_paths: ['x/*']}}]")
    cat.commit(R, "main", "guard")
    p = cat.pulls.create(R, "dev", "main", "t", author="ann")
    with pytest.raises(HookFailed, match="outside allowed_paths: b.csv"):
        cat.pulls.merge(R, p.id)
    assert cat.pulls.get(R, p.id).status == "open"


def test_a_rule_raised_while_pre_merge_hooks_run_stops_the_merge(cat: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    # Approvals are checked before the pre-merge hooks and again after them: a rule raised (or the
    # pull request closed) while hooks ran must not let the merge through on the first check.
    p = cat.pulls.create(R, "dev", "main", "t", author="ann")
    head = cat.get_branch(R, "main").commit_id
    run = cat.actions.run

    def run_and_raise_the_rule(event, *args, **kwargs):  # type: ignore[no-untyped-def]
        if event.type == "pre-merge":
            cat.pulls.set_required(R, "main", 1)
        return run(event, *args, **kwargs)

    monkeypatch.setattr(cat.actions, "run", run_and_raise_the_rule)
    with pytest.raises(PreconditionFailed, match="has 0 of the 1 approvals main requires"):
        cat.pulls.merge(R, p.id)
    assert cat.get_branch(R, "main").commit_id == head and cat.pulls.get(R, p.id).status == "open"

    def run_and_close(event, *args, **kwargs):  # type: ignore[no-untyped-def]
        if event.type == "pre-merge":
            cat.pulls.close(R, p.id)
        return run(event, *args, **kwargs)

    cat.pulls.approve(R, p.id, user="bob")
    monkeypatch.setattr(cat.actions, "run", run_and_close)
    with pytest.raises(PreconditionFailed, match="is closed"):
        cat.pulls.merge(R, p.id)
    assert cat.get_branch(R, "main").commit_id == head


def test_status_changes_from_a_stale_read_cannot_undo_a_merge(cat: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    # An edit or a close reads the pull request, then writes it back.  A merge that lands in between
    # must stay a merge: before, the edit wrote its stale "open" back (the merged pull request could be
    # merged again) and the close turned it "closed".
    p = cat.pulls.create(R, "dev", "main", "t", author="ann")
    get, merged = cat.pulls.get, []

    def get_then_merge(repo: str, pull_id: str):  # type: ignore[no-untyped-def]
        pr = get(repo, pull_id)
        if not merged:
            merged.append(None)
            monkeypatch.setattr(cat.pulls, "get", get)  # the merge itself reads as usual
            merged[0] = cat.pulls.merge(repo, pull_id)  # lands between the edit's read and its write
            monkeypatch.setattr(cat.pulls, "get", get_then_merge)
        return pr

    monkeypatch.setattr(cat.pulls, "get", get_then_merge)
    assert cat.pulls.edit(R, p.id, title="renamed").title == "renamed"  # made again from a fresh read
    monkeypatch.setattr(cat.pulls, "get", get)
    now = cat.pulls.get(R, p.id)
    assert (now.status, now.title, now.merged_commit_id) == ("merged", "renamed", merged[0][1].commit_id)

    q = cat.pulls.create(R, "dev", "main", "second", author="ann")
    stale = cat.pulls.get(R, q.id)
    cat.pulls.close(R, q.id)
    with pytest.raises(PreconditionFailed, match="is closed"):
        cat.pulls.store.update(stale, expect=("open",))
    with pytest.raises(NotFound):
        cat.pulls.store.update(replace(stale, id="999"), expect=("open",))
    assert cat.pulls.get(R, q.id).status == "closed"


def test_comments_are_bounded_and_read_a_page_at_a_time(tmp_path: Path) -> None:
    # A pull request took any number of 64 KiB comments, and every read of them loaded all of them.
    app = App(load(env={"LAKEMOUNT_HOME": str(tmp_path / "h"), "LAKEMOUNT_CACHE_DISK_BYTES": "0", "LAKEMOUNT_PULLS_MAX_COMMENTS": "5"}))
    c = app.catalog
    c.create_repository(R)
    c.put(R, "main", "a", b"1")
    c.commit(R, "main", "seed")
    c.create_branch(R, "dev", "main")
    pulls = c.pulls
    pulls.create(R, "dev", "main", "t", author="ann")
    for i in range(5):
        pulls.comment(R, "1", f"c{i}", author="bob")
    with pytest.raises(InvalidArgument, match="pull request 1 has 5 comments, the most pulls.max_comments allows"):
        pulls.comment(R, "1", "one more", author="bob")
    assert [x.body for x in pulls.comments(R, "1", 0, 2)] == ["c0", "c1"]
    assert [x.body for x in pulls.comments(R, "1", 2, 2)] == ["c2", "c3"]
    assert [x.body for x in pulls.comments(R, "1", 4, 2)] == ["c4"]
    # Another pull request has its own count.
    pulls.create(R, "dev", "main", "u", author="ann")
    assert pulls.comment(R, "2", "fine", author="bob").id == 1
