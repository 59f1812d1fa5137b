"""``recover``: the ref store rebuilt from the block store alone is the one that was lost."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from lakemount.block import LocalAdapter
from lakemount.catalog.protection import BranchProtection
from lakemount.errors import PreconditionFailed, ProtectedBranch
from lakemount.graveler.graveler import Graveler
from lakemount.graveler.recover import recover
from lakemount.metastore.sql import SqlRefStore
from lakemount.metastore.sql_staging import SqlStaging

from ._support import build_graveler, content, fresh_view, val


def build(tmp_path: Path) -> Graveler:
    g = build_graveler(tmp_path / "refs.db", LocalAdapter(), system_ns=f"local://{tmp_path}/sys")
    ns = f"local://{tmp_path}/ns"

    def put(branch: str, repo: str = "alpha", **files: str) -> None:
        g.set_many(repo, branch, [(k.replace("__", "/").encode(), val(v)) for k, v in files.items()])

    g.create_repository("alpha", ns + "/alpha")
    put("main", a="1", b="1", **{"d__x": "1"})
    g.commit("alpha", "main", "first", metadata=[("k", "v")])
    g.create_tag("alpha", "v0", "main")
    g.create_branch("alpha", "dev", "main")
    put("dev", a="dev", c="dev")
    g.delete("alpha", "dev", b"b")
    g.commit("alpha", "dev", "dev work")
    put("main", **{"d__y": "main"})
    g.commit("alpha", "main", "main work")
    g.merge("alpha", "dev", "main")
    g.create_tag("alpha", "v1", "main")
    g.create_branch("alpha", "feature", "main~1")
    put("feature", f="1")
    g.commit("alpha", "feature", "feature")
    g.create_branch("alpha", "gone", "feature")
    g.delete_branch("alpha", "gone")
    g.delete_tag("alpha", "v0")
    g.revert("alpha", "main", "main~1")
    g.cherry_pick("alpha", "dev", "feature")
    g.merge("alpha", "main", "dev", strategy="source-wins", squash=True)
    g.delete_branch("alpha", "feature")
    g.create_branch("alpha", "feature", "dev")  # same name again, elsewhere
    put("feature", z="after")
    g.commit("alpha", "feature", "again")
    g.commit("alpha", "main", "empty", allow_empty=True)
    g.create_tag("alpha", "v2.0", "dev")
    g.set_protection_rules("alpha", ["main"])
    put("dev", staged="lost")  # staging is not recoverable

    g.create_repository("beta", ns + "/beta", default_branch="trunk")
    put("trunk", repo="beta", x="1")
    g.commit("beta", "trunk", "x")
    g.create_branch("beta", "b2", "trunk")

    g.create_repository("gamma", ns + "/gamma")  # deleted: must not come back
    put("main", repo="gamma", x="1")
    g.commit("gamma", "main", "x")
    g.delete_repository("gamma")

    # A namespace reused after its repository was deleted: only the new history counts.
    g.create_repository("delta", ns + "/delta")
    put("main", repo="delta", old="1")
    g.commit("delta", "main", "old")
    g.create_branch("delta", "oldbranch", "main")
    g.create_tag("delta", "oldtag", "main")
    g.delete_repository("delta")
    g.create_repository("delta", ns + "/delta")
    put("main", repo="delta", new="1")
    g.commit("delta", "main", "new")
    return g


def everything(g: Graveler) -> dict[str, Any]:
    """All refs, all commits and the contents of every ref, per repository."""
    out: dict[str, Any] = {}
    for r in g.list_repositories():
        refs: dict[str, Any] = {}
        commits = {c.id: c for c in g.refs.list_commits(r.name)}
        for b in g.list_branches(r.name):
            refs[b.name] = b.commit_id
        tags = {t.name: t.commit_id for t in g.list_tags(r.name)}
        contents = {
            ref: {k: content(v) for k, v in g.scan(r.name, g.resolve(r.name, ref))}
            for ref in [*(b + "@" for b in refs), *tags, *commits]
        }
        out[r.name] = {
            "repository": r,
            "branches": refs,
            "tags": tags,
            "commits": commits,
            "logs": {b: [c.id for c in g.log(r.name, b)] for b in refs},
            "protection": g.protection_rules(r.name),
            "contents": contents,
        }
    return out


def lose_ref_store(g: Graveler, tmp_path: Path) -> None:
    g.refs.engine.dispose()  # type: ignore[attr-defined]
    for suffix in ("", "-wal", "-shm"):
        p = tmp_path / f"refs.db{suffix}"
        if p.exists():
            os.unlink(p)


def test_recover_rebuilds_everything(tmp_path: Path) -> None:
    g = build(tmp_path)
    before = everything(g)
    assert sorted(before) == ["alpha", "beta", "delta"]
    old_tokens = {b.staging_token for r in before for b in g.list_branches(r)}
    lose_ref_store(g, tmp_path)

    refs = SqlRefStore(f"sqlite:///{tmp_path}/recovered.db")
    calls: list[tuple[str, int, int]] = []
    report = recover(g.journal, refs, progress=lambda *a: calls.append(a))
    assert report.warnings == []
    assert [r.name for r in report.repositories] == ["alpha", "beta", "delta"]
    assert report.branches == sum(len(v["branches"]) for v in before.values())
    assert report.tags == sum(len(v["tags"]) for v in before.values())
    assert calls and calls[-1] == ("repositories", 3, 3)

    g2 = fresh_view(g)
    g2.refs = refs
    g2.staging = SqlStaging(refs)  # the recovered database holds the (empty) staging rows too
    after = everything(g2)
    for name in before:
        for part in ("repository", "branches", "tags", "commits", "logs", "protection", "contents"):
            assert after[name][part] == before[name][part], (name, part)
    assert after["delta"]["branches"] == {"main": before["delta"]["branches"]["main"]}
    assert after["delta"]["tags"] == {}

    # Fresh, distinct, empty staging tokens; the lost staged entry is gone.
    tokens = [b.staging_token for r in after for b in g2.list_branches(r)]
    assert len(set(tokens)) == len(tokens) and not set(tokens) & old_tokens
    assert all(b.sealed_tokens == () for r in after for b in g2.list_branches(r))
    assert list(g2.diff_uncommitted("alpha", "dev")) == []

    # The recovered store works: protection (enforced by a catalog over it), writes, commits, merges.
    with pytest.raises(ProtectedBranch):
        BranchProtection(g2).check("alpha", "main", "write")
    g2.set("alpha", "dev", b"new", val("new"))
    c = g2.commit("alpha", "dev", "after recovery").commit
    assert c.generation == g2.commit_of("alpha", "dev~1").generation + 1
    g2.merge("alpha", "dev", "main")
    assert content(g2.get("alpha", g2.resolve("alpha", "main"), b"new")) == "new"


def test_recover_refuses_a_used_store_unless_forced(tmp_path: Path) -> None:
    g = build(tmp_path)
    before = everything(g)
    with pytest.raises(PreconditionFailed):
        recover(g.journal, g.refs)
    assert everything(g) == before
    # Forced: the journal's repositories are replaced by what the journal says; others stay.
    g.create_repository("other", f"local://{tmp_path}/elsewhere")
    g.journal.forget_repository("other")
    report = recover(g.journal, g.refs, force=True)
    assert report.warnings == []
    after = everything(g)
    assert sorted(after) == ["alpha", "beta", "delta", "other"]
    for name in before:
        for part in ("branches", "tags", "commits", "logs", "protection", "contents"):
            assert after[name][part] == before[name][part], (name, part)


def _event_files(tmp_path: Path, repo: str) -> list[Path]:
    return sorted((tmp_path / "ns" / repo / "_lakefs" / "journal").iterdir())


def test_replay_follows_the_cas_chain_not_the_clock(tmp_path: Path) -> None:
    """Two committers' clocks disagree: the later commit's event got the earlier file name."""
    g = build(tmp_path)
    before = everything(g)
    files = _event_files(tmp_path, "beta")
    events = [json.loads(f.read_bytes()) for f in files]
    # Make the events of beta's trunk appear in reverse order of their chain.
    idx = [i for i, e in enumerate(events) if e.get("name") == "trunk" and e["op"] == "branch"]
    assert len(idx) == 2
    a, b = files[idx[0]], files[idx[1]]
    da, db = a.read_bytes(), b.read_bytes()
    a.write_bytes(db)
    b.write_bytes(da)
    lose_ref_store(g, tmp_path)
    refs = SqlRefStore(f"sqlite:///{tmp_path}/recovered.db")
    report = recover(g.journal, refs)
    assert report.warnings == []
    g2 = fresh_view(g)
    g2.refs = refs
    assert everything(g2)["beta"]["branches"] == before["beta"]["branches"]


def test_a_lost_event_is_reported_and_the_latest_head_kept(tmp_path: Path) -> None:
    g = build(tmp_path)
    head = g.resolve("alpha", "feature").commit_id
    files = _event_files(tmp_path, "alpha")
    # Lose the event that re-created "feature" (old None): its next event no longer chains.
    recreate = [
        f
        for f in files
        if (e := json.loads(f.read_bytes()))["op"] == "branch" and e["name"] == "feature" and e["old"] is None
    ][-1]
    os.unlink(recreate)
    lose_ref_store(g, tmp_path)
    refs = SqlRefStore(f"sqlite:///{tmp_path}/recovered.db")
    report = recover(g.journal, refs)
    assert any("feature" in w for w in report.warnings)
    assert refs.get_branch("alpha", "feature").commit_id == head
