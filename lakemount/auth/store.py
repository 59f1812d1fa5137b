"""``SqlAuthStore``: users, groups, access keys and policy attachments in the ref store.

Its tables (``auth_users``, ``auth_credentials``, ``auth_policies``,
``auth_user_policies``, ``auth_groups``, ``auth_group_members``,
``auth_group_policies``) live in their own ``MetaData`` and are created on first
use (a database made before groups existed gets the group tables on its next
open), so the auth store can share the ref store's engine without the ref store
knowing of it.  SQL is plain SQLAlchemy Core and runs unchanged on SQLite and
PostgreSQL; uniqueness is enforced by primary keys, so two processes creating
the same user race safely and one of them gets ``AlreadyExists``.

A change that would leave no administrator (no user who holds an access key
and may ``ManageUsers``) is refused with ``LastAdministrator``: deleting the
last one, their last key, or the policy, group or membership that made them
one.  The web UI and the API could otherwise lock everybody out, leaving only
``lakemount auth`` on a server.  The check runs in the change's transaction.

Secrets are stored encrypted under the server key (see ``crypto.SecretBox``) and
returned in clear only by ``create_credentials`` (once, to show the user) and
``lookup_secret`` (to verify a signature).  All methods are blocking; the front
ends call them from worker threads.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from lakemount.auth.crypto import SecretBox
from lakemount.auth.keys import (
    check_access_key_id,
    check_group_id,
    check_policy_name,
    check_secret,
    check_user_id,
    generate_access_key_id,
    generate_secret_access_key,
)
from lakemount.auth.model import (
    AccessKey,
    AccessKeyID,
    Credentials,
    CredentialsAlreadyExist,
    CredentialsNotFound,
    Group,
    GroupAlreadyExists,
    GroupID,
    GroupNotFound,
    GroupPolicyAlreadyAttached,
    GroupPolicyNotAttached,
    LastAdministrator,
    MembershipAlreadyExists,
    MembershipNotFound,
    PolicyAlreadyAttached,
    PolicyAlreadyExists,
    PolicyNotAttached,
    PolicyNotFound,
    User,
    UserAlreadyExists,
    UserID,
    UserNotFound,
)
from lakemount.auth.policies import BUILTIN_POLICIES, DEFAULT_GROUPS, Action, Policy, evaluate
from lakemount.errors import InvalidArgument, ReadOnly

metadata = sa.MetaData()

users = sa.Table(
    "auth_users",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)

credentials = sa.Table(
    "auth_credentials",
    metadata,
    sa.Column("access_key_id", sa.String(128), primary_key=True),
    sa.Column("encrypted_secret", sa.LargeBinary, nullable=False),
    sa.Column("user_id", sa.String(64), sa.ForeignKey("auth_users.id"), nullable=False, index=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)

policies = sa.Table(
    "auth_policies",
    metadata,
    sa.Column("name", sa.String(128), primary_key=True),
    sa.Column("statements", sa.Text, nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)

user_policies = sa.Table(
    "auth_user_policies",
    metadata,
    sa.Column("user_id", sa.String(64), sa.ForeignKey("auth_users.id"), primary_key=True),
    sa.Column("policy_name", sa.String(128), primary_key=True),
)

groups = sa.Table(
    "auth_groups",
    metadata,
    sa.Column("id", sa.String(128), primary_key=True),
    sa.Column("description", sa.Text, nullable=False, default=""),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)

group_members = sa.Table(
    "auth_group_members",
    metadata,
    sa.Column("group_id", sa.String(128), sa.ForeignKey("auth_groups.id"), primary_key=True),
    # Indexed for the other direction: a user's groups, and authorize()'s join.
    sa.Column("user_id", sa.String(64), sa.ForeignKey("auth_users.id"), primary_key=True, index=True),
)

group_policies = sa.Table(
    "auth_group_policies",
    metadata,
    sa.Column("group_id", sa.String(128), sa.ForeignKey("auth_groups.id"), primary_key=True),
    sa.Column("policy_name", sa.String(128), primary_key=True),
)


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _aware(value: datetime) -> datetime:
    # SQLite keeps no zone; every value was written in UTC.
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _attached_names(user_id: str) -> sa.CompoundSelect[Any]:
    """The names of the policies attached to ``user_id`` directly or through a group, each once."""
    own = sa.select(user_policies.c.policy_name.label("policy_name")).where(user_policies.c.user_id == user_id)
    via_groups = (
        sa.select(group_policies.c.policy_name.label("policy_name"))
        .select_from(group_members.join(group_policies, group_policies.c.group_id == group_members.c.group_id))
        .where(group_members.c.user_id == user_id)
    )
    return sa.union(own, via_groups)


def _administrators(conn: sa.Connection) -> set[str]:
    """Users who can log in (hold an access key) and whose policies allow ``ManageUsers``."""
    own = sa.select(user_policies.c.user_id, user_policies.c.policy_name)
    via_groups = sa.select(group_members.c.user_id, group_policies.c.policy_name).select_from(
        group_members.join(group_policies, group_policies.c.group_id == group_members.c.group_id)
    )
    attached = sa.union(own, via_groups).subquery()
    keyed = sa.select(credentials.c.user_id).distinct()
    rows = conn.execute(
        sa.select(attached.c.user_id, attached.c.policy_name, policies.c.statements)
        .select_from(attached.outerjoin(policies, policies.c.name == attached.c.policy_name))
        .where(attached.c.user_id.in_(keyed))
    ).all()
    by_user: dict[str, list[Any]] = {}
    for r in rows:
        by_user.setdefault(r.user_id, []).append(r)
    manage = Action.MANAGE_USERS.value
    return {u for u, found in by_user.items() if evaluate(SqlAuthStore._policies_of(found), manage)}


class SqlAuthStore:
    """Users, groups, credentials and policies in SQL; thread-safe like its engine."""

    def __init__(
        self,
        engine: sa.Engine,
        secret_key: str | bytes,
        *,
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        """Open the store, creating its tables if needed.

        ``secret_key`` is the server key that encrypts secrets at rest; a store
        opened with another key raises ``UndecryptableSecret`` from
        ``lookup_secret``.
        """
        self._engine = engine
        self._box = SecretBox(secret_key)
        self._clock = clock
        try:
            metadata.create_all(engine)
        except SQLAlchemyError:
            # Another process may have created the tables between our check and
            # our CREATE; a second pass finds them and creates nothing.
            metadata.create_all(engine)

    def __repr__(self) -> str:
        return f"SqlAuthStore({self._engine.url.render_as_string(hide_password=True)!r})"

    @contextlib.contextmanager
    def _writing(self) -> Iterator[sa.Connection]:
        """A write transaction.  On SQLite it takes the write lock at its start (``BEGIN IMMEDIATE``): a
        transaction that reads first and then writes (the last-administrator check) could not take it after
        another connection's commit, and SQLite answers that at once with "database is locked", past any
        busy timeout (a 500 from DELETE .../members seen under load)."""
        with self._engine.connect().execution_options(lm_write=True) as conn, conn.begin():
            yield conn

    @contextlib.contextmanager
    def _keeping_an_administrator(self, change: str) -> Iterator[sa.Connection]:
        """A transaction for ``change`` that rolls back with ``LastAdministrator`` if it removed the last one.

        A store that never had an administrator (tests, a fresh home before
        ``setup``) is left alone.
        """
        with self._writing() as conn:
            before = _administrators(conn)
            yield conn
            if before and not _administrators(conn):
                raise LastAdministrator(change, sorted(before))

    # --- users -------------------------------------------------------------------

    def create_user(self, user_id: str) -> User:
        """Create a user; raises ``InvalidName`` or ``UserAlreadyExists``."""
        uid = check_user_id(user_id)
        now = self._clock()
        try:
            with self._writing() as conn:
                conn.execute(users.insert().values(id=uid, created_at=now))
        except IntegrityError:
            raise UserAlreadyExists(uid) from None
        return User(uid, now)

    def get_user(self, user_id: str) -> User:
        """Raises ``UserNotFound``."""
        with self._engine.connect() as conn:
            row = conn.execute(sa.select(users).where(users.c.id == user_id)).first()
        if row is None:
            raise UserNotFound(user_id)
        return User(UserID(row.id), _aware(row.created_at))

    def list_users(self, *, after: str = "", limit: int | None = None) -> list[User]:
        """Users with id greater than ``after``, in id order, at most ``limit``."""
        query = sa.select(users).where(users.c.id > after).order_by(users.c.id)
        if limit is not None:
            query = query.limit(limit)
        with self._engine.connect() as conn:
            return [User(UserID(r.id), _aware(r.created_at)) for r in conn.execute(query)]

    def delete_user(self, user_id: str) -> None:
        """Delete a user with its credentials, attachments and group memberships; raises ``UserNotFound``."""
        with self._keeping_an_administrator(f"deleting user {user_id}") as conn:
            conn.execute(group_members.delete().where(group_members.c.user_id == user_id))
            conn.execute(user_policies.delete().where(user_policies.c.user_id == user_id))
            conn.execute(credentials.delete().where(credentials.c.user_id == user_id))
            if conn.execute(users.delete().where(users.c.id == user_id)).rowcount == 0:
                raise UserNotFound(user_id)

    # --- credentials -------------------------------------------------------------

    def create_credentials(
        self, user_id: str, access_key_id: str | None = None, secret: str | None = None
    ) -> Credentials:
        """Create an access key for ``user_id`` and return it with its secret.

        Both the id and the secret are generated unless given (given ones let an
        operator configure a test suite or migrate keys).  Raises
        ``UserNotFound``, ``CredentialsAlreadyExist``, ``InvalidName`` for a bad
        id and ``InvalidArgument`` for a bad secret.
        """
        key_id = generate_access_key_id() if access_key_id is None else check_access_key_id(access_key_id)
        plain = generate_secret_access_key() if secret is None else check_secret(secret)
        now = self._clock()
        row = {
            "access_key_id": key_id,
            "encrypted_secret": self._box.encrypt(plain, key_id),
            "user_id": user_id,
            "created_at": now,
        }
        try:
            with self._writing() as conn:
                # SQLite does not enforce foreign keys unless asked per
                # connection, so the user's existence is checked here.
                self._require_user(conn, user_id)
                conn.execute(credentials.insert().values(**row))
        except IntegrityError:
            # Either the key id is taken or (PostgreSQL) the user vanished
            # concurrently; tell which.
            with self._engine.connect() as conn:
                taken = conn.execute(
                    sa.select(credentials.c.access_key_id).where(credentials.c.access_key_id == key_id)
                ).first()
            if taken is not None:
                raise CredentialsAlreadyExist(key_id) from None
            raise UserNotFound(user_id) from None
        return Credentials(key_id, plain, UserID(user_id), now)

    def delete_credentials(self, user_id: str, access_key_id: str) -> None:
        """Delete one access key of ``user_id``; raises ``CredentialsNotFound``."""
        with self._keeping_an_administrator(f"deleting access key {access_key_id} of {user_id}") as conn:
            deleted = conn.execute(
                credentials.delete().where(
                    credentials.c.access_key_id == access_key_id, credentials.c.user_id == user_id
                )
            ).rowcount
        if deleted == 0:
            raise CredentialsNotFound(access_key_id)

    def list_credentials(self, user_id: str) -> list[AccessKey]:
        """The access keys of ``user_id`` (no secrets), by id; raises ``UserNotFound``."""
        with self._engine.connect() as conn:
            self._require_user(conn, user_id)
            rows = conn.execute(
                sa.select(credentials.c.access_key_id, credentials.c.user_id, credentials.c.created_at)
                .where(credentials.c.user_id == user_id)
                .order_by(credentials.c.access_key_id)
            ).all()
        return [AccessKey(AccessKeyID(r.access_key_id), UserID(r.user_id), _aware(r.created_at)) for r in rows]

    def get_credentials(self, access_key_id: str) -> AccessKey:
        """One access key (no secret); raises ``CredentialsNotFound``."""
        with self._engine.connect() as conn:
            r = conn.execute(
                sa.select(credentials.c.access_key_id, credentials.c.user_id, credentials.c.created_at).where(
                    credentials.c.access_key_id == access_key_id
                )
            ).first()
        if r is None:
            raise CredentialsNotFound(access_key_id)
        return AccessKey(AccessKeyID(r.access_key_id), UserID(r.user_id), _aware(r.created_at))

    def lookup_secret(self, access_key_id: str) -> tuple[UserID, str]:
        """The owner and the plain secret of an access key, for signature checks.

        Raises ``CredentialsNotFound`` for any unknown id (malformed ones
        included: a verifier maps it to ``InvalidAccessKeyId``) and
        ``UndecryptableSecret`` when the server key is not the one the secret
        was stored with.
        """
        with self._engine.connect() as conn:
            r = conn.execute(
                sa.select(credentials.c.user_id, credentials.c.encrypted_secret).where(
                    credentials.c.access_key_id == access_key_id
                )
            ).first()
        if r is None:
            raise CredentialsNotFound(access_key_id)
        return UserID(r.user_id), self._box.decrypt(bytes(r.encrypted_secret), access_key_id)

    # --- policies ----------------------------------------------------------------

    def create_policy(self, policy: Policy) -> None:
        """Store a custom policy; raises ``PolicyAlreadyExists`` (built-in names too)."""
        name = check_policy_name(policy.name)
        if name in BUILTIN_POLICIES:
            raise PolicyAlreadyExists(name)
        try:
            with self._writing() as conn:
                conn.execute(policies.insert().values(name=name, statements=policy.to_json(), created_at=self._clock()))
        except IntegrityError:
            raise PolicyAlreadyExists(name) from None

    def get_policy(self, name: str) -> Policy:
        """A built-in or custom policy; raises ``PolicyNotFound``."""
        builtin = BUILTIN_POLICIES.get(name)
        if builtin is not None:
            return builtin
        with self._engine.connect() as conn:
            r = conn.execute(sa.select(policies.c.statements).where(policies.c.name == name)).first()
        if r is None:
            raise PolicyNotFound(name)
        return Policy.from_json(name, r.statements)

    def list_policies(self) -> list[Policy]:
        """Built-in then custom policies, each group by name."""
        with self._engine.connect() as conn:
            rows = conn.execute(sa.select(policies.c.name, policies.c.statements).order_by(policies.c.name)).all()
        custom = [Policy.from_json(r.name, r.statements) for r in rows]
        return [BUILTIN_POLICIES[n] for n in sorted(BUILTIN_POLICIES)] + custom

    def delete_policy(self, name: str) -> None:
        """Delete a custom policy and detach it from every user and group.

        Raises ``ReadOnly`` for a built-in policy and ``PolicyNotFound``.
        """
        if name in BUILTIN_POLICIES:
            raise ReadOnly(f"built-in policy {name} cannot be deleted")
        with self._keeping_an_administrator(f"deleting policy {name}") as conn:
            conn.execute(user_policies.delete().where(user_policies.c.policy_name == name))
            conn.execute(group_policies.delete().where(group_policies.c.policy_name == name))
            if conn.execute(policies.delete().where(policies.c.name == name)).rowcount == 0:
                raise PolicyNotFound(name)

    def attach_policy(self, user_id: str, policy_name: str) -> None:
        """Attach a policy to a user.

        Raises ``UserNotFound``, ``PolicyNotFound`` and ``PolicyAlreadyAttached``.
        """
        try:
            with self._writing() as conn:
                self._require_user(conn, user_id)
                self._require_policy(conn, policy_name)
                conn.execute(user_policies.insert().values(user_id=user_id, policy_name=policy_name))
        except IntegrityError:
            raise PolicyAlreadyAttached(user_id, policy_name) from None

    def detach_policy(self, user_id: str, policy_name: str) -> None:
        """Raises ``PolicyNotAttached`` (also for an unknown user or policy)."""
        with self._keeping_an_administrator(f"detaching policy {policy_name} from {user_id}") as conn:
            deleted = conn.execute(
                user_policies.delete().where(
                    user_policies.c.user_id == user_id, user_policies.c.policy_name == policy_name
                )
            ).rowcount
        if deleted == 0:
            raise PolicyNotAttached(user_id, policy_name)

    def list_user_policies(self, user_id: str) -> list[str]:
        """Names of the policies attached to a user, sorted; raises ``UserNotFound``."""
        with self._engine.connect() as conn:
            self._require_user(conn, user_id)
            rows = conn.execute(
                sa.select(user_policies.c.policy_name)
                .where(user_policies.c.user_id == user_id)
                .order_by(user_policies.c.policy_name)
            ).all()
        return [r.policy_name for r in rows]

    def authorize(self, user_id: str, action: Action | str, repo: str = "*") -> bool:
        """Whether ``user_id`` may do ``action`` on repository ``repo``.

        ``repo`` is ``*`` for actions that are not about one repository
        (``ManageUsers``, ``CreateRepo`` when asked in general).  An unknown user
        is denied.  Raises ``InvalidArgument`` for an unknown action, which is a
        bug in the caller rather than a refusal.
        """
        try:
            name = Action(action).value
        except ValueError:
            raise InvalidArgument(f"unknown action {action!r}") from None
        # One round trip: the user's own attachments and those of every group
        # they belong to, each joined to its custom policy's statements
        # (built-in ones have none stored).
        attached_names = _attached_names(user_id).subquery()
        with self._engine.connect() as conn:
            rows = conn.execute(
                sa.select(attached_names.c.policy_name, policies.c.statements).select_from(
                    attached_names.outerjoin(policies, policies.c.name == attached_names.c.policy_name)
                )
            ).all()
        return evaluate(self._policies_of(rows), name, repo)

    @staticmethod
    def _policies_of(rows: Sequence[Any]) -> list[Policy]:
        found: list[Policy] = []
        for r in rows:
            builtin = BUILTIN_POLICIES.get(r.policy_name)
            if builtin is not None:
                found.append(builtin)
            elif r.statements is not None:
                found.append(Policy.from_json(r.policy_name, r.statements))
        return found

    def effective_policy_names(self, user_id: str) -> list[str]:
        """Names of the policies attached to a user or any of their groups, sorted, once each; raises ``UserNotFound``."""
        with self._engine.connect() as conn:
            self._require_user(conn, user_id)
            rows = conn.execute(_attached_names(user_id).order_by("policy_name")).all()
        return [r.policy_name for r in rows]

    # --- groups ------------------------------------------------------------------

    @staticmethod
    def _require_user(conn: sa.Connection, user_id: str) -> None:
        if conn.execute(sa.select(users.c.id).where(users.c.id == user_id)).first() is None:
            raise UserNotFound(user_id)

    @staticmethod
    def _require_policy(conn: sa.Connection, policy_name: str) -> None:
        if policy_name not in BUILTIN_POLICIES and (
            conn.execute(sa.select(policies.c.name).where(policies.c.name == policy_name)).first() is None
        ):
            raise PolicyNotFound(policy_name)

    @staticmethod
    def _require_group(conn: sa.Connection, group_id: str) -> None:
        if conn.execute(sa.select(groups.c.id).where(groups.c.id == group_id)).first() is None:
            raise GroupNotFound(group_id)

    @staticmethod
    def _group(row: Any) -> Group:
        return Group(GroupID(row.id), _aware(row.created_at), row.description or "")

    def create_group(self, group_id: str, description: str = "") -> Group:
        """Create a group; raises ``InvalidName`` or ``GroupAlreadyExists``."""
        gid = check_group_id(group_id)
        now = self._clock()
        try:
            with self._writing() as conn:
                conn.execute(groups.insert().values(id=gid, description=description, created_at=now))
        except IntegrityError:
            raise GroupAlreadyExists(gid) from None
        return Group(gid, now, description)

    def get_group(self, group_id: str) -> Group:
        """Raises ``GroupNotFound``."""
        with self._engine.connect() as conn:
            row = conn.execute(sa.select(groups).where(groups.c.id == group_id)).first()
        if row is None:
            raise GroupNotFound(group_id)
        return self._group(row)

    def list_groups(self, *, after: str = "", limit: int | None = None) -> list[Group]:
        """Groups with id greater than ``after``, in id order, at most ``limit``."""
        query = sa.select(groups).where(groups.c.id > after).order_by(groups.c.id)
        if limit is not None:
            query = query.limit(limit)
        with self._engine.connect() as conn:
            return [self._group(r) for r in conn.execute(query)]

    def delete_group(self, group_id: str) -> None:
        """Delete a group with its memberships and policy attachments; raises ``GroupNotFound``.

        Its members keep their own policies and other groups; what they had
        only through this group is gone (within the decision cache's ttl).
        """
        with self._keeping_an_administrator(f"deleting group {group_id}") as conn:
            conn.execute(group_members.delete().where(group_members.c.group_id == group_id))
            conn.execute(group_policies.delete().where(group_policies.c.group_id == group_id))
            if conn.execute(groups.delete().where(groups.c.id == group_id)).rowcount == 0:
                raise GroupNotFound(group_id)

    def create_default_groups(self) -> list[Group]:
        """Create the groups of ``policies.DEFAULT_GROUPS`` with their built-in policy; returns those created.

        A group that exists already is left as it is (an operator may have
        changed it), so this is safe to call more than once.
        """
        created: list[Group] = []
        for group_id, policy_name in DEFAULT_GROUPS.items():
            try:
                group = self.create_group(group_id, f"members have the built-in {policy_name} policy")
            except GroupAlreadyExists:
                continue
            try:
                self.attach_group_policy(group_id, policy_name)
            except (GroupNotFound, GroupPolicyAlreadyAttached):
                continue  # another process deleted or finished it meanwhile
            created.append(group)
        return created

    def add_member(self, group_id: str, user_id: str) -> None:
        """Make ``user_id`` a member of ``group_id``.

        Raises ``GroupNotFound``, ``UserNotFound`` and ``MembershipAlreadyExists``.
        """
        try:
            with self._writing() as conn:
                self._require_group(conn, group_id)
                self._require_user(conn, user_id)
                conn.execute(group_members.insert().values(group_id=group_id, user_id=user_id))
        except IntegrityError:
            raise MembershipAlreadyExists(group_id, user_id) from None

    def remove_member(self, group_id: str, user_id: str) -> None:
        """Raises ``MembershipNotFound`` (also for an unknown user or group)."""
        with self._keeping_an_administrator(f"removing {user_id} from group {group_id}") as conn:
            deleted = conn.execute(
                group_members.delete().where(group_members.c.group_id == group_id, group_members.c.user_id == user_id)
            ).rowcount
        if deleted == 0:
            raise MembershipNotFound(group_id, user_id)

    def list_members(self, group_id: str) -> list[User]:
        """The members of a group, by id; raises ``GroupNotFound``."""
        with self._engine.connect() as conn:
            self._require_group(conn, group_id)
            rows = conn.execute(
                sa.select(users.c.id, users.c.created_at)
                .select_from(group_members.join(users, users.c.id == group_members.c.user_id))
                .where(group_members.c.group_id == group_id)
                .order_by(users.c.id)
            ).all()
        return [User(UserID(r.id), _aware(r.created_at)) for r in rows]

    def list_user_groups(self, user_id: str) -> list[Group]:
        """The groups ``user_id`` belongs to, by id; raises ``UserNotFound``."""
        with self._engine.connect() as conn:
            self._require_user(conn, user_id)
            rows = conn.execute(
                sa.select(groups)
                .select_from(group_members.join(groups, groups.c.id == group_members.c.group_id))
                .where(group_members.c.user_id == user_id)
                .order_by(groups.c.id)
            ).all()
        return [self._group(r) for r in rows]

    def attach_group_policy(self, group_id: str, policy_name: str) -> None:
        """Attach a policy to a group: every member gets it.

        Raises ``GroupNotFound``, ``PolicyNotFound`` and ``GroupPolicyAlreadyAttached``.
        """
        try:
            with self._writing() as conn:
                self._require_group(conn, group_id)
                self._require_policy(conn, policy_name)
                conn.execute(group_policies.insert().values(group_id=group_id, policy_name=policy_name))
        except IntegrityError:
            raise GroupPolicyAlreadyAttached(group_id, policy_name) from None

    def detach_group_policy(self, group_id: str, policy_name: str) -> None:
        """Raises ``GroupPolicyNotAttached`` (also for an unknown group or policy)."""
        with self._keeping_an_administrator(f"detaching policy {policy_name} from group {group_id}") as conn:
            deleted = conn.execute(
                group_policies.delete().where(
                    group_policies.c.group_id == group_id, group_policies.c.policy_name == policy_name
                )
            ).rowcount
        if deleted == 0:
            raise GroupPolicyNotAttached(group_id, policy_name)

    def list_group_policies(self, group_id: str) -> list[str]:
        """Names of the policies attached to a group, sorted; raises ``GroupNotFound``."""
        with self._engine.connect() as conn:
            self._require_group(conn, group_id)
            rows = conn.execute(
                sa.select(group_policies.c.policy_name)
                .where(group_policies.c.group_id == group_id)
                .order_by(group_policies.c.policy_name)
            ).all()
        return [r.policy_name for r in rows]
