"""A repository history built through the catalog, with a model of what every commit and branch holds.

``Model`` records the full tree of every commit and the working tree (committed
plus staged) of every branch, and every content ever written, so a test can
compute what GC must keep and what it must delete without asking GC.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field

from lakemount.app import App
from lakemount.graveler.model import Entry

DAY = 86400.0


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def data_key(data: bytes) -> str:
    h = sha(data)
    return f"data/{h[:2]}/{h}"


@dataclass
class Model:
    app: App
    repo: str
    now: float = field(default_factory=time.time)
    trees: dict[str, dict[str, bytes]] = field(default_factory=dict)
    work: dict[str, dict[str, bytes]] = field(default_factory=dict)
    heads: dict[str, str] = field(default_factory=dict)
    written: set[bytes] = field(default_factory=set)

    @staticmethod
    def create(app: App, repo: str) -> Model:
        app.catalog.create_repository(repo)
        m = Model(app, repo)
        head = app.graveler.get_branch(repo, "main").commit_id
        m.trees[head] = {}
        m.heads["main"] = head
        m.work["main"] = {}
        return m

    def put(self, branch: str, path: str, data: bytes) -> None:
        self.app.catalog.put(self.repo, branch, path, data)
        self.work[branch][path] = data
        self.written.add(data)

    def put_entry(self, branch: str, path: str, entry: Entry) -> None:
        self.app.catalog.put_entry(self.repo, branch, path, entry)

    def delete(self, branch: str, path: str) -> None:
        self.app.catalog.delete(self.repo, branch, path)
        del self.work[branch][path]

    def commit(self, branch: str, days_ago: float, message: str = "") -> str:
        res = self.app.graveler.commit(
            self.repo, branch, message or f"{branch} {days_ago:.1f} days ago", date=self.now - days_ago * DAY
        )
        cid = res.commit.id
        self.trees[cid] = dict(self.work[branch])
        self.heads[branch] = cid
        return cid

    def branch(self, name: str, source: str) -> None:
        self.app.graveler.create_branch(self.repo, name, source)
        cid = self.app.graveler.get_branch(self.repo, name).commit_id
        self.heads[name] = cid
        self.work[name] = dict(self.trees[cid])

    def reset(self, branch: str) -> None:
        self.app.graveler.reset(self.repo, branch)
        self.work[branch] = dict(self.trees[self.heads[branch]])

    def delete_branch(self, branch: str) -> None:
        self.app.graveler.delete_branch(self.repo, branch)
        del self.work[branch]
        del self.heads[branch]

    # -- reading back -------------------------------------------------------------
    def read_tree(self, ref: str) -> dict[str, bytes]:
        """Every object at ``ref`` (commit id or branch), read through the catalog."""
        cat = self.app.catalog
        repo = cat.repository(self.repo)
        return {
            item.path: cat.read(repo, item.entry)
            for item in cat.list(self.repo, ref)
            if item.entry is not None and not item.entry.is_dir
        }


def build_gc_scenario(app: App, repo: str = "lake") -> tuple[Model, set[str]]:
    """Three live branches, a reset one, a deleted one, dedup shared across them, 50 commits.

    Rules for it: default 14 days, main 30, dev 7.  Returns the model and the ids
    of the commits those rules retain (by construction, see the comments).
    """
    m = Model.create(app, repo)
    retained: set[str] = set()
    main: list[str] = []
    for i in range(20):  # main: 100.5 .. 5.5 days ago, every 5 days
        m.put("main", "state.txt", f"main state {i}".encode())
        m.put("main", f"files/{i:02d}.txt", f"main file {i}".encode() * (i + 1))
        if i == 3:
            m.put("main", "shared.bin", b"shared by dedup " * 500)
        if i == 12:
            m.delete("main", "shared.bin")
        main.append(m.commit("main", 100.5 - 5 * i))
        if i == 2:
            app.graveler.create_tag(repo, "v1", main[-1])
    # main keeps 30 days: commits 15..19 (25.5 .. 5.5 days), and 14 (30.5 days): its head 30 days ago.
    retained |= set(main[14:])
    retained.add(main[2])  # tag v1
    m.branch("dev", main[10])
    dev: list[str] = []
    for j in range(15):  # dev: 48.2 .. 2 days ago
        m.put("dev", "dev/x.txt", f"dev x {j}".encode())
        if j == 14:
            m.put("dev", "dev/old-main-state.txt", b"main state 1")  # bytes of an expired main commit
        dev.append(m.commit("dev", 48.2 - 3.3 * j))
    # dev keeps 7 days: 13 (5.3 days), 14 (2 days), and 12 (8.6 days): its head 7 days ago.
    retained |= set(dev[12:])
    m.branch("exp", main[19])
    exp = []
    for k in range(10):  # exp: 3.0 .. 1.2 days ago
        m.put("exp", f"exp/{k}.txt", f"exp {k}".encode())
        exp.append(m.commit("exp", 3.0 - 0.2 * k))
    retained |= set(exp)  # default 14 days; its walk also reaches main 18 and 19, already kept
    m.put("exp", "exp/dropped.txt", b"staged, then reset")
    m.put("exp", "exp/dropped-2.txt", b"main state 4")
    m.reset("exp")
    m.put("exp", "exp/staged.txt", b"staged and kept")
    m.put("exp", "exp/restaged.txt", b"main state 5")  # bytes of an expired main commit, staged again
    m.branch("tmp", main[5])
    for t in range(5):  # tmp: 74 .. 70 days ago, then deleted: dangling, older than 14 days
        m.put("tmp", f"tmp/{t}.txt", f"tmp only {t}".encode())
        m.commit("tmp", 74.0 - t)
    m.put("tmp", "tmp/staged.txt", b"staged on a branch that is deleted")
    m.delete_branch("tmp")
    return m, retained


def live_contents(m: Model, retained: set[str]) -> set[bytes]:
    out: set[bytes] = set()
    for cid in retained:
        out.update(m.trees[cid].values())
    for tree in m.work.values():
        out.update(tree.values())
    return out
