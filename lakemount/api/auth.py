"""Who is calling the API and what they may do: access keys, signed tokens, and the gateway's policies.

A request authenticates with HTTP basic auth (access key id and secret, as
lakeFS's SDKs send them), or with a token from ``POST /auth/login`` sent as
``Authorization: Bearer`` or in the ``internal_auth_session`` cookie (the web
UI).  Tokens are JWTs (HS256) signed with a key derived from the server key
that also encrypts secrets at rest, so every API process of an install
accepts every other's tokens; they carry the user id and an expiry, and a
token of a deleted user stops working.  Authorization is the same
``SqlAuthStore.authorize`` the gateway and the CLI use, cached for ``TTL``
seconds per process as in the gateway.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from dataclasses import dataclass
from typing import Final

from lakemount.api.errors import ApiError, unauthorized
from lakemount.auth.cache import CachedDecisions, TtlCache
from lakemount.auth.model import CredentialsNotFound, UserID, UserNotFound
from lakemount.auth.policies import Action
from lakemount.auth.store import SqlAuthStore


@dataclass(frozen=True, slots=True)
class Permission:
    """An operation whose right is not named by the policy action that grants it: lakeFS's own action
    name, what the operation does in words, and the action of lakemount's policies that grants it.
    A refusal names the operation, then the action to ask for ("may not DeleteRepo" confused a user
    who had tried to change branch protection)."""

    lakefs_action: str
    doing: str
    action: Action


# Whoever may delete a repository may change what guards it; WriteRepo alone would let a writer unprotect
# the branch it is kept from (lakeFS grants both with RepoManagementFullAccess, not FSFullAccess).
SET_BRANCH_PROTECTION: Final = Permission(
    "branches:SetBranchProtectionRules", "change the branch protection rules", Action.DELETE_REPO)
SET_GC_RULES: Final = Permission("retention:SetGarbageCollectionRules", "change the garbage collection rules",
                                 Action.DELETE_REPO)

TTL: Final = 5.0
TOKEN_SECONDS: Final = 24 * 3600
COOKIE: Final = "internal_auth_session"
AUDIENCE: Final = "lakemount-api"
MAX_ENTRIES: Final = 10_000


def signing_key(server_key: str | bytes) -> bytes:
    """The token-signing key: derived from (never equal to) the server key."""
    raw = server_key.encode() if isinstance(server_key, str) else server_key
    return hmac.new(raw, b"lakemount api token signing v1", hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


_HEADER: Final = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())


def issue_token(key: bytes, user_id: str, *, now: float | None = None, seconds: int = TOKEN_SECONDS) -> tuple[str, int]:
    """A signed token for ``user_id`` and its expiry (unix seconds)."""
    t = int(time.time() if now is None else now)
    exp = t + seconds
    payload = _b64(json.dumps({"sub": user_id, "aud": AUDIENCE, "iat": t, "exp": exp}, separators=(",", ":")).encode())
    signing_input = f"{_HEADER}.{payload}"
    sig = _b64(hmac.new(key, signing_input.encode("ascii"), hashlib.sha256).digest())
    return f"{signing_input}.{sig}", exp


def verify_token(key: bytes, token: str, *, now: float | None = None) -> str:
    """The user id of a valid token; raises ``ApiError`` 401 for a forged, malformed or expired one."""
    parts = token.split(".")
    if len(parts) != 3:
        raise unauthorized("malformed token")
    head, payload, sig = parts
    expected = hmac.new(key, f"{head}.{payload}".encode("ascii", "replace"), hashlib.sha256).digest()
    try:
        given = _unb64(sig)
    except (ValueError, binascii.Error):
        raise unauthorized("malformed token") from None
    # The signature first: nothing an unauthenticated caller sends is parsed (deeply nested JSON raised RecursionError, a 500).
    if not hmac.compare_digest(expected, given):
        raise unauthorized("token signature does not verify")
    try:
        header = json.loads(_unb64(head))
        claims = json.loads(_unb64(payload))
    except (ValueError, binascii.Error, UnicodeDecodeError, RecursionError):
        raise unauthorized("malformed token") from None
    if not isinstance(header, dict) or header.get("alg") != "HS256":
        raise unauthorized("unsupported token algorithm")
    if not isinstance(claims, dict) or claims.get("aud") != AUDIENCE or not isinstance(claims.get("sub"), str):
        raise unauthorized("token is not for this API")
    exp = claims.get("exp")
    if not isinstance(exp, int) or exp <= (time.time() if now is None else now):
        raise unauthorized("token expired")
    return claims["sub"]


def _cookie(header: str | None, name: str) -> str | None:
    if not header:
        return None
    for part in header.split(";"):
        k, _, v = part.strip().partition("=")
        if k == name:
            return v
    return None


class Authenticator:
    """Authentication and authorization of API requests against one ``SqlAuthStore``."""

    def __init__(self, store: SqlAuthStore, key: bytes, *, ttl: float = TTL) -> None:
        self.store = store
        self.key = key
        self._secrets = TtlCache(ttl, MAX_ENTRIES)
        self._users = TtlCache(ttl, MAX_ENTRIES)
        self._decisions = CachedDecisions(store, ttl, MAX_ENTRIES)

    def check_secret(self, access_key_id: str, secret: str) -> UserID:
        """The owner of a key whose secret is ``secret``; raises ``ApiError`` 401 otherwise."""
        hit = self._secrets.get(access_key_id)
        if hit is None:
            try:
                hit = self.store.lookup_secret(access_key_id)
            except CredentialsNotFound:
                raise unauthorized("error authenticating request: unknown access key") from None
            self._secrets.put(access_key_id, hit)
        assert isinstance(hit, tuple)
        user: UserID = hit[0]
        expected: str = hit[1]
        if not hmac.compare_digest(expected.encode(), secret.encode("utf-8", "surrogateescape")):
            raise unauthorized("error authenticating request: wrong secret")
        return user

    def login(self, access_key_id: str, secret: str) -> tuple[str, int]:
        """A token and its expiry for valid credentials; raises ``ApiError`` 401."""
        return issue_token(self.key, self.check_secret(access_key_id, secret))

    def _live_user(self, user_id: str) -> UserID:
        if self._users.get(user_id) is None:
            try:
                self.store.get_user(user_id)
            except UserNotFound:
                raise unauthorized("token of a deleted user") from None
            self._users.put(user_id, True)
        return UserID(user_id)

    def authenticate(self, authorization: str | None, cookie: str | None) -> UserID:
        """The user behind a request's ``Authorization`` or session cookie; raises ``ApiError`` 401."""
        if authorization:
            scheme, _, cred = authorization.strip().partition(" ")
            scheme = scheme.lower()
            if scheme == "basic":
                try:
                    decoded = base64.b64decode(cred.strip(), validate=True).decode("utf-8")
                except (binascii.Error, UnicodeDecodeError):
                    raise unauthorized("malformed basic credentials") from None
                key_id, sep, secret = decoded.partition(":")
                if not sep:
                    raise unauthorized("malformed basic credentials")
                return self.check_secret(key_id, secret)
            if scheme == "bearer":
                return self._live_user(verify_token(self.key, cred.strip()))
            raise unauthorized(f"unsupported authorization scheme {scheme!r}")
        token = _cookie(cookie, COOKIE)
        if token:
            return self._live_user(verify_token(self.key, token))
        raise unauthorized("missing credentials: use basic auth with an access key, or a token from /auth/login")

    def allowed(self, user_id: str, action: Action, repo: str = "*") -> bool:
        """Whether ``user_id``'s policies allow ``action`` on ``repo`` (cached for ``TTL``)."""
        return self._decisions.allowed(user_id, action, repo)

    def require(self, user_id: str, action: Action | Permission, repo: str = "*") -> None:
        """Raises ``ApiError`` 403 unless ``allowed``; a ``Permission``'s refusal says what was refused and which
        action grants it."""
        needed = action.action if isinstance(action, Permission) else action
        if self.allowed(user_id, needed, repo):
            return
        where = "" if repo == "*" else f" on repository {repo}"
        if isinstance(action, Permission):
            raise ApiError(403, f"insufficient permissions: {user_id} may not {action.doing}{where}: "
                                f"that needs {needed.value} ({action.lakefs_action} in lakeFS)")
        raise ApiError(403, f"insufficient permissions: {user_id} may not {needed.value}{where}")

    def forget(self) -> None:
        """Drop cached decisions and users (after this process changed policies or users)."""
        self._decisions.clear()
        self._users.clear()
        self._secrets.clear()
