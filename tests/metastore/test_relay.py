"""The host's listeners of a database share one LISTEN backend (``metastore.relay``, stop 54)."""

from __future__ import annotations

import contextlib
import queue
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from lakemount.metastore import notify, relay
from lakemount.metastore.sql import SqlRefStore
from tests.metastore.conftest import PgCluster

pytestmark = pytest.mark.skipif(not relay.supported(), reason="abstract unix sockets with peer credentials: Linux")


def _listening_backends(pg_cluster: PgCluster, store: SqlRefStore) -> int:
    admin = pg_cluster.admin()
    try:
        cur = admin.cursor()  # type: ignore[attr-defined]
        cur.execute("SELECT pg_stat_clear_snapshot()")
        cur.execute("SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %%' AND datname = %s",
                    (store.engine.url.database,))
        return int(cur.fetchone()[0])
    finally:
        admin.close()  # type: ignore[attr-defined]


def _until(cond: Callable[[], bool], timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def _heard(batches: queue.Queue, text: str, timeout: float = 10.0) -> list[object]:  # type: ignore[type-arg]
    """What ``batches`` got until the marker notice ``text`` (a ``None`` among it, if one came)."""
    got: list[object] = []
    end = time.monotonic() + timeout
    while True:
        try:
            batch = batches.get(timeout=max(0.0, end - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"the notice {text!r} never arrived; heard before it: {got}") from None
        if batch is None:
            got.append(None)
            continue
        for change in batch:
            if change.branch == text:
                return got
            got.append(change)


@contextlib.contextmanager
def _listening(store: SqlRefStore, n: int, **kw: Any) -> Iterator[tuple[list[queue.Queue], list[notify.Listener]]]:  # type: ignore[type-arg]
    """``n`` listeners of the database of ``store`` on this host (polling and backing off every 0.1 s, ``kw`` for the
    rest), each reporting to its own queue; stopped when the block ends."""
    queues: list[queue.Queue] = [queue.Queue() for _ in range(n)]  # type: ignore[type-arg]
    listeners = [notify.Listener(store.engine.url, q.put, poll=0.1, backoff=0.1, **kw).start() for q in queues]
    try:
        yield queues, listeners
    finally:
        for listener in listeners:
            listener.stop()


def _send(store: SqlRefStore, branch: str) -> None:
    store._fast.run(lambda cur: cur.execute(
        "SELECT pg_notify(%s, %s)", (notify.CHANNEL, notify.payload("test-sender", notify.STAGING, "r", branch))))


def test_listeners_of_one_host_share_one_listening_backend(pg_cluster: PgCluster, pg_url: str) -> None:
    """Every listening backend runs a transaction per notice: three listeners of a host cost one, not three,
    and each hears every notice."""
    store = SqlRefStore(pg_url)
    with _listening(store, 3) as (queues, listeners):
        assert all(listener.connected.wait(10) for listener in listeners)
        assert sorted(listener.following for listener in listeners) == [False, True, True]
        assert _listening_backends(pg_cluster, store) == 1
        _send(store, "one")
        assert [_heard(q, "one") for q in queues] == [[], [], []]
        lead = next(listener for listener in listeners if not listener.following)
        assert lead.relayed == 1  # one notice, passed on to both followers


def test_a_follower_takes_over_when_the_relay_stops_and_reports_everything(pg_cluster: PgCluster, pg_url: str) -> None:
    store = SqlRefStore(pg_url)
    first: queue.Queue = queue.Queue()  # type: ignore[type-arg]
    lead = notify.Listener(store.engine.url, first.put, poll=0.1, backoff=0.1).start()
    assert lead.connected.wait(10)
    second: queue.Queue = queue.Queue()  # type: ignore[type-arg]
    follower = notify.Listener(store.engine.url, second.put, poll=0.1, backoff=0.1).start()
    try:
        assert follower.connected.wait(10) and follower.following
        lead.stop()
        assert second.get(timeout=10) is None  # what was sent while no one listened is lost
        assert _until(lambda: not follower.following and follower.connected.is_set())
        assert _listening_backends(pg_cluster, store) == 1
        _send(store, "after")
        assert _heard(second, "after") == []
    finally:
        lead.stop()
        follower.stop()


def test_the_relays_lost_connection_reaches_its_followers(pg_cluster: PgCluster, pg_url: str) -> None:
    """A follower trusts what it keeps while ``connected``: the relay's reconnect clears it and reports ``None``."""
    store = SqlRefStore(pg_url)
    with _listening(store, 2) as (queues, listeners):
        assert all(listener.connected.wait(10) for listener in listeners)
        admin = pg_cluster.admin()
        try:
            admin.cursor().execute(  # type: ignore[attr-defined]
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN %'")
        finally:
            admin.close()  # type: ignore[attr-defined]
        assert [q.get(timeout=10) for q in queues] == [None, None]
        assert all(listener.connected.wait(10) for listener in listeners)
        _send(store, "back")
        assert [_heard(q, "back") for q in queues] == [[], []]


def test_an_unshared_listener_listens_itself(pg_cluster: PgCluster, pg_url: str) -> None:
    store = SqlRefStore(pg_url)
    listeners = [notify.Listener(store.engine.url, lambda _: None, poll=0.1, share=False).start() for _ in range(2)]
    try:
        assert all(listener.connected.wait(10) for listener in listeners)
        assert not any(listener.following for listener in listeners)
        assert _listening_backends(pg_cluster, store) == 2
    finally:
        for listener in listeners:
            listener.stop()


def test_a_relay_that_never_answers_is_not_followed(pg_cluster: PgCluster, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A socket holding the name that accepts and never says it listens (a hung relay): the listener listens on
    PostgreSQL itself after ``JOIN_WAIT_S``, rather than never connecting."""
    monkeypatch.setattr(relay, "JOIN_WAIT_S", 0.3)
    store = SqlRefStore(pg_url)
    mute = relay.claim(relay.name(store.engine.url))
    assert mute is not None
    listener = notify.Listener(store.engine.url, lambda _: None, poll=0.1, backoff=0.1).start()
    try:
        assert listener.connected.wait(10) and not listener.following
        assert _listening_backends(pg_cluster, store) == 1
    finally:
        listener.stop()
        mute.close()


def test_frames_split_anywhere_read_back_whole() -> None:
    data = relay.frame(relay.UP) + relay.frame(relay.NOTICE, "s~3\tstaging\tr\tmain\tdirs\x1fa/é") + relay.frame(relay.DOWN)
    buf = bytearray()
    got = []
    for i in range(len(data)):
        buf += data[i : i + 1]
        got += relay.frames(buf)
    assert got == [(relay.UP, ""), (relay.NOTICE, "s~3\tstaging\tr\tmain\tdirs\x1fa/é"), (relay.DOWN, "")] and not buf


def test_an_idle_host_stops_listening_and_listens_again_at_its_next_use(pg_cluster: PgCluster, pg_url: str) -> None:
    """Stop 56: every listening backend is woken by every notice of the database (a transaction each), so a host
    where nothing used what notices keep true for ``idle`` stops listening: each listener reports ``None`` (nothing
    kept is trusted from then) and no backend listens; a follower's next use makes the relay listen again, with a
    ``None`` reported to each, and notices reach both again."""
    store = SqlRefStore(pg_url)
    with _listening(store, 2, idle=0.5) as (queues, listeners):
        assert all(listener.connected.wait(10) for listener in listeners)
        lead, follower = sorted(listeners, key=lambda listener: listener.following)
        assert follower.following and not lead.following
        assert [q.get(timeout=10) for q in queues] == [None, None]  # nobody used them for 0.5 s
        assert not any(listener.connected.is_set() for listener in listeners)
        assert _until(lambda: lead.dozing and _listening_backends(pg_cluster, store) == 0)
        assert lead.dozes == 1
        _send(store, "unheard")  # no backend is woken by it
        assert follower.use() is False  # not listening now: the caller trusts what it reads for head_ttl only
        assert all(listener.connected.wait(10) for listener in listeners)
        assert [q.get(timeout=10) for q in queues] == [None, None]  # what was sent meanwhile is lost
        assert _listening_backends(pg_cluster, store) == 1
        _send(store, "back")
        assert [_heard(q, "back") for q in queues] == [[], []]


def test_a_host_in_use_keeps_listening(pg_cluster: PgCluster, pg_url: str) -> None:
    """A follower used more often than ``idle`` keeps its relay listening (its ``BUSY`` frames), however long the
    relay's own process sits idle; once the use ends, the host stops listening."""
    store = SqlRefStore(pg_url)
    with _listening(store, 2, idle=1.5) as (queues, listeners):
        assert all(listener.connected.wait(10) for listener in listeners)
        lead, follower = sorted(listeners, key=lambda listener: listener.following)
        end = time.monotonic() + 4.0
        while time.monotonic() < end:
            assert follower.use() is True
            time.sleep(0.1)
        assert lead.dozes == 0 and lead.connected.is_set()
        assert all(q.empty() for q in queues)
        assert _until(lambda: lead.dozing)
        assert [q.get(timeout=10) for q in queues] == [None, None]


def test_an_unshared_listener_stops_listening_when_idle_too(pg_cluster: PgCluster, pg_url: str) -> None:
    store = SqlRefStore(pg_url)
    got: queue.Queue = queue.Queue()  # type: ignore[type-arg]
    listener = notify.Listener(store.engine.url, got.put, poll=0.1, backoff=0.1, share=False, idle=0.3).start()
    try:
        assert listener.connected.wait(10)
        assert got.get(timeout=10) is None
        assert _until(lambda: listener.dozing and _listening_backends(pg_cluster, store) == 0)
        listener.use()
        assert listener.connected.wait(10)
        assert got.get(timeout=10) is None
        _send(store, "heard")
        assert _heard(got, "heard") == []
    finally:
        listener.stop()


def test_a_listener_joining_a_dozing_relay_wakes_it(pg_cluster: PgCluster, pg_url: str) -> None:
    """A listener that starts on a host whose relay dozes is answered at once (``IDLE``: it does not give up on the
    relay after ``JOIN_WAIT_S``) and makes it listen again: a new process is about to use what it keeps."""
    store = SqlRefStore(pg_url)
    lead = notify.Listener(store.engine.url, lambda _: None, poll=0.1, backoff=0.1, idle=0.3).start()
    try:
        assert _until(lambda: lead.dozing)
        late: queue.Queue = queue.Queue()  # type: ignore[type-arg]
        follower = notify.Listener(store.engine.url, late.put, poll=0.1, backoff=0.1).start()
        try:
            assert follower.connected.wait(10) and follower.following
            assert late.get(timeout=10) is None  # joined while dozing: the relay's return reports everything
            _send(store, "joined")
            assert _heard(late, "joined") == []
        finally:
            follower.stop()
    finally:
        lead.stop()
