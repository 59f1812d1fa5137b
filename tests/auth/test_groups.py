"""Groups in SqlAuthStore: membership grants a group's policies, removal revokes them, one query per decision."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from lakemount.auth import (
    ADMIN,
    ANALYST,
    DEVELOPER,
    Action,
    Effect,
    GroupAlreadyExists,
    GroupNotFound,
    GroupPolicyAlreadyAttached,
    GroupPolicyNotAttached,
    MembershipAlreadyExists,
    MembershipNotFound,
    Policy,
    PolicyNotFound,
    SqlAuthStore,
    Statement,
    UserNotFound,
)
from lakemount.auth.cache import CachedDecisions
from lakemount.errors import InvalidArgument
from tests.auth.cache_clock import CacheClock


def test_groups_lifecycle(store: SqlAuthStore) -> None:
    admins = store.create_group("Admins", "full control")
    store.create_group("Viewers")
    assert admins.created_at.tzinfo is not None
    assert store.get_group("Admins") == admins
    assert store.get_group("Admins").description == "full control"
    assert [g.id for g in store.list_groups()] == ["Admins", "Viewers"]
    assert [g.id for g in store.list_groups(after="Admins")] == ["Viewers"]
    assert [g.id for g in store.list_groups(limit=1)] == ["Admins"]
    with pytest.raises(GroupAlreadyExists):
        store.create_group("Admins")
    store.delete_group("Admins")
    with pytest.raises(GroupNotFound):
        store.get_group("Admins")
    with pytest.raises(GroupNotFound):
        store.delete_group("Admins")


@pytest.mark.parametrize("bad", ["", "a b", "x/y", "a" * 129, "é"])
def test_bad_group_ids(store: SqlAuthStore, bad: str) -> None:
    with pytest.raises(InvalidArgument):
        store.create_group(bad)


def test_membership_grants_and_removal_revokes(store: SqlAuthStore) -> None:
    store.create_user("alice")
    store.create_group("Developers")
    store.attach_group_policy("Developers", DEVELOPER)
    assert not store.authorize("alice", Action.WRITE_REPO, "demo")
    store.add_member("Developers", "alice")
    assert store.authorize("alice", Action.WRITE_REPO, "demo")
    assert not store.authorize("alice", Action.MANAGE_USERS)
    assert [u.id for u in store.list_members("Developers")] == ["alice"]
    assert [g.id for g in store.list_user_groups("alice")] == ["Developers"]
    assert store.list_user_policies("alice") == []  # attached to her directly: none
    assert store.effective_policy_names("alice") == [DEVELOPER]
    store.remove_member("Developers", "alice")
    assert not store.authorize("alice", Action.WRITE_REPO, "demo")
    assert store.list_user_groups("alice") == []
    with pytest.raises(MembershipNotFound):
        store.remove_member("Developers", "alice")


def test_membership_errors(store: SqlAuthStore) -> None:
    store.create_user("alice")
    store.create_group("G")
    store.add_member("G", "alice")
    with pytest.raises(MembershipAlreadyExists):
        store.add_member("G", "alice")
    with pytest.raises(GroupNotFound):
        store.add_member("nogroup", "alice")
    with pytest.raises(UserNotFound):
        store.add_member("G", "ghost")
    with pytest.raises(GroupNotFound):
        store.list_members("nogroup")
    with pytest.raises(UserNotFound):
        store.list_user_groups("ghost")
    with pytest.raises(UserNotFound):
        store.effective_policy_names("ghost")


def test_group_policy_attachments(store: SqlAuthStore) -> None:
    store.create_group("G")
    store.attach_group_policy("G", ANALYST)
    store.attach_group_policy("G", DEVELOPER)
    assert store.list_group_policies("G") == [ANALYST, DEVELOPER]
    with pytest.raises(GroupPolicyAlreadyAttached):
        store.attach_group_policy("G", ANALYST)
    with pytest.raises(PolicyNotFound):
        store.attach_group_policy("G", "NoSuchPolicy")
    with pytest.raises(GroupNotFound):
        store.attach_group_policy("nogroup", ANALYST)
    store.detach_group_policy("G", DEVELOPER)
    assert store.list_group_policies("G") == [ANALYST]
    with pytest.raises(GroupPolicyNotAttached):
        store.detach_group_policy("G", DEVELOPER)
    with pytest.raises(GroupNotFound):
        store.list_group_policies("nogroup")


def test_effective_policies_are_own_plus_every_group(store: SqlAuthStore) -> None:
    store.create_policy(Policy("ProdReader", (Statement(Effect.ALLOW, ("ReadRepo",), "prod-*"),)))
    store.create_policy(Policy("NoSecrets", (Statement(Effect.DENY, ("*",), "prod-secrets"),)))
    store.create_user("etl")
    store.attach_policy("etl", "ProdReader")
    for g in ("Writers", "Guarded", "Analysts"):
        store.create_group(g)
    store.attach_group_policy("Writers", DEVELOPER)
    store.attach_group_policy("Guarded", "NoSecrets")
    store.attach_group_policy("Analysts", "ProdReader")  # the same policy twice: listed once
    for g in ("Writers", "Guarded", "Analysts"):
        store.add_member(g, "etl")
    assert store.effective_policy_names("etl") == [DEVELOPER, "NoSecrets", "ProdReader"]
    assert store.authorize("etl", Action.WRITE_REPO, "dev-sales")
    assert store.authorize("etl", Action.READ_REPO, "prod-sales")
    # A group's Deny wins over the user's own Allow and another group's.
    assert not store.authorize("etl", Action.READ_REPO, "prod-secrets")
    store.attach_policy("etl", ADMIN)
    assert not store.authorize("etl", Action.READ_REPO, "prod-secrets")
    # Deleting a custom policy detaches it from groups too.
    store.delete_policy("NoSecrets")
    assert store.list_group_policies("Guarded") == []
    assert store.authorize("etl", Action.READ_REPO, "prod-secrets")


def test_delete_user_removes_memberships(store: SqlAuthStore) -> None:
    store.create_user("alice")
    store.create_group("G")
    store.attach_group_policy("G", ADMIN)
    store.add_member("G", "alice")
    store.delete_user("alice")
    assert store.list_members("G") == []
    store.create_user("alice")  # a new user of the same name inherits nothing
    assert store.list_user_groups("alice") == []
    assert not store.authorize("alice", Action.READ_REPO, "demo")


def test_delete_group_removes_its_attachments_and_memberships(store: SqlAuthStore) -> None:
    store.create_user("alice")
    store.create_group("G")
    store.attach_group_policy("G", ADMIN)
    store.add_member("G", "alice")
    assert store.authorize("alice", Action.MANAGE_USERS)
    store.delete_group("G")
    assert not store.authorize("alice", Action.MANAGE_USERS)
    assert store.list_user_groups("alice") == []
    store.create_group("G")  # a new group of the same name inherits nothing
    assert store.list_group_policies("G") == []
    assert store.list_members("G") == []


def test_authorize_is_one_query_whatever_the_groups(store: SqlAuthStore, engine: sa.Engine) -> None:
    store.create_user("alice")
    for i in range(5):
        store.create_group(f"g{i}")
        store.create_policy(Policy(f"p{i}", (Statement(Effect.ALLOW, ("ReadRepo",), f"repo{i}"),)))
        store.attach_group_policy(f"g{i}", f"p{i}")
        store.add_member(f"g{i}", "alice")
    statements: list[str] = []

    def count(conn: object, cursor: object, statement: str, *args: object) -> None:
        statements.append(statement)

    sa.event.listen(engine, "before_cursor_execute", count)
    try:
        assert store.authorize("alice", Action.READ_REPO, "repo4")
        assert not store.authorize("alice", Action.READ_REPO, "repo5")
    finally:
        sa.event.remove(engine, "before_cursor_execute", count)
    assert len(statements) == 2, statements


def test_cached_decision_revoked_after_ttl_or_clear(store: SqlAuthStore, monkeypatch: pytest.MonkeyPatch) -> None:
    from lakemount.auth import cache

    clock = CacheClock()
    monkeypatch.setattr(cache, "time", clock)
    store.create_user("alice")
    store.create_group("Writers")
    store.attach_group_policy("Writers", DEVELOPER)
    store.add_member("Writers", "alice")
    decisions = CachedDecisions(store, ttl=0.3)
    assert decisions.allowed("alice", Action.WRITE_REPO, "demo")
    store.remove_member("Writers", "alice")
    clock.t += 0.25
    assert decisions.allowed("alice", Action.WRITE_REPO, "demo")  # still cached, within the ttl
    clock.t += 0.1  # past it
    assert not decisions.allowed("alice", Action.WRITE_REPO, "demo")
    store.add_member("Writers", "alice")
    decisions.clear()
    assert decisions.allowed("alice", Action.WRITE_REPO, "demo")
    store.delete_group("Writers")
    decisions.clear()
    assert not decisions.allowed("alice", Action.WRITE_REPO, "demo")


def test_default_groups_once(store: SqlAuthStore) -> None:
    created = store.create_default_groups()
    assert [g.id for g in created] == ["Admins", "Developers", "Viewers"]
    assert {g: store.list_group_policies(g) for g in ("Admins", "Developers", "Viewers")} == {
        "Admins": [ADMIN], "Developers": [DEVELOPER], "Viewers": [ANALYST],
    }
    store.detach_group_policy("Viewers", ANALYST)  # an operator's change survives a second call
    assert store.create_default_groups() == []
    assert store.list_group_policies("Viewers") == []
    store.create_user("v")
    store.add_member("Developers", "v")
    assert store.authorize("v", Action.CREATE_REPO) and not store.authorize("v", Action.MANAGE_USERS)
