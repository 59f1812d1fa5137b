"""The event feed: commits, merges, protection changes, hook runs and pull request activity, in order, resumable."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakemount.app import App
from lakemount.catalog.events import Feed, MemoryEventLog
from lakemount.config import load
from lakemount.metastore.events import SqlEventLog

R = "feed"


def test_operations_append_to_the_feed(tmp_path: Path) -> None:
    app = App(load(env={"LAKEMOUNT_HOME": str(tmp_path / "home"), "LAKEMOUNT_CACHE_DISK_BYTES": "0"}))
    cat = app.catalog
    cat.create_repository(R)
    cat.put(R, "main", "_lakefs_actions/a.yaml", b"name: n\non: {post-commit: {}}\nhooks: [{id: ok, type: lakemount_check}]")
    c1 = cat.commit(R, "main", "first").commit
    cat.create_branch(R, "dev", "main")
    cat.put(R, "dev", "x.csv", b"x")
    cat.commit(R, "dev", "on dev")
    cat.protection.add(R, "main")
    p = cat.pulls.create(R, "dev", "main", "t", author="ann")
    cat.pulls.comment(R, p.id, "hi", author="bob")
    cat.pulls.approve(R, p.id, user="bob")
    merged, _ = cat.pulls.merge(R, p.id)
    events = cat.feed.read(R)
    assert isinstance(cat.feed.log, SqlEventLog)
    kinds = [(e.kind, e.branch) for e in events]
    assert kinds == [
        ("commit", "main"), ("hook-run", "main"), ("branch-created", "dev"), ("commit", "dev"), ("hook-run", "dev"),
        ("protection", ""), ("pull-request", "main"), ("pull-request-comment", "main"),
        ("pull-request-approval", "main"), ("merge", "main"), ("pull-request", "main"),  # a merge is no post-commit
    ]
    assert events[0].payload["commit_id"] == c1.id and events[5].payload == {"patterns": ["main"]}
    assert events[-1].payload["action"] == "merged" and events[-1].payload["commit_id"] == merged.merged_commit_id
    ids = [e.id for e in events]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert [e.id for e in cat.feed.read(R, after=ids[5])] == ids[6:]
    assert [e.kind for e in cat.feed.read(R, branch="dev")] == ["branch-created", "commit", "hook-run"]
    assert cat.feed.read(R, limit=2) == events[:2]


def test_a_failing_store_never_fails_the_operation(caplog: pytest.LogCaptureFixture) -> None:
    class Broken(MemoryEventLog):
        def append(self, *args: object, **kwargs: object) -> None:
            raise OSError("disk full")

    Feed(Broken()).emit("r", "main", "commit", commit_id="c")
    assert "could not record commit on r/main: disk full" in caplog.text
