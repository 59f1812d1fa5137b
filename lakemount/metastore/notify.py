"""Change notification over PostgreSQL ``LISTEN``/``NOTIFY``: branch heads and staging, pushed to every node.

The SQL ref store sends ``pg_notify('lakemount_refs', payload)`` inside the
transaction that moves a branch (commit, merge, reset, create, delete; a
deleted repository counts as each of its branches deleted) or stages or drops
staged entries (a write, a partial reset), so the notice is delivered exactly when the change is visible
(PostgreSQL sends notifications on commit, never for a rolled-back
transaction).  A change of a repository's protection rules sends kind ``rules`` with an
empty branch.  The payload is ``sender TAB kind TAB repo TAB branch`` with
``kind`` ``head``, ``staging`` or ``rules``; ``sender`` identifies the sending process so
a mount can ignore its own changes.  A staging file's append adds ``TAB
detail``: the file's list row and, when small, its bytes
(:mod:`lakemount.metastore.staging_lists`), so the receiver serves the write
without reading the row or fetching the file.

Each listening backend runs a transaction of PostgreSQL's per wake-up that delivers notices (a
mount, a gateway worker: every one of them, for every notice in the database), so a ``sql``
staging's notices are **paced** (:class:`Pacer`): a process sends a branch's staging notice with
its staging when it sent none of that branch in the last ``PACE_S``; the stagings after it within
that time send none, and one notice naming all of their directories follows at the end of it.
A paced notice is a lease: its sender may stage the branch unannounced for ``PACE_S``, so a
listener that hears nothing more from it re-delivers the branch as changed as a whole
``LEASE_S`` after the notice; a sender that dies before its owed notice costs readers
elsewhere that long at most.  Another host sees a staging at most ``PACE_S`` after its
commit (``LEASE_S`` if its writer dies) instead of at its commit.

Only a burst takes a lease (stop 53): a staging more than ``PACE_S`` after the branch's last notice,
with nothing held or owed, sends a **plain** notice, which takes no lease and ends the sender's earlier
ones; the next staging within ``PACE_S`` of it sends the paced one.  Sparse stagings (a write-back
pipeline's batch every few seconds, a gateway PUT now and then) therefore never end in a whole-branch
re-delivery, which dropped every listing other hosts kept of the branch, so that each create there
looked its name up in the database again (stop 52: 1.036 transactions per file for 12 write-back
writers on 3 hosts).  Every notice of a pacer carries a sequence number, so a plain notice that
commits before an older paced one (two transactions in flight) ends only the leases older than it.

A :class:`Listener` holds one dedicated connection in autocommit mode (or, since stop 54, hears through
the one another listener of the same database on the same host holds: :mod:`lakemount.metastore.relay`,
so each notice wakes one backend per host), waits on
its socket and calls back with the changes it received, de-duplicated per
wake-up (a Spark job staging a thousand files wakes a remote mount a few
times, not a thousand).  When the connection drops it reconnects with backoff
and then calls back once with ``None`` for everything: notices sent while it
was away are lost, so the receiver must re-check all it caches.  The
``mount.head_ttl`` poll stays the fallback; SQLite has no notification and
relies on it alone.

A host listens only while something on it uses what notices keep true (stop 56): every listening backend is
woken by every notice of the database, a transaction each, so a host whose mounts and servers sit idle paid
for every other host's writes.  A listener made with ``idle`` (the ref store's: ``IDLE_S``) is told of each use
(:meth:`Listener.use`: a mount's lookup answered from what it keeps, a write taking a kept record); once neither
its process nor any follower of the host's relay used it for ``idle`` seconds, it reports ``None`` (so nothing
kept is trusted past that moment), stops listening (the relay's followers hear ``IDLE`` and do the same) and
listens again within ``poll`` of the next use, reporting ``None`` once more when it is back, as after a lost
connection.  Between the two, ``connected`` is clear: readers use what they read for ``head_ttl`` only.
"""

from __future__ import annotations

import select
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Final

from lakemount.catalog.kept import STAGED_DIRS
from lakemount.logs import get_logger
from lakemount.metastore.urls import one_line, where
from lakemount.records import record

if TYPE_CHECKING:
    import sqlalchemy as sa

log = get_logger(__name__)

