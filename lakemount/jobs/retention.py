"""Garbage-collection rules and the choice of the commits they retain.

Rules follow lakeFS (``default_retention_days`` and per-branch
``retention_days``) and live in the repository's storage namespace at
``_lakefs/gc/rules.json``, in lakeFS's JSON form, so they travel with the data
and survive ``lakemount recover``.

Which commits are retained at time ``now`` (``retained_commits``):

- every branch head, always;
- for a branch with retention ``d`` days: every ancestor created within the
  last ``d`` days, and the commit that was the branch's head ``d`` days ago
  (the newest first-parent ancestor older than that), because what it held
  was deleted less than ``d`` days ago (lakeFS: "every commit at or since the
  head of that many days ago");
- every tagged commit (a tag promises that its state stays readable; history
  behind a tag is not kept unless a branch rule keeps it);
- every commit no branch or tag reaches (left by a deleted branch, or an
  abandoned merge) that is younger than the default retention.

Everything else is expired; its objects are garbage unless a retained commit
or a staging area still references them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from lakemount.catalog.model import BlockAdapter, Commit, CommitID
from lakemount.catalog.storage import join
from lakemount.errors import InvalidArgument, ObjectNotFound

DAY: Final = 86400.0
RULES_KEY: Final = "_lakefs/gc/rules.json"


@dataclass(frozen=True, slots=True)
class GcRules:
    """Retention in days: a default and per-branch overrides."""

    default_retention_days: int
    branches: tuple[tuple[str, int], ...] = field(default=())

    def __post_init__(self) -> None:
        for name, days in (("default", self.default_retention_days), *self.branches):
            if not isinstance(days, int) or isinstance(days, bool) or days < 0:
                raise InvalidArgument(f"retention days must be a whole number >= 0 (branch {name}: {days!r})")

    def days_for(self, branch: str) -> int:
        for name, days in self.branches:
            if name == branch:
                return days
        return self.default_retention_days

    @property
    def keeps_history(self) -> bool:
        """False when every rule is 0 days: nothing but heads, tags and staging would survive."""
        return self.default_retention_days > 0 or any(d > 0 for _, d in self.branches)

    def to_json(self) -> dict[str, Any]:
        return {
            "default_retention_days": self.default_retention_days,
            "branches": [{"branch_id": b, "retention_days": d} for b, d in self.branches],
        }

    @staticmethod
    def from_json(doc: Mapping[str, Any]) -> GcRules:
        """Parse lakeFS's rule format; raises ``InvalidArgument`` on anything else."""
        try:
            default = doc["default_retention_days"]
            branches = tuple(sorted((str(b["branch_id"]), b["retention_days"]) for b in doc.get("branches", [])))
        except (KeyError, TypeError) as exc:
            raise InvalidArgument(f"GC rules must look like {{'default_retention_days': N, 'branches': [...]}}: {exc}") from exc
        if len({b for b, _ in branches}) != len(branches):
            raise InvalidArgument("GC rules name a branch twice")
        return GcRules(default, branches)


def _rules_url(namespace: str) -> str:
    return join(namespace, RULES_KEY)


def load_rules(adapter: BlockAdapter, namespace: str) -> GcRules | None:
    """The repository's rules, or None if none were set."""
    try:
        data = adapter.get(_rules_url(namespace))
    except ObjectNotFound:
        return None
    try:
        return GcRules.from_json(json.loads(data))
    except ValueError as exc:
        raise InvalidArgument(f"{_rules_url(namespace)} is not valid JSON: {exc}") from exc


def store_rules(adapter: BlockAdapter, namespace: str, rules: GcRules) -> None:
    """Store ``rules`` as the repository's GC rules (replacing any); block-store errors pass through."""
    adapter.put(_rules_url(namespace), json.dumps(rules.to_json(), indent=2, sort_keys=True).encode())


def delete_rules(adapter: BlockAdapter, namespace: str) -> None:
    """Remove the repository's GC rules (a no-op if none were set); block-store errors pass through."""
    adapter.delete(_rules_url(namespace))


def retained_commits(
    commits: Mapping[str, Commit],
    heads: Mapping[str, CommitID],
    tagged: Iterable[CommitID],
    rules: GcRules,
    now: float,
) -> set[CommitID]:
    """The commits ``rules`` retain at time ``now`` (see the module docstring).

    ``commits`` must hold every commit of the repository; a parent missing from
    it is skipped (the walk keeps what it can reach, it never guesses).
    """
    keep: set[CommitID] = set()
    for branch, head in heads.items():
        if head not in commits:
            continue
        keep.add(head)
        cutoff = now - rules.days_for(branch) * DAY
        # Walk per branch: a commit another branch already kept may lead, under
        # this branch's longer retention, to commits that branch did not keep.
        stack = [head]
        seen = {head}
        while stack:
            for p in commits[stack.pop()].parents:
                pc = commits.get(p)
                if pc is not None and pc.creation_date >= cutoff and p not in seen:
                    seen.add(p)
                    keep.add(p)
                    stack.append(p)
        # The head as it was at the cutoff: its objects were deleted (replaced)
        # less than ``days`` ago.
        c = commits[head]
        while c.creation_date >= cutoff and c.parents and c.parents[0] in commits:
            c = commits[c.parents[0]]
        keep.add(c.id)
    tags = [t for t in tagged if t in commits]
    keep.update(tags)
    reachable = _ancestry(commits, [*heads.values(), *tags])
    default_cutoff = now - rules.default_retention_days * DAY
    for cid, c in commits.items():
        if cid not in reachable and c.creation_date >= default_cutoff:
            keep.add(CommitID(cid))
    return keep


def _ancestry(commits: Mapping[str, Commit], starts: Iterable[str]) -> set[str]:
    seen: set[str] = set()
    stack = [s for s in starts if s in commits]
    seen.update(stack)
    while stack:
        for p in commits[stack.pop()].parents:
            if p in commits and p not in seen:
                seen.add(p)
                stack.append(p)
    return seen
