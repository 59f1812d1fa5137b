"""Records and errors of the auth subsystem: users, groups, access keys, credentials.

The records are what ``SqlAuthStore`` hands out; they never carry the server key
and only :class:`Credentials` carries a secret (hidden from ``repr`` so that a
record printed in a log line or a traceback does not leak it).  The errors
subclass the categories of :mod:`lakemount.errors`, so the front ends translate
them with their one table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import NewType

from lakemount.errors import AlreadyExists, Conflict, NotFound

UserID = NewType("UserID", str)
GroupID = NewType("GroupID", str)
AccessKeyID = NewType("AccessKeyID", str)


@dataclass(frozen=True, slots=True)
class User:
    """A principal that owns access keys and has policies attached."""

    id: UserID
    created_at: datetime  # timezone-aware, UTC


@dataclass(frozen=True, slots=True)
class Group:
    """A named set of users; the policies attached to it apply to each member."""

    id: GroupID
    created_at: datetime  # timezone-aware, UTC
    description: str = ""


@dataclass(frozen=True, slots=True)
class AccessKey:
    """What may be shown of a credential after its creation: never the secret."""

    access_key_id: AccessKeyID
    user_id: UserID
    created_at: datetime  # timezone-aware, UTC


@dataclass(frozen=True, slots=True)
class Credentials:
    """An access key with its secret, as returned once by ``create_credentials``."""

    access_key_id: AccessKeyID
    secret_access_key: str = field(repr=False)
    user_id: UserID
    created_at: datetime  # timezone-aware, UTC


# --- errors ----------------------------------------------------------------------


class UserNotFound(NotFound):
    """No user has this id."""

    def __init__(self, user_id: str) -> None:
        super().__init__(f"user not found: {user_id}")
        self.user_id = user_id


class UserAlreadyExists(AlreadyExists):
    """A user with this id exists."""

    def __init__(self, user_id: str) -> None:
        super().__init__(f"user already exists: {user_id}")
        self.user_id = user_id


class CredentialsNotFound(NotFound):
    """No access key has this id (or not for this user)."""

    def __init__(self, access_key_id: str) -> None:
        super().__init__(f"access key not found: {access_key_id}")
        self.access_key_id = access_key_id


class CredentialsAlreadyExist(AlreadyExists):
    """An access key with this id exists."""

    def __init__(self, access_key_id: str) -> None:
        super().__init__(f"access key already exists: {access_key_id}")
        self.access_key_id = access_key_id


class PolicyNotFound(NotFound):
    """No built-in or custom policy has this name."""

    def __init__(self, name: str) -> None:
        super().__init__(f"policy not found: {name}")
        self.name = name


class PolicyAlreadyExists(AlreadyExists):
    """A policy with this name exists (built-in names included)."""

    def __init__(self, name: str) -> None:
        super().__init__(f"policy already exists: {name}")
        self.name = name


class PolicyNotAttached(NotFound):
    """The policy is not attached to the user."""

    def __init__(self, user_id: str, name: str) -> None:
        super().__init__(f"policy {name} is not attached to user {user_id}")
        self.user_id, self.name = user_id, name


class PolicyAlreadyAttached(AlreadyExists):
    """The policy is already attached to the user."""

    def __init__(self, user_id: str, name: str) -> None:
        super().__init__(f"policy {name} is already attached to user {user_id}")
        self.user_id, self.name = user_id, name


class GroupNotFound(NotFound):
    """No group has this id."""

    def __init__(self, group_id: str) -> None:
        super().__init__(f"group not found: {group_id}")
        self.group_id = group_id


class GroupAlreadyExists(AlreadyExists):
    """A group with this id exists."""

    def __init__(self, group_id: str) -> None:
        super().__init__(f"group already exists: {group_id}")
        self.group_id = group_id


class MembershipNotFound(NotFound):
    """The user is not a member of the group."""

    def __init__(self, group_id: str, user_id: str) -> None:
        super().__init__(f"user {user_id} is not a member of group {group_id}")
        self.group_id, self.user_id = group_id, user_id


class MembershipAlreadyExists(AlreadyExists):
    """The user is already a member of the group."""

    def __init__(self, group_id: str, user_id: str) -> None:
        super().__init__(f"user {user_id} is already a member of group {group_id}")
        self.group_id, self.user_id = group_id, user_id


class GroupPolicyNotAttached(NotFound):
    """The policy is not attached to the group."""

    def __init__(self, group_id: str, name: str) -> None:
        super().__init__(f"policy {name} is not attached to group {group_id}")
        self.group_id, self.name = group_id, name


class GroupPolicyAlreadyAttached(AlreadyExists):
    """The policy is already attached to the group."""

    def __init__(self, group_id: str, name: str) -> None:
        super().__init__(f"policy {name} is already attached to group {group_id}")
        self.group_id, self.name = group_id, name


class LastAdministrator(Conflict):
    """A change that would leave nobody able to administer users (lock-out)."""

    def __init__(self, change: str, administrators: list[str]) -> None:
        super().__init__(
            f"{change} would leave no administrator (a user with an access key who may ManageUsers; now: "
            f"{', '.join(administrators)}): make another user an administrator first"
        )
