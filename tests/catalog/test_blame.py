"""Blame's walk (range views, block-level range diffs, per-commit answer cache) gives what a naive walk gives:
for each asked path, the newest commit on the first-parent line whose records under it differ from its first
parent's, compared as whole key -> value maps.  Random histories with merges, small ranges of small blocks (so
a page spans several ranges and a range several blocks), cold and after answers were cached at an ancestor."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakemount.app import App
from lakemount.catalog.blame import BlameCache
from lakemount.config import load
from lakemount.graveler import sstable
from lakemount.graveler.committed import writer
from lakemount.graveler.model import Commit

KEYS = [f"d/{i:02d}" for i in range(24)] + [f"d/s/{i}" for i in range(6)] + [f"d/t/{i}" for i in range(6)] + [
    f"e/{i}" for i in range(6)]
PAGE = [f"d/{i:02d}" for i in range(24)] + ["d/s/", "d/t/", "d/zz-missing"]  # a listing of d/, and one path never made

change = st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.integers(0, 3)))  # None: delete
step = st.tuples(st.sampled_from(["commit", "commit", "commit", "merge"]), st.lists(change, min_size=1, max_size=6))


@pytest.fixture(scope="module")
def cat() -> Iterator[Any]:
    """One catalog for every example (each builds its own repository) whose ranges hold about 4 keys and
    whose blocks one or two records."""
    with pytest.MonkeyPatch.context() as mp, tempfile.TemporaryDirectory() as home:
        mp.setattr(writer, "CUT_MASK", 3)
        mp.setattr(sstable, "BLOCK_SIZE", 96)
        app = App(load(None, env={"LAKEMOUNT_HOME": home, "LAKEMOUNT_CACHE_DISK_BYTES": "0"}))
        try:
            yield app.catalog
        finally:
            app.close()  # flushes its audit log before the directory goes


def build(cat: Any, repo: str, steps: list[tuple[str, list[tuple[str, int | None]]]]) -> None:
    cat.create_repository(repo)
    cat.apply(repo, "main", [(k, cat.put(repo, "main", k, b"0")) for k in KEYS[::3]])
    cat.commit(repo, "main", "root")
    for n, (kind, changes) in enumerate(steps):
        branch = "main" if kind == "commit" else f"side{n}"
        if branch != "main":
            cat.create_branch(repo, branch, "main")
        for key, value in changes:
            if value is None:
                if cat.exists(repo, branch, key):
                    cat.delete(repo, branch, key)
            else:
                cat.put(repo, branch, key, f"{key}={value}".encode())
        cat.commit(repo, branch, f"step {n}", allow_empty=True)
        if branch != "main":
            cat.merge(repo, branch, "main", allow_empty=True)


def reference(cat: Any, repo: str, head: Commit, paths: list[str], depth: int) -> list[tuple[str | None, bool]]:
    """(commit id or None, beyond depth) per path, by comparing whole states of each commit and its parent."""
    g = cat.graveler
    r = g.get_repository(repo)

    def state(c: Commit | None) -> dict[bytes, bytes]:
        return {} if c is None else dict(g.metarange_of(r, c).scan())

    chain: list[Commit] = [head]
    while chain[-1].parents:
        chain.append(g.get_commit(repo, chain[-1].parents[0]))
    states = [state(c) for c in chain] + [{}]

    def under(p: str, s: dict[bytes, bytes]) -> dict[bytes, bytes]:
        k = p.encode()
        return {x: v for x, v in s.items() if x.startswith(k)} if p.endswith("/") else {k: s[k]} if k in s else {}

    out: list[tuple[str | None, bool]] = []
    for p in paths:
        hit = next((c.id for i, c in enumerate(chain[:depth]) if under(p, states[i]) != under(p, states[i + 1])), None)
        out.append((hit, hit is None and depth < len(chain)))
    return out


def answers(cat: Any, repo: str, ref: str, paths: list[str], depth: int) -> list[tuple[str | None, bool]]:
    return [(b.commit.id if b.commit else None, b.beyond_depth) for b in cat.blame(repo, ref, paths, depth=depth)]


EXAMPLES = iter(range(1_000_000))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(steps=st.lists(step, min_size=1, max_size=9), depth=st.integers(1, 12), at=st.integers(0, 8))
def test_blame_agrees_with_a_naive_walk(cat: Any, steps: list[Any], depth: int, at: int) -> None:
    repo = f"blame-{next(EXAMPLES)}"
    build(cat, repo, steps)
    g = cat.graveler
    head = g.get_commit(repo, cat.resolve(repo, "main").commit_id)
    cat._blame_cache = BlameCache()
    g.committed._metaranges.clear()  # as on a new server: committing loaded them whole; read only the page's span
    assert answers(cat, repo, head.id, PAGE, depth) == reference(cat, repo, head, PAGE, depth)  # cold, depth-bounded
    ancestor = head
    for _ in range(at):
        if ancestor.parents:
            ancestor = g.get_commit(repo, ancestor.parents[0])
    cat._blame_cache = BlameCache()
    full = 1000
    assert answers(cat, repo, ancestor.id, PAGE[::2], full) == reference(cat, repo, ancestor, PAGE[::2], full)
    # at the head, the walk stops at the ancestor for the paths blamed there and walks on for the others
    assert answers(cat, repo, head.id, PAGE, full) == reference(cat, repo, head, PAGE, full)
    assert answers(cat, repo, head.id, PAGE, full) == reference(cat, repo, head, PAGE, full)  # from the cache alone


def test_a_cold_walk_reads_only_the_pages_span_and_asks_the_cache_once_per_commit(
        cat: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A page of d/ over a history that also changed e/: no metarange is loaded whole (each commit's is read only
    where the page is; the head's is, to compare the branch's staged changes with), and the answer cache is asked once per commit walked, not once per path and commit."""
    repo = f"blame-{next(EXAMPLES)}"
    build(cat, repo, [("commit", [(f"d/{i:02d}", n), ("e/1", n)]) for n, i in enumerate(range(0, 24, 3))])
    cat._blame_cache = cache = BlameCache()
    whole: list[str] = []
    probes: list[str] = []
    real_metarange, real_answers = cat.graveler.committed.metarange, cache.answers
    monkeypatch.setattr(cat.graveler.committed, "metarange", lambda *a: whole.append(a[1]) or real_metarange(*a))
    monkeypatch.setattr(cache, "answers", lambda ns, cid, paths: probes.append(cid) or real_answers(ns, cid, paths))
    got = cat.blame(repo, "main", PAGE, depth=1000)
    # the root made every third d/NN and both prefixes; d/zz-missing, never made, took the walk to the root
    assert sum(1 for b in got if b.commit is not None) == 8 + 2 and got[-1].commit is None and not got[-1].beyond_depth
    head = cat.graveler.get_commit(repo, cat.resolve(repo, "main").commit_id)
    assert whole == [head.metarange_id]  # only the head's, whole, to find the branch's staged changes
    assert len(probes) == len(set(probes)) == 10  # each commit once: 8 steps, the root and the repository's first
