"""Generation and validation of user ids, access key ids and secret keys.

Generated keys look like AWS keys (``AKIA`` + 16 upper-case letters or digits; a
40-character base64-alphabet secret) so that every S3 client and every tool that
sanity-checks key formats accepts them.  Keys given by an operator (to configure
a test suite or to migrate from another store) are accepted in a wider format,
restricted only where a character would break a wire format: ``/`` and ``,``
delimit the SigV4 ``Credential=`` field, ``:`` the SigV2 ``AWS id:sig`` header,
and whitespace any header.
"""

from __future__ import annotations

import re
import secrets
import string

from lakemount.auth.model import AccessKeyID, GroupID, UserID
from lakemount.errors import InvalidArgument, InvalidName

ACCESS_KEY_PREFIX = "AKIA"
_ID_ALPHABET = string.ascii_uppercase + string.digits
_SECRET_ALPHABET = string.ascii_letters + string.digits + "+/"
SECRET_LENGTH = 40

# IAM's user-name alphabet, so names can move between lakemount, lakeFS and IAM.
_USER_ID = re.compile(r"[A-Za-z0-9_+=,.@-]{1,64}")
_GROUP_ID = re.compile(r"[A-Za-z0-9_+=,.@-]{1,128}")
_POLICY_NAME = re.compile(r"[A-Za-z0-9_+=,.@-]{1,128}")
_ACCESS_KEY_ID = re.compile(r"[A-Za-z0-9._-]{3,128}")
# Printable ASCII without space: the secret is only ever an HMAC key, but it is
# typed into config files and environment variables.
_SECRET = re.compile(r"[\x21-\x7e]{1,256}")


def generate_access_key_id() -> AccessKeyID:
    """A fresh ``AKIA...`` id (20 characters, about 82 bits of randomness)."""
    return AccessKeyID(ACCESS_KEY_PREFIX + "".join(secrets.choice(_ID_ALPHABET) for _ in range(16)))


def generate_secret_access_key() -> str:
    """A fresh 40-character secret (238 bits of randomness)."""
    return "".join(secrets.choice(_SECRET_ALPHABET) for _ in range(SECRET_LENGTH))


def check_user_id(user_id: str) -> UserID:
    """Return ``user_id`` typed, or raise ``InvalidName``."""
    if not _USER_ID.fullmatch(user_id):
        raise InvalidName("user", user_id, "use 1-64 characters of A-Z a-z 0-9 _+=,.@-")
    return UserID(user_id)


def check_group_id(group_id: str) -> GroupID:
    """Return ``group_id`` typed, or raise ``InvalidName``."""
    if not _GROUP_ID.fullmatch(group_id):
        raise InvalidName("group", group_id, "use 1-128 characters of A-Z a-z 0-9 _+=,.@-")
    return GroupID(group_id)


def check_policy_name(name: str) -> str:
    """Return ``name``, or raise ``InvalidName``."""
    if not _POLICY_NAME.fullmatch(name):
        raise InvalidName("policy", name, "use 1-128 characters of A-Z a-z 0-9 _+=,.@-")
    return name


def check_access_key_id(access_key_id: str) -> AccessKeyID:
    """Return ``access_key_id`` typed, or raise ``InvalidName``."""
    if not _ACCESS_KEY_ID.fullmatch(access_key_id):
        raise InvalidName("access key", access_key_id, "use 3-128 characters of A-Z a-z 0-9 ._-")
    return AccessKeyID(access_key_id)


def check_secret(secret: str) -> str:
    """Return ``secret``, or raise ``InvalidArgument`` (without echoing it)."""
    if not _SECRET.fullmatch(secret):
        raise InvalidArgument("invalid secret access key: use 1-256 printable ASCII characters, no spaces")
    return secret
