"""No change through the store leaves nobody able to administer users (the web UI could lock everyone out)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from lakemount.auth import ADMIN, DEVELOPER, Action, Effect, Policy, SqlAuthStore, Statement
from lakemount.auth.model import LastAdministrator
from lakemount.errors import Conflict


def _admin_by_custom_policy(store: SqlAuthStore) -> None:
    store.create_policy(Policy("Ops", (Statement(Effect.ALLOW, (Action.MANAGE_USERS.value,)),)))
    store.attach_policy("root", "Ops")


def _admin_through_a_group(store: SqlAuthStore) -> None:
    store.create_group("Owners")
    store.attach_group_policy("Owners", ADMIN)
    store.add_member("Owners", "root")


def _admin_directly(store: SqlAuthStore) -> None:
    store.attach_policy("root", ADMIN)


CHANGES: list[tuple[str, Callable[[SqlAuthStore], None], Callable[[SqlAuthStore, str], None]]] = [
    ("delete the user", _admin_directly, lambda s, key: s.delete_user("root")),
    ("delete the last key", _admin_directly, lambda s, key: s.delete_credentials("root", key)),
    ("detach the policy", _admin_directly, lambda s, key: s.detach_policy("root", ADMIN)),
    ("delete the custom policy", _admin_by_custom_policy, lambda s, key: s.delete_policy("Ops")),
    ("delete the group", _admin_through_a_group, lambda s, key: s.delete_group("Owners")),
    ("leave the group", _admin_through_a_group, lambda s, key: s.remove_member("Owners", "root")),
    ("detach the group's policy", _admin_through_a_group, lambda s, key: s.detach_group_policy("Owners", ADMIN)),
]


@pytest.mark.parametrize(("what", "make_admin", "change"), CHANGES, ids=[c[0] for c in CHANGES])
def test_the_last_administrator_cannot_be_removed(
    store: SqlAuthStore, what: str, make_admin: Callable[[SqlAuthStore], None],
    change: Callable[[SqlAuthStore, str], None],
) -> None:
    store.create_user("root")
    key = store.create_credentials("root").access_key_id
    make_admin(store)
    store.create_user("dev")
    store.create_credentials("dev")
    store.attach_policy("dev", DEVELOPER)
    with pytest.raises(LastAdministrator) as err:
        change(store, key)
    assert isinstance(err.value, Conflict) and "root" in str(err.value) and "no administrator" in str(err.value)
    # Rolled back whole: root still logs in and still administers.
    assert store.authorize("root", Action.MANAGE_USERS) and store.lookup_secret(key)[0] == "root"
    # With a second administrator the same change goes through.
    store.attach_policy("dev", ADMIN)
    change(store, key)
    assert store.authorize("dev", Action.MANAGE_USERS)


def test_an_administrator_without_a_key_does_not_count(store: SqlAuthStore) -> None:
    store.create_user("root")
    key = store.create_credentials("root").access_key_id
    store.attach_policy("root", ADMIN)
    store.create_user("keyless")
    store.attach_policy("keyless", ADMIN)  # may ManageUsers, but cannot log in
    with pytest.raises(LastAdministrator):
        store.delete_credentials("root", key)


def test_a_store_without_administrators_is_left_alone(store: SqlAuthStore) -> None:
    # Before setup, or in a store only tests fill: nothing to protect, nothing refused.
    store.create_user("dev")
    key = store.create_credentials("dev").access_key_id
    store.attach_policy("dev", DEVELOPER)
    store.delete_credentials("dev", key)
    store.delete_user("dev")


def test_a_check_then_write_is_not_refused_when_another_connection_writes_in_between(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The last-administrator check reads, then the change writes.  In a deferred SQLite transaction a commit
    by another connection in between made the write fail at once with "database is locked" (busy timeout or
    not): the store's write transactions take the write lock first, so the other writer waits instead."""
    import threading
    import time

    from lakemount.auth import store as store_module
    from lakemount.metastore.sqlschema import make_engine

    engine = make_engine(f"sqlite:///{tmp_path / 'auth.db'}")
    store = SqlAuthStore(engine, "k")
    store.create_user("gus")
    store.create_group("eng")
    store.add_member("eng", "gus")
    check = store_module._administrators
    other: list[BaseException | None] = []
    started: list[bool] = []

    def check_then_let_another_connection_write(conn):  # type: ignore[no-untyped-def]
        found = check(conn)
        if not started:
            started.append(True)

            def write() -> None:
                try:
                    SqlAuthStore(engine, "k").create_user("ada")
                    other.append(None)
                except BaseException as exc:  # noqa: BLE001 - reported below
                    other.append(exc)
            t = threading.Thread(target=write)
            t.start()
            t.join(1.0)  # done within a second unless it waits for this transaction's lock
        return found

    monkeypatch.setattr(store_module, "_administrators", check_then_let_another_connection_write)
    store.remove_member("eng", "gus")
    end = time.monotonic() + 30
    while not other and time.monotonic() < end:
        time.sleep(0.01)
    assert other == [None], other
    assert [u.id for u in store.list_users()] == ["ada", "gus"]
    assert store.list_members("eng") == []
    engine.dispose()