CHANNEL: Final = "lakemount_refs"
HEAD: Final = "head"
STAGING: Final = "staging"
RULES: Final = "rules"  # a repository's protection rules changed (branch empty)


@record(frozen=True, slots=True)
class Change:
    """One notice: ``kind`` (``head``, ``staging`` or ``rules``) of ``repo``/``branch`` by process ``sender``;
    ``detail`` describes an appended staging file (empty for any other change)."""

    sender: str
    kind: str
    repo: str
    branch: str
    detail: str = ""


PACE_S: Final = 1.0  # a process sends a branch's staging notices at most this often (``Pacer``; 0.5 before stop 51)
LEASE_S: Final = 2 * PACE_S  # a listener re-delivers a paced sender's branch as changed this long after its last notice
PACED: Final = "~"  # a paced notice's sender field: ``sender~seq``; the sender may stage the branch unannounced for ``PACE_S``
PLAIN: Final = "!"  # a plain one's: ``sender!seq``; no lease, and the sender's leases of the branch before ``seq`` end
# A staging beginning this share of the pace before the pace since its branch's last notice has passed, or later,
# carries the branch's owed notice in its own transaction (``Pacer.inline``), instead of the pacer's thread sending it
# in a transaction of its own (stop 54); the owed notice is due up to this share of the pace after the pace (stop 55).
CARRY: Final = 0.1
# A host listens while anything on it used what notices keep true within this many seconds (``Listener.use``,
# stop 56); then it stops, and listens again (everything kept dropped) at its next use.  The mount's bound on what
# it trusts while notices arrive (``fuse.scope.PUSHED_POLL``, ``fuse.ownchanges.KEEP_MAX``): nothing a mount read
# before its last use is trusted past it, so stopping then drops nothing it would still answer from.
IDLE_S: Final = 30.0
# A listener that connected again (a lost connection) listens at least this long before it may stop for idleness:
# whoever ended its backend (a count of the transactions, ``benchmarks/pg_counting.py``) sees it back.
LISTEN_MIN_S: Final = 2.0

DIRS_MOST: Final = 32  # directories a notice names at most (more: none, the whole branch changed)
DIRS_BYTES: Final = 2048  # nor past this many bytes (PostgreSQL takes 8,000 per payload)


def dirs_detail(keys: Iterable[bytes]) -> str:
    """The detail of a staging notice for a write of ``keys``: ``STAGED_DIRS`` and the directories holding
    them (a marker ``a/b/`` counts as held by ``a``), so a mount elsewhere drops what it caches of those
    directories only (``catalog.kept.changed_dirs`` reads it back); "" (the whole branch) for more than
    ``DIRS_MOST`` of them or a key that is no plain path."""
    dirs: set[str] = set()
    for key in keys:
        try:
            path = key.decode("utf-8")
        except UnicodeDecodeError:
            return ""
        if "\x1f" in path or "\t" in path or path.startswith("/") or "//" in path:
            return ""  # a key the mount shows under no directory of that name (an S3 key such as ``/x`` or ``a//b``)
        dirs.add(path.rstrip("/").rpartition("/")[0])
        if len(dirs) > DIRS_MOST:
            return ""
    return _dirs_text(dirs)


def _dirs_text(dirs: set[str]) -> str:
    """The detail naming ``dirs``; "" (the whole branch) past ``DIRS_MOST`` or ``DIRS_BYTES``."""
    if len(dirs) > DIRS_MOST:
        return ""
    text = STAGED_DIRS + "\x1f".join(sorted(dirs))
    return text if len(text.encode("utf-8")) <= DIRS_BYTES else ""


def _dirs_of(detail: str) -> set[str] | None:
    """The directories a staging notice's ``detail`` names (``dirs_detail``), or None for the whole branch."""
    if not detail.startswith(STAGED_DIRS):
        return None
    return set(detail[len(STAGED_DIRS):].split("\x1f"))


@record(frozen=True, slots=True)
class Notice:
    """What :meth:`Pacer.inline` lets a staging send with itself: a paced notice (a lease) or a plain one,
    numbered ``seq`` among the pacer's notices.  ``carried``: the staging also carries the notice its branch
    owed, naming ``owed`` as well as what it writes (``None``: the whole branch; :meth:`detail`)."""

    paced: bool
    seq: int
    carried: bool = False
    owed: frozenset[str] | None = frozenset()

    def detail(self, own: str) -> str:
        """The detail the staging's notice names: ``own`` (its writes' ``dirs_detail``), with what it carries."""
        if not self.carried:
            return own
        mine = _dirs_of(own)
        if self.owed is None or mine is None:
            return ""
        return _dirs_text(set(self.owed) | mine)


