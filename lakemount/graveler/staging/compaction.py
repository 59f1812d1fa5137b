"""Compaction of ``LsmStaging``'s files: a token's L1 files merged into one L2 file, on a background thread.

Compaction merges a token's L1 files (and the newest L2 files no larger than
them) into one new L2 file and installs it with a compare-and-set that
succeeds only if L2 is unchanged; appends carry on meanwhile.  The write whose
append made the L1 list ``l1_max`` long makes the token due (``maybe_compact``)
and is acknowledged without waiting; one compactor thread per process works
through the due tokens and ends after ``COMPACTOR_IDLE_S`` without work, and a
compaction that fails fails no write.
"""

from __future__ import annotations

import logging
import threading
from typing import Final

from lakemount.graveler.model import StagingToken
from lakemount.graveler.runs import merge_newest
from lakemount.graveler.staging.file import (
    UNSTAGED,
    UNSTAGED_MARK,
    StagingFileInfo,
)
from lakemount.graveler.staging.files import STAGING_DIR, Gone, Part, Shared, StagingFiles

log = logging.getLogger(__name__)

L2_MAX: Final = 8  # L2 files of one token before compaction merges them whatever their sizes
COMPACTOR_IDLE_S: Final = 30.0  # how long the compactor thread waits for more work before ending


class Compactor(Part):
    """The compactions of one ``LsmStaging``: the tokens due, the thread that compacts them, ``settle``."""

    def __init__(self, shared: Shared, files: StagingFiles) -> None:
        super().__init__(shared)
        self.files = files
        self._compacting: set[StagingToken] = set()
        self._due: dict[StagingToken, None] = {}  # tokens waiting for the compactor thread, in order
        self._compactor: threading.Thread | None = None
        self._compacting_due = False  # the compactor thread is compacting a token it took from _due
        self._settled = threading.Condition(self.lock)  # nothing due and nothing being compacted
        self._work = threading.Condition(self.lock)  # a token became due

    @property
    def l1_max(self) -> int:
        return self.shared.l1_max

    def maybe_compact(self, token: StagingToken | None, l1: int) -> None:
        """Have the compactor thread compact ``token`` when the append that made its L1 list ``l1`` long
        reached a multiple of ``l1_max``: of all the processes appending to a branch, the one whose append made the list
        that long compacts it (not every process that counted its own flushes), and a compaction
        that was lost is tried again ``l1_max`` appends later."""
        if token is None or l1 < self.l1_max or l1 % self.l1_max:
            return
        with self.lock:
            self._due[token] = None
            # is_alive: a process forked while the thread ran has its object but not the thread.
            if self._compactor is not None and self._compactor.is_alive():
                self._work.notify()
                return
            self._compactor = threading.Thread(target=self._compact_due, name="lakemount-compact", daemon=True)
            self._compactor.start()

    def _compact_due(self) -> None:
        """The compactor thread: compact the due tokens, oldest first; once none is left, wait up to
        ``COMPACTOR_IDLE_S`` for more before ending.  A busy branch makes a token due every ``l1_max``
        appends: a thread started for each compaction connected to the ref store anew each time (its
        connection is per thread), a backend started and authenticated on the server per compaction."""
        while True:
            with self.lock:
                self._compacting_due = False
                while not self._due:
                    self._settled.notify_all()
                    if not self._work.wait(COMPACTOR_IDLE_S) and not self._due:
                        self._compactor = None
                        return
                token = next(iter(self._due))
                del self._due[token]
                self._compacting_due = True
            try:
                self.compact(token)
            except Exception as exc:  # the lists are as they were; the next l1_max appends try again
                log.warning("compaction of staging %s failed: %s", token, exc)

    def settle(self, timeout: float | None = None) -> bool:
        """Wait until no compaction is due or running (tests, benchmarks); False if ``timeout`` passed first."""
        def settled() -> bool:
            thread = self._compactor
            return thread is None or not thread.is_alive() or (not self._due and not self._compacting_due)

        with self.lock:
            return self._settled.wait_for(settled, timeout)

    def compact(self, token: StagingToken, *, minimum: int | None = None) -> bool:
        """Merge ``token``'s L1 files, with the newest L2 files no larger than what is merged so far,
        into one new L2 file, if it has at least ``minimum`` (default ``l1_max``) L1 files; True if a
        compaction was installed.

        Size-tiered: an L2 file is rewritten only when what lands on it is at least half its size,
        so each staged entry is rewritten O(log n) times, never the whole staging every time.  A
        compaction that lost its compare-and-set (L2 changed, or the token was dropped or
        committed) leaves the lists as they were; its file is garbage.
        """
        with self.lock:
            if token in self._compacting:
                return False
            self._compacting.add(token)
        try:
            files = self.lists.files([token])
            l1 = [f for f in files if f.level == 1]
            l2 = [f for f in files if f.level == 2]  # newest first
            if not l1 or len(l1) < (self.l1_max if minimum is None else minimum):
                return False
            merged_count = sum(f.count for f in l1)
            taken: list[StagingFileInfo] = []
            for f in l2:
                if f.count > 2 * merged_count and len(l2) - len(taken) <= L2_MAX:
                    break
                taken.append(f)
                merged_count += f.count
            bottom = len(taken) == len(l2)  # nothing of this token lies below the new file
            try:
                opened = self.files.open_all(l1 + taken)
            except Gone:  # a drop or another compaction removed an inline input: this one would lose its CAS
                with self.lock:
                    self.stats.compactions_lost += 1
                return False
            # The files' sorted arrays, oldest first (given newest first: L1 by seq, then L2, older than
            # all L1), in one k-way merge in which the newest record of a key wins: C work, where a dict
            # of every record, a sort and a tuple per record cost ~2 us per record in Python.
            spans = opened[::-1]
            keys, values = merge_newest([f.keys for f in spans], [f.values for f in spans], [0] * len(spans),
                                        [len(f.keys) for f in spans])
            if bottom and UNSTAGED_MARK in values:  # a mark is always exactly UNSTAGED_MARK
                kept = [i for i, v in enumerate(values) if v[0] != UNSTAGED]
                keys, values = [keys[i] for i in kept], [values[i] for i in kept]
            namespace = files[0].url[: files[0].url.index(STAGING_DIR)].rstrip("/")
            new, data = self.files.write_file(namespace, keys, values, 2) if keys else (None, None)
            ok = self.lists.compact(token, [f.seq for f in l1 + taken], [f.seq for f in l2], new, data)
            with self.lock:
                if ok:
                    self.stats.compactions += 1
                else:
                    self.stats.compactions_lost += 1
            return ok
        finally:
            with self.lock:
                self._compacting.discard(token)
