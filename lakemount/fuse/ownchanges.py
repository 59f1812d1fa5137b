"""This mount's own changes to its branches, told from everyone else's by the node's stamps.

A directory that a copy writes into is listed again every ``head_ttl`` (a listing
of a branch is trusted that long, as other processes may have staged names in it);
the cost of each listing grows with the directory, so a flat directory of 10,000
new files was listed some twenty times while ``cp -r`` wrote it.  What this mount
stages itself it applies to its cached listings at once (``Tree.listing_put``);
only someone else's change needs the listing read again.

Every change a process of the node commits to a branch replaces the branch's
stamp (``Catalog.branch_stamp``: one word of a file the node's processes share),
and the staging paths of this mount that keep the listings true record the
``(slot, old stamp, new stamp)`` their own changes wrote (:meth:`OwnChanges.recording`).
A listing notes the stamp before it reads the catalog; once ``head_ttl`` has
passed, it is kept without a read if the stamps the slot went through since were
all this mount's (:meth:`OwnChanges.ours_since`): a change by any other process of
the node -- another mount, the gateway, the API, the CLI -- breaks the chain and the
listing is read again, as before.  A slot shared with another branch only costs a
read.  Other nodes' changes reach a mount by change notice (PostgreSQL), which
drops the listing; where none arrive (SQLite shared between two homes) a listing
is read again ``KEEP_MAX`` after it was read at the latest.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from lakemount.catalog.catalog import Catalog

LINKS_MAX: Final = 16_384  # own stamps remembered (~3 MB; then forgotten at once: each kept listing is read again once)
KEEP_MAX: Final = 30.0  # seconds a listing is kept on the stamps alone before it is read again


class OwnChanges:
    """The stamps this mount's own changes wrote, per slot: old stamp -> new stamp."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._links: dict[tuple[int, int], int] = {}
        self._lock = threading.Lock()

    def note(self, repo: str, branch: str) -> tuple[int, int] | None:
        """``(slot, stamp)`` of the branch now: note it before a read that a listing keeps (None: no stamps)."""
        return self.catalog.branch_stamp(repo, branch)

    @contextmanager
    def recording(self) -> Iterator[None]:
        """Count the branch changes the calling thread commits alone inside the block as this mount's.

        Wrap only a staging whose every change the mount applies to its cached listings (or that
        changes nothing they hold): a listing is kept past ``head_ttl`` over what is recorded here.
        """
        with self.catalog.own_changes() as seen:
            try:
                yield
            finally:
                if seen:
                    with self._lock:
                        if len(self._links) + len(seen) > LINKS_MAX:
                            self._links.clear()
                        for slot, old, new in seen:
                            self._links[(slot, old)] = new

    def ours_since(self, repo: str, branch: str, noted: tuple[int, int]) -> tuple[int, int] | None:
        """The branch's ``(slot, stamp)`` now if every change stamped in its slot since ``noted`` was
        recorded as this mount's (none at all counts), else None."""
        now = self.catalog.branch_stamp(repo, branch)
        if now is None or now[0] != noted[0]:
            return None
        slot, stamp = noted
        if stamp == now[1]:
            return now
        with self._lock:
            for _ in range(len(self._links)):
                nxt = self._links.get((slot, stamp))
                if nxt is None:
                    return None
                stamp = nxt
                if stamp == now[1]:
                    return now
        return None
