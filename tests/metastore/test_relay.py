"""The host's listeners of a database share one LISTEN backend (``metastore.relay``, stop 54)."""

from __future__ import annotations

import queue
import time
from collections.abc import Callable

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


def _send(store: SqlRefStore, branch: str) -> None:
    store._fast.run(lambda cur: cur.execute(
        "SELECT pg_notify(%s, %s)", (notify.CHANNEL, notify.payload("test-sender", notify.STAGING, "r", branch))))


def test_listeners_of_one_host_share_one_listening_backend(pg_cluster: PgCluster, pg_url: str) -> None:
    """Every listening backend runs a transaction per notice: three listeners of a host cost one, not three,
    and each hears every notice."""
    store = SqlRefStore(pg_url)
    queues: list[queue.Queue] = [queue.Queue() for _ in range(3)]  # type: ignore[type-arg]
    listeners = [notify.Listener(store.engine.url, q.put, poll=0.1, backoff=0.1).start() for q in queues]
    try:
        assert all(listener.connected.wait(10) for listener in listeners)
        assert sorted(listener.following for listener in listeners) == [False, True, True]
        assert _listening_backends(pg_cluster, store) == 1
        _send(store, "one")
        assert [_heard(q, "one") for q in queues] == [[], [], []]
        lead = next(listener for listener in listeners if not listener.following)
        assert lead.relayed == 1  # one notice, passed on to both followers
    finally:
        for listener in listeners:
            listener.stop()


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
    queues: list[queue.Queue] = [queue.Queue() for _ in range(2)]  # type: ignore[type-arg]
    listeners = [notify.Listener(store.engine.url, q.put, poll=0.1, backoff=0.1).start() for q in queues]
    try:
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
    finally:
        for listener in listeners:
            listener.stop()


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
