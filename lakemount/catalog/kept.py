"""What writes reuse between requests: repository records, protection rules, and names known as branches.

A write through any front end (the mount's close, the gateway's PUT and multipart
completion, the API's upload and link, an Iceberg commit) needs the repository's record
(its storage namespace, where the data goes), the repository's protection rules (may this
branch change?) and whether the name it was given is a branch.  Read from the ref store
for every write, they were five of a lone writer's six PostgreSQL transactions per write
(issue 36).  This module keeps them, per process, and drops them:

- at once when this process changes them (``forget``: its catalog's own verbs);
- at once when another process of this node changes a repository's record or rules: those
  changes stamp the repository's slot (``(repo, "")``) of the node's stamps
  (:mod:`lakemount.metastore.stamps`), which a kept record is checked against each time;
- when a change notice names the repository (PostgreSQL ``LISTEN``: a rules change sends kind
  ``rules``, a deleted repository ``head`` for each of its branches), or everything when the
  listener loses its connection.  The process's listener (``watch``, or one a front end
  already runs: ``follow``) feeds it; while that listener is connected, a record read while
  it was is kept until a notice or a stamp drops it, as the gateway keeps its GET reads;
- the rules, otherwise, ``max_age`` seconds after they were read (``KEEP_S``, 1 s; the mount
  uses ``--head-ttl``): the bound where no notice can say (SQLite used from several homes, a
  process that does not listen, a listener that lost its connection).  A record or a branch
  name is kept however old: the write that uses it checks it (below), and drops it if wrong.

What a kept record could let through is checked where the write lands: the staging
statement reads the branch row itself (a branch deleted meanwhile fails the write with
``BranchNotFound``, never lands) and compares the repository's storage namespace with the
one the data was written under (a repository deleted and created again elsewhere fails it
with ``PreconditionFailed``).  Protection is the one answer taken from here: a rule added on
another node applies to this process's writes once its notice arrives (a listening process),
or ``max_age`` after it was added (one that does not listen) (docs/SEMANTICS.md).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Final, Protocol, TypeVar

from lakemount.graveler.model import Repository

KEEP_S: Final = 1.0
MAX_KEPT: Final = 4096  # records kept over all repositories; one more starts over
REPOSITORY: Final = "repository"
RULES: Final = "rules"
BRANCH: Final = "branch"
RULES_CHANGED: Final = "rules"  # the kind of change notice a rules change sends (``metastore.notify.RULES``)
STAGED_DIRS: Final = "dirs\x1f"  # a staging notice's detail naming the directories it changed (``metastore.notify.dirs_detail``)


def changed_dirs(detail: str) -> list[str] | None:
    """The directories a staging notice's detail names ("" is the branch's root), or None if it names none
    (then anything of the branch may have changed)."""
    if not detail.startswith(STAGED_DIRS):
        return None
    return detail[len(STAGED_DIRS):].split("\x1f")
_T = TypeVar("_T")


class ChangeSource(Protocol):
    """Where other processes' branch changes come from (``lakemount.metastore.sql.SqlRefStore``).

    ``sender`` names this process in the changes it sends itself; ``listen``
    starts a thread calling back with batches of changes (each with
    ``sender``, ``kind``, ``repo``, ``branch``), or ``None`` after a lost
    connection (anything may have changed), and returns it (``stop()`` ends
    it), or returns ``None`` where the store cannot push changes.
    ``stamp_of`` is the node's stamp of a branch (``lakemount.metastore.stamps``):
    it changes, at once, with every change this node's processes make to it;
    ``slot_stamp`` is it with its slot, and ``recording`` collects ``(slot, old
    stamp, new stamp)`` of the changes the calling thread makes inside it.
    """

    sender: str

    def listen(self, callback: Callable[[Any], None]) -> Any: ...

    def stamp_of(self, repo: str, branch: str) -> int: ...

    def slot_stamp(self, repo: str, branch: str) -> tuple[int, int]: ...

    def recording(self) -> AbstractContextManager[list[tuple[int, int, int]]]: ...


class KeptRecords:
    """Repository records, protection rules and branch names, kept for at most ``max_age`` seconds
    and while nothing says they changed."""

    def __init__(self, changes: ChangeSource | None, max_age: float = KEEP_S) -> None:
        """``changes`` gives the node's stamps and the change notices (None: only ``max_age`` and this
        process's own changes drop what is kept)."""
        self.changes = changes
        self.max_age = max_age
        # (what, repo, name) -> (value, monotonic time before the read, repository stamp before the read,
        # whether the listener was connected when the read began)
        self._kept: dict[tuple[str, str, str], tuple[Any, float, int, bool]] = {}
        # A read notes the generation when it begins; it is kept only if no notice about its
        # repository (``_touched``) nor a lost connection (``_cleared``) came since.
        self._generation = 0
        self._cleared = 0
        self._touched: dict[str, int] = {}
        self._lock = threading.Lock()
        self._reading: dict[tuple[str, str, str], threading.Event] = {}  # reads in flight, by key
        self._listener: Any = None
        self._own = False
        self.reads = 0  # records read from the ref store (tests and benchmarks count them)

    # -- notices -------------------------------------------------------------------
    def watch(self) -> None:
        """Start listening for change notices (once; a no-op where the ref store sends none).  For a
        long-lived process (a server, a mount): notices then drop a record within milliseconds."""
        if self._listener is None and self.changes is not None:
            self._listener = self.changes.listen(self.noticed)
            self._own = self._listener is not None

    def follow(self, listener: Any) -> None:
        """Trust what is kept while ``listener`` (one a front end runs, which calls :meth:`noticed` with what
        it receives) is connected."""
        if self._listener is None and listener is not None:
            self._listener = listener

    def stop(self) -> None:
        """Stop the listener ``watch`` started (forget one followed)."""
        if self._listener is not None and self._own:
            self._listener.stop()
        self._listener = None
        self._own = False

    @property
    def live(self) -> bool:
        """Whether notices are arriving now (asking is a use of them: it keeps the host listening, stop 56)."""
        listener = self._listener
        if listener is None:
            return False
        use = getattr(listener, "use", None)
        return bool(use()) if use is not None else listener.connected.is_set()

    def noticed(self, batch: list[Any] | None) -> None:
        """Drop what notices ``batch`` name (their repositories), or everything for None (notices lost)."""
        with self._lock:
            self._generation += 1
            if batch is None or len(self._touched) >= MAX_KEPT:
                self._cleared = self._generation
                self._touched.clear()
                self._kept.clear()
                return
            for change in batch:
                if change.kind == "staging":
                    continue  # staged writes change no record kept here
                self._touched[change.repo] = self._generation
                for key in [k for k in self._kept if k[1] == change.repo]:
                    del self._kept[key]

    def forget(self, repo: str) -> None:
        """Drop everything kept of ``repo`` now (this process changed it, or a write found it stale)."""
        with self._lock:
            self._generation += 1
            self._touched[repo] = self._generation
            for key in [k for k in self._kept if k[1] == repo]:
                del self._kept[key]

    # -- records -------------------------------------------------------------------
    def _stamp(self, repo: str) -> int:
        return 0 if self.changes is None else self.changes.stamp_of(repo, "")

    def _get(self, what: str, repo: str, name: str, read: Callable[[], _T], *, bounded: bool) -> _T:
        key = (what, repo, name)
        if self.max_age > 0:
            hit = self._kept.get(key)
            if hit is not None and self._valid(repo, hit, bounded):
                return hit[0]  # type: ignore[no-any-return]
        # One read per key at a time: the threads that find it expired while another reads it wait for
        # that read and take its answer if it may answer (``_valid``: the bound any kept answer has),
        # instead of each reading it again (16 threads of a busy process did, every time the rules expired).
        with self._lock:
            flight = self._reading.get(key)
            first = flight is None
            if flight is None:
                flight = self._reading[key] = threading.Event()
        if not first:
            flight.wait()
            hit = self._kept.get(key)
            if self.max_age > 0 and hit is not None and self._valid(repo, hit, bounded):
                return hit[0]  # type: ignore[no-any-return]
        try:
            generation = self._generation
            live = self.live
            stamp = self._stamp(repo)
            at = time.monotonic()
            value = read()
            self.reads += 1
            if self.max_age > 0:
                self._keep(key, generation, (value, at, stamp, live))
            return value
        finally:
            if first:
                with self._lock:
                    del self._reading[key]
                flight.set()

    def _valid(self, repo: str, hit: tuple[Any, float, int, bool], bounded: bool) -> bool:
        """Whether a kept ``hit`` may answer: its repository's stamp unchanged, and (``bounded``: an answer
        nothing downstream checks, the rules) read less than ``max_age`` ago or while notices arrive."""
        _value, at, stamp, live = hit
        if self._stamp(repo) != stamp:
            return False
        return not bounded or time.monotonic() - at < self.max_age or (live and self.live)

    def _keep(self, key: tuple[str, str, str], generation: int, kept: tuple[Any, float, int, bool]) -> None:
        with self._lock:
            if self._cleared <= generation and self._touched.get(key[1], 0) <= generation:
                if len(self._kept) >= MAX_KEPT:
                    self._kept.clear()
                self._kept[key] = kept

    def repository(self, name: str, read: Callable[[str], Repository]) -> Repository:
        """Repository ``name``, kept or ``read(name)``; raises what ``read`` raises (a missing one is not kept).

        Kept until something drops it, however old: every write that uses it stages with its namespace,
        which the staging statement checks (and a write it fails drops it)."""
        return self._get(REPOSITORY, name, "", lambda: read(name), bounded=False)

    def rules(self, repo: str, read: Callable[[str], list[str]]) -> list[str]:
        """The protection patterns of ``repo``, kept or ``read(repo)``: for at most ``max_age`` seconds unless
        notices arrive (the one answer no statement checks again)."""
        return self._get(RULES, repo, "", lambda: read(repo), bounded=True)

    def kept_rules(self, repo: str) -> list[str] | None:
        """The protection patterns of ``repo`` if :meth:`rules` would answer them without a read, else None."""
        hit = self._kept.get((RULES, repo, ""))
        if hit is None or self.max_age <= 0 or not self._valid(repo, hit, True):
            return None
        return hit[0]  # type: ignore[no-any-return]

    def is_branch(self, repo: str, name: str) -> bool:
        """Whether ``name`` was found to be a branch of ``repo`` (and nothing dropped that since): a write to
        it then needs no resolution (its staging statement refuses a branch deleted meanwhile, and the
        write it fails drops this)."""
        hit = self._kept.get((BRANCH, repo, name))
        return hit is not None and self.max_age > 0 and self._valid(repo, hit, False)

    def saw_branch(self, repo: str, name: str, began: tuple[float, int, int, bool]) -> None:
        """Note that a resolution begun at ``began`` (what :meth:`note` returned before it) found ``name`` a branch."""
        if self.max_age > 0:
            at, generation, stamp, live = began
            self._keep((BRANCH, repo, name), generation, (True, at, stamp, live))

    def note(self, repo: str) -> tuple[float, int, int, bool]:
        """What to note before a read whose result goes to :meth:`saw_branch`."""
        return time.monotonic(), self._generation, self._stamp(repo), self.live
