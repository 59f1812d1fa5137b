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

from collections.abc import Iterable, Mapping
from typing import Final

from lakemount.catalog.gcrules import RULES_KEY, GcRules, delete_rules, load_rules, store_rules
from lakemount.catalog.model import Commit, CommitID

# The rules and where they are stored live under the catalog (``Catalog.gc_rules``), so that front ends
# ask the catalog for them; they are named here too for the jobs and tests that use them with the rest.
__all__ = ["DAY", "RULES_KEY", "GcRules", "delete_rules", "load_rules", "retained_commits", "store_rules"]

DAY: Final = 86400.0


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
