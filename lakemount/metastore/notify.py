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

A :class:`Listener` holds one dedicated connection in autocommit mode, waits on
its socket and calls back with the changes it received, de-duplicated per
wake-up (a Spark job staging a thousand files wakes a remote mount a few
times, not a thousand).  When the connection drops it reconnects with backoff
and then calls back once with ``None`` for everything: notices sent while it
was away are lost, so the receiver must re-check all it caches.  The
``mount.head_ttl`` poll stays the fallback; SQLite has no notification and
relies on it alone.
"""

from __future__ import annotations

import select
import threading
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
    text = STAGED_DIRS + "\x1f".join(sorted(dirs))
    return text if len(text.encode("utf-8")) <= DIRS_BYTES else ""


def payload(sender: str, kind: str, repo: str, branch: str) -> str:
    """The notification text for a change (tabs never occur in repository or branch names); an
    append's statement adds ``TAB detail`` to it."""
    return f"{sender}\t{kind}\t{repo}\t{branch}"


def parse(text: str) -> Change | None:
    """The change a payload describes, or ``None`` for text not from lakemount."""
    parts = text.split("\t", 4)
    if len(parts) not in (4, 5) or parts[1] not in (HEAD, STAGING, RULES):
        return None
    return Change(*parts)


Callback = Callable[[list[Change] | None], None]


class Listener:
    """A thread that LISTENs on the ref store and calls ``callback`` with batches of changes.

    ``callback(None)`` means "anything may have changed" (after a reconnect).
    The callback runs on the listener's thread; an exception in it is logged,
    never fatal.  ``stop()`` ends the thread within ``poll`` seconds.
    """

    def __init__(self, url: sa.URL, callback: Callback, *, poll: float = 0.5, backoff: float = 0.5) -> None:
        self.url = url
        self.callback = callback
        self.poll = poll
        self.backoff = backoff
        self.connected = threading.Event()
        self.received = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lakemount-listen", daemon=True)

    def start(self) -> Listener:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.poll + 5)

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
        import psycopg2

        delay = self.backoff
        first = True
        while not self._stop.is_set():
            try:
                conn = self._connect()
            except psycopg2.Error as exc:
                log.warning("change listener: cannot reach %s: %s (retrying in %.1fs)", where(self.url), one_line(exc), delay)
                self._stop.wait(delay)
                delay = min(delay * 2, 5.0)
                continue
            delay = self.backoff
            if not first:
                self._deliver(None)  # notices sent while disconnected are lost
            first = False
            # Connected only once the receiver has dropped what it kept: a reader that trusts
            # its cache while ``connected`` is set (the gateway's repository records) never
            # trusts one from before the gap.
            self.connected.set()
            try:
                self._serve(conn)
            except (psycopg2.Error, OSError) as exc:
                log.warning("change listener: connection to %s lost: %s", where(self.url), one_line(exc))
            except Exception:  # the listener outlives any surprise: it reconnects and reports "anything changed"
                log.exception("change listener: unexpected error; reconnecting")
                self._stop.wait(delay)
            finally:
                self.connected.clear()
                try:
                    conn.close()
                except psycopg2.Error:
                    pass

    def _serve(self, conn: Any) -> None:
        # poll(), not select(): select() refuses descriptors >= 1024, which a busy daemon's sockets reach.
        waiter = select.poll()
        waiter.register(conn.fileno(), select.POLLIN)
        while not self._stop.is_set():
            if not waiter.poll(self.poll * 1000):
                continue
            conn.poll()
            batch: dict[Change, None] = {}
            while conn.notifies:
                change = parse(conn.notifies.pop(0).payload)
                if change is not None:
                    batch[change] = None
            if batch:
                self.received += len(batch)
                self._deliver(list(batch))

    def _deliver(self, batch: list[Change] | None) -> None:
        try:
            self.callback(batch)
        except Exception:
            log.exception("change listener callback failed")