def payload(sender: str, kind: str, repo: str, branch: str, *, notice: Notice | None = None) -> str:
    """The notification text for a change (tabs never occur in repository or branch names); an
    append's statement adds ``TAB detail`` to it.  ``notice``: a :class:`Pacer`'s notice (paced: a lease)."""
    mark = "" if notice is None else f"{PACED if notice.paced else PLAIN}{notice.seq}"
    return f"{sender}{mark}\t{kind}\t{repo}\t{branch}"


def _parse(text: str) -> tuple[Change, Notice | None] | None:
    """The change a payload describes and the pacer's notice it is (None: not a pacer's), or ``None`` for
    text not from lakemount."""
    parts = text.split("\t", 4)
    if len(parts) not in (4, 5) or parts[1] not in (HEAD, STAGING, RULES):
        return None
    notice = None
    for mark in (PACED, PLAIN):
        sender, found, seq = parts[0].rpartition(mark)
        if found and seq.isdigit():
            parts[0], notice = sender, Notice(mark == PACED, int(seq))
            break
    return Change(*parts), notice


def parse(text: str) -> Change | None:
    """The change a payload describes, or ``None`` for text not from lakemount."""
    got = _parse(text)
    return got[0] if got is not None else None


Send = Callable[[str, str, str, "Notice"], None]  # (repo, branch, detail, notice): one paced staging notice in a transaction of its own


