"""Users, groups, access keys and role policies shared by the gateway, the API and the CLI.

``SqlAuthStore`` (``store.py``) keeps them in the ref store's database with
secrets encrypted under the server key (``crypto.py``); ``policies.py`` defines
the actions and the built-in roles ``Admin``, ``Developer`` and ``Analyst``.
A user's effective policies are their own and those of every group they belong to.
"""

from lakemount.auth.crypto import SecretBox, UndecryptableSecret, read_key_file
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
from lakemount.auth.policies import ADMIN, ANALYST, BUILTIN_POLICIES, DEVELOPER, Action, Effect, Policy, Statement
from lakemount.auth.store import SqlAuthStore

__all__ = [
    "ADMIN",
    "ANALYST",
    "BUILTIN_POLICIES",
    "DEVELOPER",
    "AccessKey",
    "AccessKeyID",
    "Action",
    "Credentials",
    "CredentialsAlreadyExist",
    "CredentialsNotFound",
    "Effect",
    "Group",
    "GroupAlreadyExists",
    "GroupID",
    "GroupNotFound",
    "GroupPolicyAlreadyAttached",
    "GroupPolicyNotAttached",
    "MembershipAlreadyExists",
    "MembershipNotFound",
    "Policy",
    "PolicyAlreadyAttached",
    "PolicyAlreadyExists",
    "PolicyNotAttached",
    "PolicyNotFound",
    "SecretBox",
    "SqlAuthStore",
    "Statement",
    "UndecryptableSecret",
    "User",
    "UserAlreadyExists",
    "UserID",
    "UserNotFound",
    "read_key_file",
]
