"""SqlAuthStore against SQLite (as the embedded default runs it) and, when configured, PostgreSQL."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
import sqlalchemy as sa

from lakemount.auth import (
    ADMIN,
    ANALYST,
    DEVELOPER,
    Action,
    CredentialsAlreadyExist,
    CredentialsNotFound,
    Effect,
    Policy,
    PolicyAlreadyAttached,
    PolicyAlreadyExists,
    PolicyNotAttached,
    PolicyNotFound,
    SecretBox,
    SqlAuthStore,
    Statement,
    UndecryptableSecret,
    UserAlreadyExists,
    UserNotFound,
    read_key_file,
)
from lakemount.errors import AlreadyExists, InvalidArgument, NotFound, ReadOnly

SERVER_KEY = "test-server-key"


def test_users_lifecycle(store: SqlAuthStore) -> None:
    alice = store.create_user("alice")
    store.create_user("bob@example.com")
    assert alice.created_at.tzinfo is not None
    assert store.get_user("alice") == alice
    assert [u.id for u in store.list_users()] == ["alice", "bob@example.com"]
    assert [u.id for u in store.list_users(after="alice")] == ["bob@example.com"]
    assert [u.id for u in store.list_users(limit=1)] == ["alice"]
    with pytest.raises(UserAlreadyExists):
        store.create_user("alice")
    store.delete_user("alice")
    with pytest.raises(UserNotFound):
        store.get_user("alice")
    with pytest.raises(UserNotFound):
        store.delete_user("alice")


@pytest.mark.parametrize("bad", ["", "a b", "x/y", "a" * 65, "é"])
def test_bad_user_ids(store: SqlAuthStore, bad: str) -> None:
    with pytest.raises(InvalidArgument):
        store.create_user(bad)


def test_generated_credentials_look_like_aws(store: SqlAuthStore) -> None:
    store.create_user("alice")
    creds = store.create_credentials("alice")
    assert re.fullmatch(r"AKIA[A-Z0-9]{16}", creds.access_key_id)
    assert re.fullmatch(r"[A-Za-z0-9+/]{40}", creds.secret_access_key)
    assert creds.secret_access_key not in repr(creds)
    assert store.lookup_secret(creds.access_key_id) == ("alice", creds.secret_access_key)
    assert [k.access_key_id for k in store.list_credentials("alice")] == [creds.access_key_id]
    assert store.get_credentials(creds.access_key_id).user_id == "alice"


def test_given_credentials_and_errors(store: SqlAuthStore) -> None:
    store.create_user("ci")
    creds = store.create_credentials("ci", "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    assert store.lookup_secret("AKIAIOSFODNN7EXAMPLE")[1] == "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    assert creds.user_id == "ci"
    with pytest.raises(CredentialsAlreadyExist):
        store.create_credentials("ci", "AKIAIOSFODNN7EXAMPLE", "other-secret")
    with pytest.raises(UserNotFound):
        store.create_credentials("nobody")
    with pytest.raises(InvalidArgument):
        store.create_credentials("ci", "bad/key", "secret")
    with pytest.raises(InvalidArgument):
        store.create_credentials("ci", "AKIAGOOD", "has space")
    with pytest.raises(CredentialsNotFound):
        store.lookup_secret("AKIANOPE")
    with pytest.raises(NotFound):  # any string, even one no key could have
        store.lookup_secret("not a key/at all")
    with pytest.raises(CredentialsNotFound):
        store.delete_credentials("someone-else", "AKIAIOSFODNN7EXAMPLE")
    store.delete_credentials("ci", "AKIAIOSFODNN7EXAMPLE")
    with pytest.raises(CredentialsNotFound):
        store.lookup_secret("AKIAIOSFODNN7EXAMPLE")
    with pytest.raises(UserNotFound):
        store.list_credentials("nobody")


def test_secrets_are_encrypted_at_rest(store: SqlAuthStore, engine: sa.Engine) -> None:
    store.create_user("alice")
    creds = store.create_credentials("alice")
    with engine.connect() as conn:
        blob = conn.execute(sa.text("SELECT encrypted_secret FROM auth_credentials")).scalar_one()
    assert creds.secret_access_key.encode() not in bytes(blob)
    # Another server key cannot read it.
    other = SqlAuthStore(engine, "another-key")
    with pytest.raises(UndecryptableSecret):
        other.lookup_secret(creds.access_key_id)
    # A row moved onto another key id does not decrypt either.
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE auth_credentials SET access_key_id = 'AKIAMOVED'"))
    with pytest.raises(UndecryptableSecret):
        store.lookup_secret("AKIAMOVED")


def test_secrets_never_logged_or_repr(store: SqlAuthStore, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    store.create_user("alice")
    creds = store.create_credentials("alice")
    store.lookup_secret(creds.access_key_id)
    assert creds.secret_access_key not in caplog.text
    assert SERVER_KEY not in repr(store) and SERVER_KEY not in repr(SecretBox(SERVER_KEY))


def test_delete_user_removes_keys_and_attachments(store: SqlAuthStore) -> None:
    store.create_user("root")  # alice is not the last administrator (tests/auth/test_last_admin.py)
    store.create_credentials("root")
    store.attach_policy("root", ADMIN)
    store.create_user("alice")
    creds = store.create_credentials("alice")
    store.attach_policy("alice", ADMIN)
    store.delete_user("alice")
    with pytest.raises(CredentialsNotFound):
        store.lookup_secret(creds.access_key_id)
    store.create_user("alice")
    assert store.list_user_policies("alice") == []
    assert not store.authorize("alice", Action.READ_REPO, "repo")


def test_builtin_roles(store: SqlAuthStore) -> None:
    for user, role in [("root", ADMIN), ("dev", DEVELOPER), ("ana", ANALYST)]:
        store.create_user(user)
        store.attach_policy(user, role)
    store.create_user("nobody")
    table = {
        "root": {a: True for a in Action},
        # Importing reads the server's storage, the audit trail shows everyone's work: Admin's alone.
        "dev": {a: a not in (Action.MANAGE_USERS, Action.IMPORT_FROM_STORAGE, Action.AUDIT_READ) for a in Action},
        "ana": {a: a in (Action.READ_REPO, Action.MANAGE_OWN_CREDENTIALS) for a in Action},
        "nobody": {a: False for a in Action},
    }
    for user, expected in table.items():
        for action, allowed in expected.items():
            assert store.authorize(user, action, "demo") is allowed, (user, action)
    assert store.authorize("root", "ManageUsers")
    assert not store.authorize("ghost", Action.READ_REPO, "demo")
    with pytest.raises(InvalidArgument):
        store.authorize("root", "FlyToTheMoon", "demo")


def test_attach_detach(store: SqlAuthStore) -> None:
    store.create_user("alice")
    store.attach_policy("alice", ANALYST)
    store.attach_policy("alice", DEVELOPER)
    assert store.list_user_policies("alice") == [ANALYST, DEVELOPER]
    with pytest.raises(PolicyAlreadyAttached):
        store.attach_policy("alice", ANALYST)
    with pytest.raises(PolicyNotFound):
        store.attach_policy("alice", "NoSuchPolicy")
    with pytest.raises(UserNotFound):
        store.attach_policy("ghost", ANALYST)
    store.detach_policy("alice", DEVELOPER)
    assert not store.authorize("alice", Action.WRITE_REPO, "demo")
    with pytest.raises(PolicyNotAttached):
        store.detach_policy("alice", DEVELOPER)
    with pytest.raises(UserNotFound):
        store.list_user_policies("ghost")


def test_custom_policies_per_repository_and_deny_wins(store: SqlAuthStore) -> None:
    store.create_policy(Policy("ProdWriter", (Statement(Effect.ALLOW, ("ReadRepo", "WriteRepo"), "prod-*"),)))
    store.create_policy(Policy("NoProdSecrets", (Statement(Effect.DENY, ("*",), "prod-secrets"),)))
    store.create_user("etl")
    store.attach_policy("etl", "ProdWriter")
    assert store.authorize("etl", Action.WRITE_REPO, "prod-sales")
    assert store.authorize("etl", Action.WRITE_REPO, "prod-secrets")
    assert not store.authorize("etl", Action.WRITE_REPO, "dev-sales")
    assert not store.authorize("etl", Action.DELETE_REPO, "prod-sales")
    store.attach_policy("etl", "NoProdSecrets")
    assert not store.authorize("etl", Action.READ_REPO, "prod-secrets")
    store.attach_policy("etl", ADMIN)
    assert not store.authorize("etl", Action.READ_REPO, "prod-secrets")  # deny beats Admin's allow
    assert store.get_policy("ProdWriter").statements[0].resource == "prod-*"
    assert [p.name for p in store.list_policies()] == [ADMIN, ANALYST, DEVELOPER, "NoProdSecrets", "ProdWriter"]
    with pytest.raises(PolicyAlreadyExists):
        store.create_policy(Policy("ProdWriter", (Statement(Effect.ALLOW, ("ReadRepo",)),)))
    with pytest.raises(AlreadyExists):
        store.create_policy(Policy(ADMIN, (Statement(Effect.ALLOW, ("ReadRepo",)),)))
    with pytest.raises(ReadOnly):
        store.delete_policy(DEVELOPER)
    store.delete_policy("NoProdSecrets")
    assert "NoProdSecrets" not in store.list_user_policies("etl")
    with pytest.raises(PolicyNotFound):
        store.delete_policy("NoProdSecrets")
    with pytest.raises(InvalidArgument):
        Statement(Effect.ALLOW, ("Teleport",))


def test_reopen_same_database(engine: sa.Engine) -> None:
    first = SqlAuthStore(engine, SERVER_KEY)
    first.create_user("alice")
    creds = first.create_credentials("alice")
    second = SqlAuthStore(engine, SERVER_KEY)  # create_all finds the tables
    assert second.lookup_secret(creds.access_key_id)[1] == creds.secret_access_key


def test_key_file(tmp_path: Path) -> None:
    path = tmp_path / "home" / "server.key"
    key = read_key_file(path)
    assert len(key) >= 40 and path.stat().st_mode & 0o777 == 0o600
    assert read_key_file(path) == key
    with pytest.raises(FileNotFoundError):
        read_key_file(tmp_path / "absent.key", create=False)
    (tmp_path / "empty.key").write_text("\n")
    with pytest.raises(InvalidArgument):
        read_key_file(tmp_path / "empty.key")