class Pacer:
    """A process's staging notices of each branch, at most one per ``pace`` seconds (see the module's docstring).

    Before a staging transaction, :meth:`inline` says whether it sends its notice itself, and which (a
    :class:`Notice`, paced or plain), or holds it (``None``); after one that held commits (or fails: it may have
    committed), :meth:`owe` adds its directories to the notice the branch owes, which one thread of the
    pacer's (started with the first owed notice, so on one kept connection) sends (``send``, paced) once
    ``pace`` has passed since the branch's last notice.  An owed notice that fails to go is logged: the
    listeners' lease (``LEASE_S``) re-delivers the branch instead.
    """

    def __init__(self, send: Send, *, pace: float = PACE_S) -> None:
        self._send = send
        self.pace = pace
        self._lock = threading.Lock()
        self._seq = 0  # the last notice's number (every branch's: only their order within a branch matters)
        self._last: dict[tuple[str, str], float] = {}  # (repo, branch) -> when its last notice was decided
        self._leased: set[tuple[str, str]] = set()  # branches whose last notice was paced
        self._holding: dict[tuple[str, str], int] = {}  # stagings held (no notice of their own) and not yet owed
        self._unsure: set[tuple[str, str]] = set()  # branches an owed notice of failed to go, until a lease ran out
        self._owed: dict[tuple[str, str], set[str] | None] = {}  # directories owed (None: the whole branch)
        self._due: dict[tuple[str, str], float] = {}  # when each owed notice goes
        # When the first staging held since the branch's last owed notice went began (when that went, if held ones
        # were in flight then): the owed notice may go ``pace`` after it, up to ``CARRY`` past the pace (``owe``).
        self._since: dict[tuple[str, str], float] = {}
        self._wake = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._paying = 0  # owed notices taken off ``_due`` and not yet sent (or failed)
        self.inline_sent = 0  # notices sent with their staging (plain ones among them)
        self.plain_sent = 0  # of those, plain ones (no lease)
        self.owed_sent = 0  # notices sent for stagings that sent none, by the pacer's thread
        self.carried = 0  # owed notices a staging carried in its own transaction (counted in ``inline_sent``)
        self.held = 0  # stagings that sent no notice of their own

    def inline(self, repo: str, branch: str, *, carry: bool = False) -> Notice | None:
        """The notice the staging of ``repo``/``branch`` about to begin sends itself, or ``None``: it sends
        none and owes one (:meth:`owe`, also when it fails).

        Within ``pace`` of the branch's last notice a staging is held if that notice was paced (a lease is
        live), else (the last was plain) it sends a paced notice, taking the lease.  Past ``pace`` it sends
        a plain notice when the branch holds and owes nothing (no lease is needed, and any earlier one ends),
        a paced one otherwise (also after an owed notice failed to go, until the listeners' lease ran out).

        ``carry`` (a staging whose notice names directories, so it can name the owed ones too): once the pace
        since the branch's last notice is within ``CARRY`` of passing and a notice is owed, the staging takes it
        (a paced notice, ``Notice.carried``, whose ``detail`` names what was owed and what it writes), so the
        owed notice costs no transaction of its own; the pacer's thread sends it only if no staging took it by
        its time (:meth:`owe`).  It goes up to ``CARRY`` of the pace early, never late.  :meth:`failed` owes it
        again."""
        key = (repo, branch)
        now = time.monotonic()
        with self._lock:
            due = self._due.get(key)
            if carry and due is not None and now >= self._last.get(key, 0.0) + (1 - CARRY) * self.pace:
                owed = self._owed.pop(key)
                del self._due[key]
                self._paid(key, now)
                self._last[key] = now
                self._leased.add(key)
                self.inline_sent += 1
                self.carried += 1
                self._seq += 1
                return Notice(True, self._seq, True, None if owed is None else frozenset(owed))
            last = self._last.get(key)
            if last is not None and now - last < self.pace:
                if key in self._leased:
                    self.held += 1
                    self._holding[key] = self._holding.get(key, 0) + 1
                    self._since.setdefault(key, now)
                    return None
                paced = True
            else:
                if key in self._unsure and last is not None and now - last >= LEASE_S + self.pace:
                    self._unsure.discard(key)  # the listeners' lease ran out since: they re-delivered the branch
                paced = key in self._due or self._holding.get(key, 0) > 0 or key in self._unsure
            self._last[key] = now
            if paced:
                self._leased.add(key)
            else:
                self._leased.discard(key)
                self.plain_sent += 1
            if len(self._last) > 4096:  # branches written long ago: forget them (their next notice goes at once)
                for old in [k for k, t in self._last.items()
                            if now - t >= LEASE_S + self.pace and k not in self._owed and k not in self._holding]:
                    del self._last[old]
                    self._leased.discard(old)
            self.inline_sent += 1
            self._seq += 1
            return Notice(paced, self._seq)

    def failed(self, repo: str, branch: str, notice: Notice | None = None) -> None:
        """The staging :meth:`inline` let send ``notice`` failed (none went): the next one sends its own, and
        what it carried (``Notice.carried``) is owed again, due at once."""
        key = (repo, branch)
        with self._lock:
            self._last.pop(key, None)
            if notice is None or not notice.carried:
                return
            owed = None if notice.owed is None else set(notice.owed)
            if key in self._owed:
                held = self._owed[key]
                self._owed[key] = None if held is None or owed is None else held | owed
            else:
                self._owed[key] = owed
            self._due[key] = time.monotonic()
            self._start()
            self._wake.notify()

    def owe(self, repo: str, branch: str, detail: str) -> None:
        """A staging of ``repo``/``branch`` that sent no notice committed (or failed, and may have),
        changing what ``detail`` names (``dirs_detail``): its notice goes with the branch's next owed one."""
        key = (repo, branch)
        dirs = _dirs_of(detail)
        with self._lock:
            held = self._holding.get(key, 0)
            if held > 1:
                self._holding[key] = held - 1
            else:
                self._holding.pop(key, None)
            if key in self._owed:
                owed = self._owed[key]
                self._owed[key] = None if owed is None or dirs is None else owed | dirs
            else:
                self._owed[key] = dirs
            if key not in self._due:
                # ``pace`` after the first staging it names began (none of them waits longer than that after its
                # commit), but never before ``pace`` since the last notice: up to ``CARRY`` of the pace after that,
                # so a staging that begins meanwhile can still carry it (stop 55: under load stagings came ~0.15 s
                # apart, and half of the owed notices went alone, a transaction each, when they went at the pace).
                last = self._last.get(key, 0.0)
                since = self._since.get(key, last)
                self._due[key] = max(last, min(since, last + CARRY * self.pace)) + self.pace
                self._start()
                self._wake.notify()

    def _paid(self, key: tuple[str, str], now: float) -> None:
        """The branch's owed notice goes at ``now`` (``_lock`` held): the next one is timed from the stagings held
        after it, or from ``now`` if some held ones are still in flight (their commits may follow it)."""
        if self._holding.get(key, 0) > 0:
            self._since[key] = now
        else:
            self._since.pop(key, None)

    def _start(self) -> None:
        """Start the pacer's thread if it is not running (``_lock`` held)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="lakemount-notices", daemon=True)
            self._thread.start()

    def flush(self) -> None:
        """Send every owed notice now, on the calling thread (tests; a process about to stop), and wait for
        the one the pacer's thread may be sending: on return every owed notice was sent (or failed)."""
        with self._lock:
            keys = list(self._due)
        for key in keys:
            self._pay(key)
        with self._lock:
            while self._paying:
                self._wake.wait()

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._due:
                    self._wake.wait()
                key, due = min(self._due.items(), key=lambda kv: kv[1])
                if due > time.monotonic():
                    self._wake.wait(due - time.monotonic())
                    continue
            self._pay(key)

    def _pay(self, key: tuple[str, str]) -> None:
        with self._lock:
            if self._due.pop(key, None) is None:
                return
            dirs = self._owed.pop(key)
            self._last[key] = time.monotonic()
            self._paid(key, self._last[key])
            self._leased.add(key)
            self._paying += 1
            self._seq += 1
            notice = Notice(True, self._seq)
        try:
            self._send(key[0], key[1], "" if dirs is None else _dirs_text(dirs), notice)
            self.owed_sent += 1
        except Exception as exc:  # the listeners' lease re-delivers the branch: log, never raise on a timer
            log.warning("owed change notice of %s/%s not sent: %s (listeners drop the branch at their lease's end)",
                        key[0], key[1], one_line(exc))
            with self._lock:
                self._unsure.add(key)  # no plain notice may end that lease before it ran out
        finally:
            with self._lock:
                self._paying -= 1
                self._wake.notify_all()


