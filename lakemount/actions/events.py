"""The events hooks run on: their names, and what an operation tells its hooks (lakeFS's event JSON).

The catalog makes an :class:`Event` before and after each operation that has
hooks (``history.py``: commit, merge; ``refs.py``: branches and tags) and hands
it to the runner.  A new event is a name added to :data:`EVENTS` and a call
from the catalog's verb; nothing else in this package lists them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import field
from typing import Any, Final

from lakemount.records import record

EVENTS: Final = (
    "prepare-commit",  # lakeFS's: before pre-commit, and its failure aborts the commit as a pre-event's does
    *(
        f"{when}-{what}"
        for what in ("commit", "merge", "create-branch", "delete-branch", "create-tag", "delete-tag", "revert", "cherry-pick")
        for when in ("pre", "post")
    ),
)


def aborts(event_type: str) -> bool:
    """Whether a failed hook of ``event_type`` aborts the operation (pre-events and prepare-commit)."""
    return event_type.startswith("pre-") or event_type == "prepare-commit"


@record(frozen=True, slots=True)
class Change:
    """One changed path an operation brings in (``entry_size`` None for a removal)."""

    path: str
    kind: str  # added, changed, removed
    size: int | None


@record()
class Event:
    """What an operation is about to do (or did): the JSON a webhook receives is :meth:`payload`."""

    type: str
    repo: str
    branch: str
    source_ref: str = ""
    commit_message: str = ""
    committer: str = ""
    commit_metadata: dict[str, str] = field(default_factory=dict)
    commit_id: str = ""
    tag_id: str = ""
    # For data checks: the changes the operation brings in (a commit's staged
    # ones, what a merge brings from its source), the ref holding their new
    # versions, and the destination's committed state.
    changes: Callable[[], Iterator[Change]] | None = None
    read_ref: str = ""
    dest_ref: str = ""

    def payload(self, run_id: str, action: str, hook_id: str) -> dict[str, Any]:
        """lakeFS's event JSON."""
        data: dict[str, Any] = {
            "event_type": self.type,
            "event_time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "action_name": action,
            "hook_id": hook_id,
            "run_id": run_id,
            "repository_id": self.repo,
            "branch_id": self.branch,
            "source_ref": self.source_ref,
            "commit_message": self.commit_message,
            "committer": self.committer,
            "commit_metadata": self.commit_metadata,
        }
        if self.commit_id:
            data["commit_id"] = self.commit_id
        if self.tag_id:
            data["tag_id"] = self.tag_id
        return data
