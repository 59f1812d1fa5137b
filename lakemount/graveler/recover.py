"""Rebuilding the ref store from the block store alone (``lakemount recover``).

Everything needed is in the immutable objects the ``Journal`` writes: repository
settings under the system namespace, every commit under ``<ns>/_lakefs/commits/``
and one event per ref change under ``<ns>/_lakefs/journal/``.  Commits are
inserted as they are (ids and generations kept); branches and tags are the result
of replaying the events.  Events carry the old and new commit of a branch, so the
replay follows each branch's chain of compare-and-swaps rather than trusting the
clocks that named the event files: an event whose ``old`` does not match yet waits
until the event that produces it has been applied.  Staging is not recoverable (it
lived in the lost ref store): every restored branch gets a fresh, empty token.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from lakemount.errors import Corrupt, PreconditionFailed
from lakemount.graveler.graveler import new_token
from lakemount.graveler.journal import Journal
from lakemount.graveler.model import Branch, Commit, CommitID, Repository, StagingToken, Tag
from lakemount.graveler.ports import RefStore

Progress = Callable[[str, int, int], None]
"""Called as ``progress(what, done, total)`` while recovering."""


@dataclass
class RepositoryReport:
    """What ``recover`` rebuilt for one repository."""

    name: str
    commits: int = 0
    branches: int = 0
    tags: int = 0


@dataclass
class RecoverReport:
    """What ``recover`` rebuilt, per repository, and what it could not (``warnings``)."""

    repositories: list[RepositoryReport] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def commits(self) -> int:
        return sum(r.commits for r in self.repositories)

    @property
    def branches(self) -> int:
        return sum(r.branches for r in self.repositories)

    @property
    def tags(self) -> int:
        return sum(r.tags for r in self.repositories)


@dataclass
class _Replay:
    """The refs of one repository as its journal events leave them."""

    branches: dict[str, CommitID] = field(default_factory=dict)
    tags: dict[str, CommitID] = field(default_factory=dict)
    protection: list[str] | None = None
    waiting: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def apply(self, events: Iterable[dict[str, Any]]) -> None:
        for ev in events:
            op = ev.get("op")
            if op in ("branch", "branch-deleted"):
                self.waiting.append(ev)
                self._drain()
            elif op == "tag":
                self.tags[ev["name"]] = CommitID(ev["new"])
            elif op == "tag-deleted":
                self.tags.pop(ev["name"], None)
            elif op == "protection":
                self.protection = list(ev.get("patterns", []))
            elif op == "repository-deleted":
                # The namespace was reused by a new repository: only what follows counts.
                self.branches.clear()
                self.tags.clear()
                self.waiting.clear()
                self.protection = None
            else:
                self.warnings.append(f"unknown journal event {op!r} ignored")
        if self.waiting:
            # A chain is broken (an event was lost, e.g. a crash between a ref update and
            # its journal record): fall back to the recorded order for what is left.
            for ev in self.waiting:
                self.warnings.append(
                    f"branch {ev['name']}: event {ev.get('op')} from {ev.get('old')} does not follow "
                    f"{self.branches.get(ev['name'])}; applied in recorded order"
                )
                self._do(ev)
            self.waiting.clear()

    def _matches(self, ev: dict[str, Any]) -> bool:
        return self.branches.get(ev["name"]) == ev.get("old")

    def _drain(self) -> None:
        progress = True
        while progress:
            progress = False
            for i, ev in enumerate(self.waiting):
                if self._matches(ev):
                    del self.waiting[i]
                    self._do(ev)
                    progress = True
                    break

    def _do(self, ev: dict[str, Any]) -> None:
        if ev["op"] == "branch":
            self.branches[ev["name"]] = CommitID(ev["new"])
        else:
            self.branches.pop(ev["name"], None)


def recover(
    journal: Journal, refs: RefStore, *, force: bool = False, progress: Progress | None = None
) -> RecoverReport:
    """Rebuild every repository the journal knows into ``refs``.

    ``refs`` must hold no repositories (``PreconditionFailed`` otherwise) unless
    ``force`` is set; then a repository that exists in both is replaced, others are
    kept.  Raises ``Corrupt`` when a commit object cannot be read.  Problems that
    leave a usable result (a broken event chain, a ref to a missing commit) are
    listed in the report's ``warnings``.
    """
    existing = {r.name for r in refs.list_repositories()}
    if existing and not force:
        raise PreconditionFailed(
            f"the ref store already holds {len(existing)} repositories ({', '.join(sorted(existing)[:5])}); "
            "recover into an empty one, or force to replace them"
        )
    report = RecoverReport()
    repos = sorted(journal.repositories(), key=lambda r: r.name)
    for done, repo in enumerate(repos):
        if progress:
            progress("repositories", done, len(repos))
        if repo.name in existing:
            refs.delete_repository(repo.name)
        report.repositories.append(_recover_repository(journal, refs, repo, report.warnings, progress))
    if progress:
        progress("repositories", len(repos), len(repos))
    return report


def _read_commits(journal: Journal, repo: Repository) -> dict[CommitID, Commit]:
    try:
        commits = {c.id: c for c in journal.commits(repo.storage_namespace)}
    except (ValueError, KeyError, TypeError) as exc:
        raise Corrupt(f"repository {repo.name}: unreadable commit object in {repo.storage_namespace}: {exc}") from exc
    for c in commits.values():
        if Commit.compute_id(c.parents, c.metarange_id, c.message, c.committer, c.creation_date, c.metadata) != c.id:
            raise Corrupt(f"repository {repo.name}: commit object {c.id} does not match its id")
    return commits


def _recover_repository(
    journal: Journal, refs: RefStore, repo: Repository, warnings: list[str], progress: Progress | None
) -> RepositoryReport:
    out = RepositoryReport(repo.name)
    commits = _read_commits(journal, repo)
    replay = _Replay()
    try:
        replay.apply(journal.events(repo.storage_namespace))
    except (ValueError, KeyError, TypeError) as exc:
        raise Corrupt(f"repository {repo.name}: unreadable journal event: {exc}") from exc
    warnings.extend(f"repository {repo.name}: {w}" for w in replay.warnings)

    def known(kind: str, name: str, cid: CommitID) -> bool:
        if cid in commits:
            return True
        warnings.append(f"repository {repo.name}: {kind} {name} points at missing commit {cid}; not restored")
        return False

    head = replay.branches.get(repo.default_branch)
    if head is None or not known("branch", repo.default_branch, head):
        roots = sorted((c for c in commits.values() if not c.parents), key=lambda c: (c.creation_date, c.id))
        if not roots:
            raise Corrupt(f"repository {repo.name}: no commits in {repo.storage_namespace}")
        head = roots[0].id
        warnings.append(f"repository {repo.name}: default branch {repo.default_branch} reset to its first commit")
    refs.create_repository(repo, Branch(repo.default_branch, head, _token()), commits[head])
    out.branches = 1
    # A namespace reused after its repository was deleted still holds the old commits:
    # keep what the refs reach, and unreachable commits only if made since creation.
    keep = _reachable(commits, [head, *replay.branches.values(), *replay.tags.values()])
    keep |= {cid for cid, c in commits.items() if c.creation_date >= repo.creation_date}
    # Parents first, so a reader never meets a commit whose parent is not there yet.
    ordered = sorted((commits[c] for c in keep), key=lambda c: (c.generation, c.creation_date, c.id))
    for i, c in enumerate(ordered):
        refs.put_commit(repo.name, c)
        if progress and i % 1000 == 999:
            progress(f"commits of {repo.name}", i + 1, len(ordered))
    out.commits = len(ordered)
    for name, cid in sorted(replay.branches.items()):
        if name != repo.default_branch and known("branch", name, cid):
            refs.create_branch(repo.name, Branch(name, cid, _token()))
            out.branches += 1
    for name, cid in sorted(replay.tags.items()):
        if known("tag", name, cid):
            refs.create_tag(repo.name, Tag(name, cid))
            out.tags += 1
    if replay.protection:
        refs.set_protection(repo.name, replay.protection)
    return out


def _reachable(commits: dict[CommitID, Commit], starts: Iterable[CommitID]) -> set[CommitID]:
    seen: set[CommitID] = set()
    todo = [c for c in starts if c in commits]
    while todo:
        cid = todo.pop()
        if cid in seen:
            continue
        seen.add(cid)
        todo.extend(p for p in commits[cid].parents if p in commits and p not in seen)
    return seen


def _token() -> StagingToken:
    return new_token()