class Leases:
    """A listener's leases: (sender, repo, branch) of paced notices -> when each ends and the notice's number.

    A lease ends in a whole-branch re-delivery ``LEASE_S`` after its sender's last paced notice of the branch,
    unless a plain notice of the sender's numbered after it ended it (its sender held nothing then).  No other
    kind ends it (a head move of the branch does not tell what that sender staged after it).  A plain notice's
    number is remembered for a while, so a paced notice numbered before it that commits after it (two
    transactions in flight) takes no lease."""

    KEEP_ENDED_S: Final = 60.0

    def __init__(self) -> None:
        self._leases: dict[tuple[str, str, str], tuple[float, int]] = {}
        self._ended: dict[tuple[str, str, str], tuple[int, float]] = {}  # plain notices heard: number, when

    def heard(self, change: Change, notice: Notice, now: float) -> None:
        key = (change.sender, change.repo, change.branch)
        ended = self._ended.get(key)
        if notice.paced:
            if ended is None or ended[0] < notice.seq:
                held = self._leases.get(key)
                self._leases[key] = (now + LEASE_S, notice.seq if held is None else max(held[1], notice.seq))
            return
        held = self._leases.get(key)
        if held is not None and held[1] < notice.seq:
            del self._leases[key]
        if ended is None or ended[0] < notice.seq:
            self._ended[key] = (notice.seq, now)
        if len(self._ended) > 1024:
            for old in [k for k, (_, t) in self._ended.items() if now - t > self.KEEP_ENDED_S]:
                del self._ended[old]

    def first_end(self) -> float | None:
        return min((end for end, _ in self._leases.values()), default=None)

    def ended(self, now: float) -> list[Change]:
        """The leases run out by ``now``, as whole-branch staging changes, forgotten."""
        out = [key for key, (end, _) in self._leases.items() if end <= now]
        for key in out:
            del self._leases[key]
        return [Change(sender, STAGING, repo, branch) for sender, repo, branch in out]

    def __len__(self) -> int:
        return len(self._leases)


Callback = Callable[[list[Change] | None], None]


