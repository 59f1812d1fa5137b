"""Differential test against git: the same edits, commits and merges on a real git repository and on lakemount.

Seeded random sequences of file writes and deletes, commits, branch creations and
``git merge --no-ff`` merges run on both.  At every commit the two trees (path ->
content) must be identical, every lakemount commit must have the parents of its git
twin, and a merge must conflict on exactly the paths git's own merge reports.

Keeping git's file-level answers comparable: every file holds one line (so any two
different edits of it conflict, as lakemount's per-object merge says), rename
detection is off (``-s recursive -X no-renames``), and no path is both a file and a directory.
Merges whose sides have several merge bases (criss-cross) are skipped: git merges
the bases recursively, lakemount (like lakeFS) picks one.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from lakemount.errors import MergeConflict, NothingToCommit
from lakemount.graveler.graveler import Graveler

from ._support import build_graveler, content, val

GIT = shutil.which("git")
pytestmark = pytest.mark.skipif(GIT is None, reason="git is not installed")

R = "repo"
PATHS = ["a/x", "a/y", "b/x", "b/y", "t1", "t2"]
CONTENTS = ["1", "2", "3"]
BRANCHES = ["main", "dev", "feat", "fix"]


def blob_id(text: str) -> str:
    data = text.encode()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # noqa: S324 - git's object id


BLOBS = {blob_id(c): c for c in CONTENTS}


class Git:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._trees: dict[str, dict[str, str]] = {}
        self._parents: dict[str, list[str]] = {}
        home = root.parent / "home"
        home.mkdir(exist_ok=True)
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z",
            "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z",
            "LC_ALL": "C",
        }
        root.mkdir()
        self("init", "-q", "-b", "main")
        self("config", "user.name", "Test")
        self("config", "user.email", "test@example.com")
        self("config", "commit.gpgsign", "false")
        self("config", "core.autocrlf", "false")
        self("config", "merge.conflictstyle", "merge")
        self("config", "merge.renames", "false")
        self("config", "diff.renames", "false")
        self("commit", "-q", "--allow-empty", "-m", "init")

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        assert GIT is not None
        proc = subprocess.run([GIT, *args], cwd=self.root, env=self.env, capture_output=True, text=True, timeout=60)
        if check and proc.returncode != 0:
            raise AssertionError(f"git {' '.join(args)} failed ({proc.returncode}): {proc.stdout}{proc.stderr}")
        return proc

    def rev(self, ref: str) -> str:
        return self("rev-parse", ref).stdout.strip()

    def heads(self) -> dict[str, str]:
        out = self("for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads/").stdout.split("\n")
        return dict(line.split(" ", 1) for line in out if line)  # type: ignore[misc]

    def tree(self, sha: str) -> dict[str, str]:
        """Path -> content of commit ``sha`` (cached: commits are immutable)."""
        if sha not in self._trees:
            out: dict[str, str] = {}
            for line in self("ls-tree", "-r", "-z", sha).stdout.split("\0"):
                if not line:
                    continue
                meta, path = line.split("\t", 1)
                _mode, kind, blob = meta.split()
                assert kind == "blob"
                out[path] = BLOBS[blob]
            self._trees[sha] = out
        return dict(self._trees[sha])

    def parents(self, sha: str) -> list[str]:
        if sha not in self._parents:
            self._parents[sha] = self("rev-parse", f"{sha}^@").stdout.split()
        return self._parents[sha]

    def checkout(self, branch: str) -> None:
        self("checkout", "-q", branch)


@dataclass
class Pair:
    git: Git
    g: Graveler
    to_git: dict[str, str] = field(default_factory=dict)  # lakemount commit id -> git sha
    pending: dict[str, dict[str, str | None]] = field(default_factory=dict)  # per branch, not yet in git
    stats: dict[str, int] = field(default_factory=dict)

    def count(self, what: str) -> None:
        self.stats[what] = self.stats.get(what, 0) + 1

    def lm_tree(self, ref: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for k, v in self.g.scan(R, self.g.resolve(R, ref)):
            c = content(v)
            assert c is not None
            out[k.decode()] = c
        return out

    def check_commit(self, lm_id: str, git_sha: str) -> None:
        assert self.lm_tree(lm_id) == self.git.tree(git_sha)
        lm_parents = [self.to_git[p] for p in self.g.get_commit(R, lm_id).parents]
        assert lm_parents == self.git.parents(git_sha)

    def check_heads(self) -> None:
        lm_heads = {b.name: b.commit_id for b in self.g.list_branches(R)}
        git_heads = self.git.heads()
        assert sorted(lm_heads) == sorted(git_heads) == sorted(self.pending)
        for name, cid in lm_heads.items():
            assert self.to_git[cid] == git_heads[name], name
            assert self.lm_tree(name + "@") == self.git.tree(git_heads[name])

    def view(self, branch: str) -> dict[str, str]:
        """What the branch shows now: its committed tree with the pending edits on top."""
        out = self.git.tree(self.git.rev(branch))
        for p, c in self.pending[branch].items():
            if c is None:
                out.pop(p, None)
            else:
                out[p] = c
        return out

    # -- operations ------------------------------------------------------------------
    def put(self, branch: str, path: str, text: str) -> None:
        self.g.set(R, branch, path.encode(), val(text))
        self.pending[branch][path] = text

    def delete(self, branch: str, path: str) -> None:
        self.g.delete(R, branch, path.encode())
        self.pending[branch][path] = None

    def commit(self, branch: str, msg: str) -> None:
        self.git.checkout(branch)
        for path, text in self.pending[branch].items():
            f = self.git.root / path
            if text is None:
                if f.exists():
                    f.unlink()
            else:
                f.parent.mkdir(exist_ok=True)
                f.write_text(text)
        self.git("add", "-A")
        proc = self.git("commit", "-q", "-m", msg, check=False)
        self.pending[branch] = {}
        try:
            lm_id = self.g.commit(R, branch, msg).commit.id
        except NothingToCommit:
            assert proc.returncode != 0, "git committed a change lakemount found empty"
            self.g.reset(R, branch)  # drop the staged no-op entries, as git's index has none
            self.count("nothing to commit")
            return
        assert proc.returncode == 0, f"lakemount committed what git found empty: {proc.stdout}"
        sha = self.git.rev("HEAD")
        self.to_git[lm_id] = sha
        self.check_commit(lm_id, sha)
        self.count("commit")

    def branch(self, name: str, source: str) -> None:
        self.git("branch", name, source)
        self.g.create_branch(R, name, source)
        self.pending[name] = {}

    def merge(self, source: str, dest: str) -> None:
        for b in (source, dest):
            if self.pending[b]:
                self.commit(b, f"pending on {b}")
        bases = self.git("merge-base", "--all", dest, source).stdout.split()
        lm_base = self.g.merge_base(R, self.g.resolve(R, source).commit_id, self.g.resolve(R, dest).commit_id)
        assert lm_base is not None and self.to_git[lm_base] in bases
        if len(bases) > 1:
            self.count("criss-cross merge skipped")
            return
        self.git.checkout(dest)
        before = self.git.rev("HEAD")
        msg = f"merge {source} into {dest}"
        # git 2.39's ort strategy ignores -X no-renames (and merge.renames): recursive honours it.
        proc = self.git("merge", "--no-ff", "-q", "-s", "recursive", "-X", "no-renames", "-m", msg, source, check=False)
        if proc.returncode != 0:
            conflicts = sorted(self.git("diff", "--name-only", "--diff-filter=U", "-z").stdout.split("\0")[:-1])
            self.git("merge", "--abort")
            assert conflicts, proc.stdout + proc.stderr
            lm_before = self.g.resolve(R, dest).commit_id
            with pytest.raises(MergeConflict) as ei:
                self.g.merge(R, source, dest, message=msg)
            assert ei.value.paths == conflicts
            assert self.g.resolve(R, dest).commit_id == lm_before
            self.count("merge conflict")
            return
        lm_head = self.g.resolve(R, dest).commit_id
        res = self.g.merge(R, source, dest, message=msg)
        after = self.git.rev("HEAD")
        # Only a source the destination already reaches is "no changes" (git: "Already up to date"); one whose
        # changes since the base add up to nothing is still a merge commit, as git's --no-ff records.
        assert res.merged == (after != before), (res, lm_head)
        if res.merged:
            self.to_git[res.commit_id] = after
            self.check_commit(res.commit_id, after)
            self.count("merge")
        else:
            self.count("merge: up to date")


def run_sequence(tmp_path: Path, seed: int, steps: int) -> dict[str, int]:
    rng = random.Random(seed)
    pair = Pair(Git(tmp_path / "git"), build_graveler(tmp_path / "refs.db"))
    pair.g.create_repository(R, "mem://repo")
    pair.to_git[pair.g.resolve(R, "main").commit_id] = pair.git.rev("main")
    pair.pending["main"] = {}
    for step in range(steps):
        branches = sorted(pair.pending)
        op = rng.choices(["put", "delete", "commit", "branch", "merge"], weights=[8, 3, 4, 1, 3])[0]
        b = rng.choice(branches)
        if op == "put":
            pair.put(b, rng.choice(PATHS), rng.choice(CONTENTS))
        elif op == "delete":
            present = sorted(pair.view(b))
            if present:
                pair.delete(b, rng.choice(present))
        elif op == "commit":
            pair.commit(b, f"step {step}")
        elif op == "branch":
            free = [n for n in BRANCHES if n not in pair.pending]
            if free:
                pair.branch(free[0], b)
        else:
            others = [x for x in branches if x != b]
            if others:
                pair.merge(rng.choice(others), b)
        if op in ("commit", "branch", "merge"):
            pair.check_heads()
    for b in sorted(pair.pending):
        if pair.pending[b]:
            pair.commit(b, "final")
    pair.check_heads()
    for lm_id, sha in pair.to_git.items():
        pair.check_commit(lm_id, sha)
    return pair.stats


SEEDS = range(6)
_stats: dict[int, dict[str, int]] = {}


@pytest.mark.parametrize("seed", SEEDS)
def test_same_trees_and_conflicts_as_git(tmp_path: Path, seed: int) -> None:
    _stats[seed] = stats = run_sequence(tmp_path, seed, steps=50)
    assert stats.get("commit", 0) > 5, stats


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(100, 140))
def test_same_trees_and_conflicts_as_git_long(tmp_path: Path, seed: int) -> None:
    run_sequence(tmp_path, seed, steps=200)


def test_the_seeds_cover_merges_and_conflicts(tmp_path: Path) -> None:
    """The short seeds above must exercise real merges and real conflicts, or they prove little."""
    total: dict[str, int] = {}
    for seed in SEEDS:
        if seed not in _stats:  # run alone (-k): compute what the parametrized tests would have
            _stats[seed] = run_sequence(tmp_path / str(seed), seed, steps=50)
        for k, v in _stats[seed].items():
            total[k] = total.get(k, 0) + v
    assert total.get("merge", 0) >= 5, total
    assert total.get("merge conflict", 0) >= 2, total
