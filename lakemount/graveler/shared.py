"""What the core's roles share: the stores they work on, new staging tokens, and the retry of a branch swap.

``Graveler`` (``graveler.py``) is a facade over five roles, one module each
(``repos``, ``reads``, ``writes``, ``history``, ``merges``); each role is a
``Part`` over the same ``Stores``, the facade itself, so a store the facade is
given later (a test's cache, say) is the one every role uses.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final, Protocol

from lakemount.errors import ConcurrentUpdate
from lakemount.graveler.model import StagingToken
from lakemount.records import record

if TYPE_CHECKING:
    import random

    from lakemount.graveler.committed.store import CommittedStore
    from lakemount.graveler.journal import Journal
    from lakemount.graveler.moves import Layers
    from lakemount.graveler.ports import RefStore, StagingStore

MAX_CAS_ATTEMPTS: Final = 200

Record = tuple[bytes, bytes]


class Stores(Protocol):
    """The stores of one core: heads and commits (``refs``), uncommitted entries (``staging``), ranges and
    metaranges (``committed``), the record of refs in the block store (``journal``), and the clock of new commits."""

    refs: RefStore
    staging: StagingStore
    committed: CommittedStore
    journal: Journal
    clock: Callable[[], float]


class Part:
    """One role of the core, reading the stores through ``Stores`` at each use."""

    def __init__(self, stores: Stores) -> None:
        self._stores = stores

    @property
    def refs(self) -> RefStore:
        return self._stores.refs

    @property
    def staging(self) -> StagingStore:
        return self._stores.staging

    @property
    def committed(self) -> CommittedStore:
        return self._stores.committed

    @property
    def journal(self) -> Journal:
        return self._stores.journal

    def clock(self) -> float:
        return self._stores.clock()


def new_token() -> StagingToken:
    """A fresh random staging token (24 hex digits) for a branch's new staging area."""
    return StagingToken(os.urandom(12).hex())  # secrets.token_hex(12), without importing secrets


@record()
class Backoff:
    """The waits between one operation's attempts at a branch that keeps changing under it."""

    attempt: int = 0
    rng: random.Random | None = None  # made by the first retry: most operations never wait (issue 41)

    def wait(self) -> None:
        self.attempt += 1
        if self.attempt > MAX_CAS_ATTEMPTS:
            raise ConcurrentUpdate("the branch kept changing under this operation; try again")
        if self.rng is None:
            import random

            self.rng = random.Random()
        time.sleep(min(0.2, 0.001 * (2 ** min(self.attempt, 8))) * self.rng.random())


def layers_of(tokens: Sequence[StagingToken]) -> Layers:
    """``tokens`` split at their move records; ``moves`` loads only for a branch that holds one (issue 41)."""
    from lakemount.graveler.moves import Layers

    return Layers(tokens)
