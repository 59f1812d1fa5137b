"""Actions, policies and the built-in roles, and how a request is judged.

A policy is a list of statements ``(effect, actions, resource)``; the resource is
``*``, a repository name, or a pattern where ``*`` matches any run of characters.
Evaluation follows lakeFS and IAM: access is denied unless some statement allows
it, and any matching ``Deny`` wins over every ``Allow``.

Built-in roles (always present, cannot be changed or deleted):

- ``Admin``: every action on every resource, the only role with ``ImportFromStorage`` and ``AuditRead``
  (an import reads what the server's own rights reach; attach a policy allowing it,
  per repository, to let others import).
- ``Developer``: like lakeFS's FSFullAccess, every repository action
  (``CreateRepo``, ``DeleteRepo``, ``ReadRepo``, ``WriteRepo``) on every repository,
  and managing one's own credentials; nothing else of auth.  ``DeleteRepo`` is
  included as in lakeFS: a developer who can create repositories can also clean
  them up; protect a repository by attaching a ``Deny`` policy to be stricter.
- ``Analyst``: ``ReadRepo`` on every repository, and managing one's own
  credentials.

Default groups, made with the first admin on the first ``lakemount up``
(like lakeFS's setup): ``Admins`` (Admin), ``Developers`` (Developer),
``Viewers`` (Analyst).  lakeFS also has ``SuperUsers`` (FSFullAccess without
auth management); lakemount's Developer already is that, so a fourth group
would only duplicate ``Developers``.

Actions that are not about a repository (``ManageUsers``,
``ManageOwnCredentials``) are checked against the resource ``*``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

from lakemount.errors import InvalidArgument


class Action(StrEnum):
    """What a user may be allowed to do."""

    CREATE_REPO = "CreateRepo"
    DELETE_REPO = "DeleteRepo"
    READ_REPO = "ReadRepo"
    WRITE_REPO = "WriteRepo"
    # Import objects from the server's storage into a repository (lakeFS's fs:ImportFromStorage): the
    # server reads what its own rights reach, so this is granted apart from WriteRepo, by Admin only.
    IMPORT_FROM_STORAGE = "ImportFromStorage"
    MANAGE_USERS = "ManageUsers"  # users, credentials of others, policies
    # Read a repository's audit trail (who read and changed what): Admin only by default, since it
    # shows other users' activity.
    AUDIT_READ = "AuditRead"
    MANAGE_OWN_CREDENTIALS = "ManageOwnCredentials"


class Effect(StrEnum):
    """Whether a matching statement allows or denies."""

    ALLOW = "Allow"
    DENY = "Deny"


ALL = "*"
REPO_ACTIONS: tuple[Action, ...] = (Action.CREATE_REPO, Action.DELETE_REPO, Action.READ_REPO, Action.WRITE_REPO)


@dataclass(frozen=True, slots=True)
class Statement:
    """Allow or deny ``actions`` (names, or ``*``) on ``resource``."""

    effect: Effect
    actions: tuple[str, ...]
    resource: str = ALL

    def __post_init__(self) -> None:
        if not self.actions:
            raise InvalidArgument("a policy statement needs at least one action")
        known = {a.value for a in Action}
        for action in self.actions:
            if action != ALL and action not in known:
                raise InvalidArgument(f"unknown action {action!r}; known: {', '.join(sorted(known))} or *")
        if not self.resource:
            raise InvalidArgument("a policy statement needs a resource (* or a repository name)")

    def matches(self, action: str, resource: str) -> bool:
        """Whether this statement speaks about ``action`` on ``resource``."""
        return (ALL in self.actions or action in self.actions) and _resource_pattern(self.resource).fullmatch(
            resource
        ) is not None


@dataclass(frozen=True, slots=True)
class Policy:
    """A named set of statements, attached to users by name."""

    name: str
    statements: tuple[Statement, ...]

    def to_json(self) -> str:
        """The statements as JSON (the name is stored beside them)."""
        return json.dumps(
            [{"effect": s.effect.value, "actions": list(s.actions), "resource": s.resource} for s in self.statements]
        )

    @classmethod
    def from_json(cls, name: str, text: str) -> Policy:
        """Inverse of :meth:`to_json`; raises ``InvalidArgument`` on a bad document."""
        try:
            raw = json.loads(text)
            statements = tuple(
                Statement(Effect(s["effect"]), tuple(str(a) for a in s["actions"]), str(s.get("resource", ALL)))
                for s in raw
            )
        except (ValueError, TypeError, KeyError) as e:
            raise InvalidArgument(f"invalid policy document for {name}: {e}") from None
        return cls(name, statements)


@lru_cache(maxsize=1024)
def _resource_pattern(resource: str) -> re.Pattern[str]:
    # Only '*' is special: repository names may never contain it, and treating
    # '?' or '[' as glob syntax would surprise people writing literal names.
    return re.compile(".*".join(re.escape(part) for part in resource.split("*")), re.DOTALL)


def evaluate(policies: Iterable[Policy], action: str, resource: str = ALL) -> bool:
    """Whether ``policies`` together allow ``action`` on ``resource``."""
    allowed = False
    for policy in policies:
        for statement in policy.statements:
            if statement.matches(action, resource):
                if statement.effect is Effect.DENY:
                    return False
                allowed = True
    return allowed


ADMIN = "Admin"
DEVELOPER = "Developer"
ANALYST = "Analyst"

_OWN_CREDENTIALS = Statement(Effect.ALLOW, (Action.MANAGE_OWN_CREDENTIALS.value,))

BUILTIN_POLICIES: Mapping[str, Policy] = {
    ADMIN: Policy(ADMIN, (Statement(Effect.ALLOW, (ALL,)),)),
    DEVELOPER: Policy(DEVELOPER, (Statement(Effect.ALLOW, tuple(a.value for a in REPO_ACTIONS)), _OWN_CREDENTIALS)),
    ANALYST: Policy(ANALYST, (Statement(Effect.ALLOW, (Action.READ_REPO.value,)), _OWN_CREDENTIALS)),
}

# Group -> the built-in policy attached to it (see the module docstring).
DEFAULT_GROUPS: Mapping[str, str] = {"Admins": ADMIN, "Developers": DEVELOPER, "Viewers": ANALYST}