class Listener:
    """A thread that LISTENs on the ref store and calls ``callback`` with batches of changes.

    ``callback(None)`` means "anything may have changed" (after a reconnect).
    The callback runs on the listener's thread; an exception in it is logged,
    never fatal.  ``stop()`` ends the thread within ``poll`` seconds.

    ``share`` (stop 54, :mod:`lakemount.metastore.relay`): the listeners of one database on one host share one
    LISTEN backend: the first binds the host's relay socket and listens on PostgreSQL, the others hear through it
    (``following``), so a notice wakes one backend per host instead of one per listening process.  A follower is
    ``connected`` while its relay is; it reports ``None`` when it joins a relay again, as after a reconnect.

    ``idle`` (stop 56; None: never): the listening ends once neither this listener nor a follower of it was
    used (:meth:`use`) for that many seconds since it began, with a ``None`` reported (``dozing``); it begins again
    within ``poll`` of the next use, with a ``None`` reported when connected.
    """

    def __init__(self, url: sa.URL, callback: Callback, *, poll: float = 0.5, backoff: float = 0.5,
                 share: bool = True, idle: float | None = None) -> None:
        from lakemount.metastore import relay

        self.url = url
        self.callback = callback
        self.poll = poll
        self.backoff = backoff
        self.connected = threading.Event()
        self.received = 0
        self.following = False  # hearing through another listener of this host (``share``)
        self.relayed = 0  # notices passed on to this host's other listeners
        self._share = share and relay.supported()
        self._first = True  # nothing heard yet: the first connection reports no ``None``
        self._followers: list[Any] = []
        self.idle = idle
        self.dozing = False  # not listening: nothing on the host used it for ``idle`` (``use``)
        self.dozes = 0  # times it stopped listening so
        self._used = time.monotonic()  # this process's last use (``use``)
        self._peers_used = 0.0  # a follower's last ``BUSY`` (the relay's)
        self._since = self._used  # when it began or came back from idleness (not a reconnect: ``LISTEN_MIN_S``)
        self._connected_at = 0.0
        self._told = (self._used, 0.0)  # (use, when) a follower last told its relay of (joining tells the first)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lakemount-listen", daemon=True)

    def start(self) -> Listener:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.poll + 5)

    def use(self) -> bool:
        """Note that this process uses what notices keep true now (a lookup answered from what a mount keeps, a
        record a write takes from what is kept) and say whether notices arrive (``connected``).  A dozing
        listener (``idle``) listens again within ``poll`` of it; a follower tells its relay within ``poll``."""
        self._used = time.monotonic()
        return self.connected.is_set()

    def _connect(self) -> Any:
        import psycopg2
        import sqlalchemy.dialects.postgresql.psycopg2

        dialect = sqlalchemy.dialects.postgresql.psycopg2.dialect()
        cargs, cparams = dialect.create_connect_args(self.url)
        # A peer that vanishes without a FIN (a cut link) is noticed within ~10 s.
        cparams = {"keepalives": 1, "keepalives_idle": 4, "keepalives_interval": 2, "keepalives_count": 3, "connect_timeout": 5, **cparams}
        conn = psycopg2.connect(*cargs, **cparams)
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(f"LISTEN {CHANNEL}")
        return conn

    def _run(self) -> None:
        from lakemount.metastore import relay

        where = relay.name(self.url) if self._share else ""
        while not self._stop.is_set():
            if not self._share:
                self._lead(None)
                return
            try:
                sock = relay.join(where)
            except PermissionError as exc:
                log.warning("change listener: %s; listening on PostgreSQL alone", exc)
                self._share = False
                continue
            if sock is not None:
                self.following = True
                try:
                    self._follow(sock)
                finally:
                    self.following = False
                    self.connected.clear()
                    sock.close()
                continue
            server = relay.claim(where)
            if server is None:  # another listener of the host is taking the name: join it
                self._stop.wait(0.02)
                continue
            try:
                self._lead(server)
            finally:
                for follower in self._followers:
                    follower.close()
                self._followers.clear()
                server.close()

    def _lead(self, server: Any) -> None:
        """Listen on PostgreSQL until stopped (reconnecting), passing what is heard on to ``server``'s followers."""
        import psycopg2

        from lakemount.metastore import relay

        delay = self.backoff
        while not self._stop.is_set():
            try:
                conn = self._connect()
            except psycopg2.Error as exc:
                log.warning("change listener: cannot reach %s: %s (retrying in %.1fs)", where(self.url), one_line(exc), delay)
                self._stop.wait(delay)
                delay = min(delay * 2, 5.0)
                continue
            delay = self.backoff
            if not self._first:
                self._deliver(None)  # notices sent while disconnected are lost
            self._first = False
            # Connected only once the receiver has dropped what it kept: a reader that trusts
            # its cache while ``connected`` is set (the gateway's repository records) never
            # trusts one from before the gap.
            self._connected_at = time.monotonic()
            self.connected.set()
            self._tell(relay.frame(relay.UP))
            idle = False
            try:
                idle = self._serve(conn, server)
            except (psycopg2.Error, OSError) as exc:
                log.warning("change listener: connection to %s lost: %s", where(self.url), one_line(exc))
            except Exception:  # the listener outlives any surprise: it reconnects and reports "anything changed"
                log.exception("change listener: unexpected error; reconnecting")
                self._stop.wait(delay)
            finally:
                self.connected.clear()
                if not idle:
                    self._tell(relay.frame(relay.DOWN))
                try:
                    conn.close()
                except psycopg2.Error:
                    pass
            if idle:
                self._doze(server)

    def _idle_now(self) -> bool:
        """Whether nothing on the host used notices for ``idle`` seconds since the listener began or came back
        from idleness, and it has listened ``LISTEN_MIN_S`` since it last connected."""
        now = time.monotonic()
        return (self.idle is not None and now - max(self._used, self._peers_used, self._since) > self.idle
                and now - self._connected_at >= LISTEN_MIN_S)

    def _doze(self, server: Any) -> None:
        """Not listening, wait until this process or a follower is in use again, a listener of the host joins, or
        the listener stops (then the caller listens again)."""
        from lakemount.metastore import relay

        began = time.monotonic()
        self.dozing = True
        waiter = select.poll()
        if server is not None:
            waiter.register(server.fileno(), select.POLLIN)
            for follower in self._followers:
                waiter.register(follower.fileno(), select.POLLIN)
        try:
            while not self._stop.is_set() and self._used <= began:
                for fd, _ in waiter.poll(self.poll * 1000):
                    if server is not None and fd == server.fileno():
                        joined = self._accept(server, relay.IDLE)
                        if joined is not None:
                            waiter.register(joined.fileno(), select.POLLIN)
                            return  # a new listener of the host: its process is about to use what it keeps
                    elif self._from_follower(fd, waiter):
                        return
        finally:
            self.dozing = False
            self._since = time.monotonic()

    def _accept(self, server: Any, kind: bytes) -> Any:
        """A listener of the host joining: take it as a follower, told ``kind`` (``UP``, or ``IDLE`` while dozing)
        at once; None if it is another user's or gone."""
        from lakemount.metastore import relay

        follower, _ = server.accept()
        if not relay.same_user(follower):
            follower.close()
            return None
        follower.settimeout(relay.SEND_TIMEOUT_S)
        try:
            follower.sendall(relay.frame(kind))
        except OSError:
            follower.close()
            return None
        self._followers.append(follower)
        return follower

    def _from_follower(self, fd: int, waiter: Any) -> bool:
        """A follower's socket is readable: True if it said it is in use (``BUSY``, the one frame a follower
        sends: any bytes say it), else it is gone (dropped)."""
        found = [f for f in self._followers if f.fileno() == fd]
        try:
            data = found[0].recv(1 << 12) if found else b""
        except OSError:
            data = b""
        if data:
            self._peers_used = time.monotonic()
            return True
        waiter.unregister(fd)
        for follower in found:
            self._followers.remove(follower)
            follower.close()
        return False

    def _tell(self, data: bytes) -> None:
        """Send ``data`` to every follower; one that cannot take it within ``SEND_TIMEOUT_S`` (or is gone) is
        dropped (it rejoins and reports ``None``)."""
        for follower in list(self._followers):
            try:
                follower.sendall(data)
            except OSError:
                self._followers.remove(follower)
                follower.close()

    def _serve(self, conn: Any, server: Any) -> bool:
        """Pass on what PostgreSQL sends until this listener stops (False) or the host is idle (True: ``None``
        reported, ``connected`` clear, the followers told ``IDLE``)."""
        from lakemount.metastore import relay

        # poll(), not select(): select() refuses descriptors >= 1024, which a busy daemon's sockets reach.
        waiter = select.poll()
        waiter.register(conn.fileno(), select.POLLIN)
        if server is not None:
            waiter.register(server.fileno(), select.POLLIN)
            for follower in self._followers:
                waiter.register(follower.fileno(), select.POLLIN)
        leases = Leases()
        while not self._stop.is_set():
            batch: dict[Change, None] = {}
            for fd, _ in waiter.poll(self._wait(leases) * 1000):
                if fd == conn.fileno():
                    conn.poll()
                    texts = []
                    while conn.notifies:
                        texts.append(conn.notifies.pop(0).payload)
                    if self._followers:
                        self._tell(b"".join(relay.frame(relay.NOTICE, text) for text in texts))
                        self.relayed += len(texts)
                    for text in texts:
                        self._heard(text, batch, leases)
                elif server is not None and fd == server.fileno():
                    joined = self._accept(server, relay.UP)
                    if joined is not None:
                        waiter.register(joined.fileno(), select.POLLIN)
                else:  # a follower in use (``BUSY``), or gone
                    self._from_follower(fd, waiter)
            self._end(batch, leases)
            if self._idle_now():
                # In this order: nothing kept is trusted from here (``connected`` clear, then ``None``), and only
                # then do notices stop coming.
                self.connected.clear()
                self._tell(relay.frame(relay.IDLE))
                self._deliver(None)
                self.dozes += 1
                return True
        return False

    def _follow(self, sock: Any) -> None:
        """Hear through the host's relay on ``sock`` until it goes away or this listener stops."""
        from lakemount.metastore import relay

        waiter = select.poll()
        waiter.register(sock.fileno(), select.POLLIN)
        buf = bytearray()
        leases = Leases()
        joined, up = time.monotonic(), False
        while not self._stop.is_set():
            if not up and time.monotonic() - joined > relay.JOIN_WAIT_S:
                # A relay that took the connection and never said it listens (hung, or its socket outlived it in
                # a forked child): listen on PostgreSQL alone rather than wait on it.
                log.warning("change listener: the host's notice relay never answered; listening on PostgreSQL alone")
                self._share = False
                return
            batch: dict[Change, None] = {}
            used, (told, told_at) = self._used, self._told
            if used > told and time.monotonic() - told_at >= relay.BUSY_EVERY_S:
                try:
                    sock.sendall(relay.frame(relay.BUSY))
                except OSError:
                    self._end(batch, leases)
                    return
                self._told = (used, time.monotonic())
            if waiter.poll(min(self._wait(leases), relay.JOIN_WAIT_S) * 1000):
                try:
                    data = sock.recv(1 << 16)
                except OSError:
                    data = b""
                if not data:
                    self._end(batch, leases)
                    return
                buf += data
                for kind, text in relay.frames(buf):
                    if kind == relay.UP:
                        up = True
                        if not self._first:
                            self._deliver(None)  # notices sent while the relay was away or disconnected are lost
                        self._first = False
                        self.connected.set()
                    elif kind == relay.DOWN:
                        self.connected.clear()
                    elif kind == relay.IDLE:  # the relay stopped listening: nothing kept is trusted from here
                        up = True
                        self.connected.clear()
                        if not self._first:
                            self._deliver(None)
                        self._first = False
                        self._told = (self._used, 0.0)  # the next use is told at once: the relay listens again
                    else:
                        self._heard(text, batch, leases)
            self._end(batch, leases)

    def _wait(self, leases: Leases) -> float:
        wait = self.poll
        first = leases.first_end()
        if first is not None:
            wait = max(0.0, min(wait, first - time.monotonic()))
        return wait

    @staticmethod
    def _heard(text: str, batch: dict[Change, None], leases: Leases) -> None:
        got = _parse(text)
        if got is None:
            return
        change, notice = got
        batch[change] = None
        if notice is not None:
            leases.heard(change, notice, time.monotonic())

    def _end(self, batch: dict[Change, None], leases: Leases) -> None:
        """Deliver ``batch`` with the leases run out meanwhile."""
        for change in leases.ended(time.monotonic()):
            batch[change] = None
        if batch:
            self.received += len(batch)
            self._deliver(list(batch))

    def _deliver(self, batch: list[Change] | None) -> None:
        try:
            self.callback(batch)
        except Exception:
            log.exception("change listener callback failed")
