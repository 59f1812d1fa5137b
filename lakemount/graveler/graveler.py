"""The Graveler facade: versioned key/value operations over refs, staging and committed data.

Keys are bytes; values are stored record values (16-byte identity + encoded
entry, see ``model``).  Everything mutable lives in the ``RefStore`` (heads) and
the ``StagingStore`` (uncommitted entries, by staging token);
everything immutable (ranges, metaranges, commit objects, the journal) in the
block store.  Writers never lock: a commit seals the branch's staging token
with a compare-and-swap, writes ranges from the base metarange plus the sealed
staging, and swaps the branch to the new commit; a lost swap retries.

The verbs live by role, one module each, as lakeFS's ``pkg/graveler`` names its
roles: ``repos`` (repositories, branches, tags, protection, ref expressions),
``reads`` (point reads, scans and lookups with the staging overlay), ``writes``
(staging changes, resets, moves), ``history`` (commit, log, diff) and ``merges``
(merge, cherry-pick, revert, hard reset).  ``Graveler`` wires them over its
stores and hands out their verbs as its own; it holds no logic.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from lakemount.graveler.history import CommitResult, DiffRecord, History
from lakemount.graveler.journal import Journal
from lakemount.graveler.merges import MergeResult, Merges
from lakemount.graveler.ports import RefStore, StagingStore
from lakemount.graveler.reads import Reads
from lakemount.graveler.repos import Repos
from lakemount.graveler.shared import new_token
from lakemount.graveler.writes import Writes

if TYPE_CHECKING:
    from lakemount.graveler.committed.store import CommittedStore

__all__ = ["CommitResult", "DiffRecord", "Graveler", "MergeResult", "new_token"]


class Graveler:
    """Versioned operations on repositories; the single entry point above the stores."""

    def __init__(
        self,
        refs: RefStore,
        committed: CommittedStore,
        journal: Journal,
        *,
        staging: StagingStore,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``staging`` holds uncommitted entries, by the tokens ``refs``'s branch rows name.

        The roles read the stores through this object (``shared.Stores``), so a store set on it later is theirs too.
        """
        self.refs = refs
        self.staging = staging
        self.committed = committed
        self.journal = journal
        self.clock = clock
        self.repos = repos = Repos(self)
        self.reads = reads = Reads(self, repos)
        self.writes = writes = Writes(self, repos, reads)
        self.history = history = History(self, repos, reads)
        self.merges = merges = Merges(self, repos, reads, history)
        # repos.py
        self.create_repository = repos.create_repository
        self.get_repository = repos.get_repository
        self.list_repositories = repos.list_repositories
        self.delete_repository = repos.delete_repository
        self.get_commit = repos.get_commit
        self.metarange_of = repos.metarange_of
        self.resolve = repos.resolve
        self.commit_of = repos.commit_of
        self.create_branch = repos.create_branch
        self.get_branch = repos.get_branch
        self.get_branches = repos.get_branches
        self.list_branches = repos.list_branches
        self.create_tag = repos.create_tag
        self.get_tag = repos.get_tag
        self.delete_tag = repos.delete_tag
        self.list_tags = repos.list_tags
        self.protection_rules = repos.protection_rules
        self.set_protection_rules = repos.set_protection_rules
        self.swap_protection_rules = repos.swap_protection_rules
        # reads.py
        self.branch_seen = reads.branch_seen
        self.get = reads.get
        self.lookup = reads.lookup
        self.probe = reads.probe
        self.scan = reads.scan
        self.scans_ahead = reads.scans_ahead
        self.first = reads.first
        self.scan_entries = reads.scan_entries
        self.has_uncommitted = reads.has_uncommitted
        self.has_changes = reads.has_changes
        self.count_changes = reads.count_changes
        # writes.py
        self.set = writes.set
        self.set_many = writes.set_many
        self.set_many_if = writes.set_many_if
        self.delete = writes.delete
        self.staging_noticed = writes.staging_noticed
        self.collect_staging = writes.collect_staging
        self.delete_branch = writes.delete_branch
        self.reset = writes.reset
        self.move = writes.move
        # history.py
        self.commit = history.commit
        self.merge_base = history.merge_base
        self.diff = history.diff
        self.diff_three_way = history.diff_three_way
        self.diff_uncommitted = history.diff_uncommitted
        self.log = history.log
        self.first_parent_changes = history.first_parent_changes
        # merges.py
        self.merge = merges.merge
        self.revert = merges.revert
        self.cherry_pick = merges.cherry_pick
        self.hard_reset = merges.hard_reset
