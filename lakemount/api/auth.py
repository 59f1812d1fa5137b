"""Who is calling the API and what they may do: access keys, signed tokens, and the gateway's policies.

A request authenticates with HTTP basic auth (access key id and secret, as
lakeFS's SDKs send them), or with a token from ``POST /auth/login`` sent as
``Authorization: Bearer`` or in the ``internal_auth_session`` cookie (the web
UI).  Tokens are JWTs (HS256) signed with a key derived from the server key
that also encrypts secrets at rest, so every API process of an install
accepts every other's tokens; they carry the user id, the access key id they
were minted from (``kid``) and an expiry.  A token is a session of its key:
once the key is deleted (or its user, with every key), the token is refused
within ``TTL`` seconds, the time a process keeps a key it looked up.
Authorization is the same ``SqlAuthStore.authorize`` the gateway and the CLI
use, cached for ``TTL`` seconds per process as in the gateway, so a detached
policy stops applying to every session within that too.

Every secret checked (login, ``oauth/tokens``, basic auth) goes through one
``LoginThrottle`` (``auth/throttle.py``): an unknown key id and a wrong secret
get the same answer (``BAD_CREDENTIALS``), and repeated failures of a key id
or an address are refused for a while (429 with ``Retry-After``).
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
from lakemount.auth.model import CredentialsNotFound, UserID
from lakemount.auth.policies import Action
from lakemount.auth.store import SqlAuthStore
from lakemount.auth.throttle import LoginThrottle


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
# One answer for an unknown key id and a wrong secret: which key ids exist is not for a caller to learn.
BAD_CREDENTIALS: Final = "error authenticating request: invalid access key id or secret"
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


@dataclass(frozen=True, slots=True)
class Session:
    """What a valid token says: its user and the access key it was minted from."""

    user: str
    key_id: str


def issue_token(key: bytes, user_id: str, key_id: str, *, now: float | None = None,
                seconds: int = TOKEN_SECONDS) -> tuple[str, int]:
    """A signed token for ``user_id``, minted from the access key ``key_id``, and its expiry (unix seconds)."""
    t = int(time.time() if now is None else now)
    exp = t + seconds
    claims = {"sub": user_id, "kid": key_id, "aud": AUDIENCE, "iat": t, "exp": exp}
    payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
    signing_input = f"{_HEADER}.{payload}"
    sig = _b64(hmac.new(key, signing_input.encode("ascii"), hashlib.sha256).digest())
    return f"{signing_input}.{sig}", exp


def verify_token(key: bytes, token: str, *, now: float | None = None) -> Session:
    """The session of a valid token; raises ``ApiError`` 401 for a forged, malformed or expired one, or one
    without the key it was minted from (minted before tokens carried it: log in again)."""
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
    if not isinstance(claims.get("kid"), str):
        raise unauthorized("token names no access key (minted by an older server): log in again")
    return Session(claims["sub"], claims["kid"])


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

    def __init__(self, store: SqlAuthStore, key: bytes, *, ttl: float = TTL, throttle: LoginThrottle | None = None) -> None:
        self.store = store
        self.key = key
        self.throttle = throttle or LoginThrottle()
        self._secrets = TtlCache(ttl, MAX_ENTRIES)
        self._keys = TtlCache(ttl, MAX_ENTRIES)  # key id -> its owner, for sessions
        self._decisions = CachedDecisions(store, ttl, MAX_ENTRIES)

    def _lookup(self, access_key_id: str) -> tuple[UserID, str] | None:
        hit = self._secrets.get(access_key_id)
        if hit is None:
            try:
                hit = self.store.lookup_secret(access_key_id)
            except CredentialsNotFound:
                return None
            self._secrets.put(access_key_id, hit)
        assert isinstance(hit, tuple)
        return hit

    def check_secret(self, access_key_id: str, secret: str, client: str = "") -> UserID:
        """The owner of a key whose secret is ``secret``; raises ``ApiError`` 401 (``BAD_CREDENTIALS``, for an
        unknown key id and a wrong secret alike), or 429 with ``Retry-After`` while failed attempts of this key
        id or of ``client``'s address are backing off (the secret is not checked then)."""
        address = client.rpartition(":")[0] if ":" in client else client
        wait = self.throttle.wait(access_key_id, address)
        if wait:
            raise ApiError(429, f"too many failed attempts to authenticate: retry in {wait} s",
                           (("Retry-After", str(wait)),))
        hit = self._lookup(access_key_id)
        if hit is None or not hmac.compare_digest(hit[1].encode(), secret.encode("utf-8", "surrogateescape")):
            self.throttle.failed(access_key_id, address)
            raise unauthorized(BAD_CREDENTIALS)
        self.throttle.succeeded(access_key_id, address)
        return hit[0]

    def login(self, access_key_id: str, secret: str, client: str = "") -> tuple[str, int]:
        """A token (a session of the key ``access_key_id``) and its expiry for valid credentials; raises what
        ``check_secret`` raises."""
        return issue_token(self.key, self.check_secret(access_key_id, secret, client), access_key_id)

    def _live(self, session: Session) -> UserID:
        """The user of a session whose key still exists and is still the user's; 401 otherwise (a key or user
        deleted through any process is seen within ``TTL``)."""
        owner = self._keys.get(session.key_id)
        if owner is None:
            try:
                owner = self.store.get_credentials(session.key_id).user_id
            except CredentialsNotFound:
                raise unauthorized("session of a deleted access key: log in again") from None
            self._keys.put(session.key_id, owner)
        if owner != session.user:
            raise unauthorized("session of a deleted access key: log in again")
        return UserID(session.user)

    def authenticate(self, authorization: str | None, cookie: str | None, client: str = "") -> UserID:
        """The user behind a request's ``Authorization`` or session cookie; raises ``ApiError`` 401 (429 while
        basic auth's failures back off, see ``check_secret``)."""
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
                return self.check_secret(key_id, secret, client)
            if scheme == "bearer":
                return self._live(verify_token(self.key, cred.strip()))
            raise unauthorized(f"unsupported authorization scheme {scheme!r}")
        token = _cookie(cookie, COOKIE)
        if token:
            return self._live(verify_token(self.key, token))
        raise unauthorized("missing credentials: use basic auth with an access key, or a token from /auth/login")

    def own_key(self, authorization: str | None) -> tuple[str, str]:
        """The access key (id, secret) behind the ``Authorization`` of a request :meth:`authenticate` accepted:
        basic auth's own, or the key a bearer token was minted from, so a client that logged in with a key is
        handed that key and no other (the Iceberg catalog's ``config``); raises ``ApiError`` 401 for a header
        that names no key (a session cookie's request has none)."""
        scheme, _, cred = (authorization or "").strip().partition(" ")
        if scheme.lower() not in ("basic", "bearer"):
            raise unauthorized("no access key in this request's credentials")
        if scheme.lower() == "basic":
            key_id, _, secret = base64.b64decode(cred.strip(), validate=True).decode("utf-8").partition(":")
            return key_id, secret
        key_id = verify_token(self.key, cred.strip()).key_id
        hit = self._lookup(key_id)
        if hit is None:
            raise unauthorized("session of a deleted access key: log in again")
        return key_id, hit[1]

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
        """Drop cached decisions and keys (after this process changed policies, users or keys)."""
        self._decisions.clear()
        self._keys.clear()
        self._secrets.clear()
