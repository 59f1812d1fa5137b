"""Who sent a request, and whether they may do it: signatures, then role policies.

Authentication is the protocol layer's (``sig.auth.authenticate``, which also
handles SigV2); this module feeds it secrets from the auth store and judges
the authenticated user's policies for an action on a repository.  Both answers
are cached for a few seconds per process, as lakeFS does: a small GET would
otherwise spend more time in two SQL queries than in serving the object.  A
revoked key or detached policy therefore takes effect within ``TTL`` seconds
in every gateway process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from lakemount.auth.cache import CachedDecisions, TtlCache
from lakemount.auth.model import UserID
from lakemount.auth.policies import Action
from lakemount.auth.store import SqlAuthStore
from lakemount.gateway.errors import s3_error
from lakemount.gateway.sig.auth import authenticate, mechanisms
from lakemount.gateway.sig.request import HttpRequest
from lakemount.gateway.sig.result import AuthResult
from lakemount.serving.http import Request

TTL: Final = 5.0
MAX_ENTRIES: Final = 10_000


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated user (``user_id``) or an anonymous caller (``None``)."""

    user_id: UserID | None
    auth: AuthResult | None

    @property
    def anonymous(self) -> bool:
        return self.user_id is None


ANONYMOUS: Final = Principal(None, None)


class Access:
    """Authentication and authorization against one ``SqlAuthStore``."""

    def __init__(self, store: SqlAuthStore, *, ttl: float = TTL) -> None:
        self.store = store
        self._keys = TtlCache(ttl, MAX_ENTRIES)
        self._decisions = CachedDecisions(store, ttl, MAX_ENTRIES)

    def _lookup(self, access_key_id: str) -> tuple[UserID, str]:
        hit = self._keys.get(access_key_id)
        if hit is not None:
            return hit  # type: ignore[return-value]
        found = self.store.lookup_secret(access_key_id)  # raises CredentialsNotFound
        self._keys.put(access_key_id, found)
        return found

    def secret(self, access_key_id: str) -> str:
        """The secret of a key; raises ``CredentialsNotFound`` (the verifier's InvalidAccessKeyId)."""
        return self._lookup(access_key_id)[1]

    def authenticate(self, request: Request, *, virtual_host_bucket: str | None) -> Principal:
        """The principal behind a request; unsigned requests are anonymous.

        Raises ``S3Error`` for a signature that does not verify (see
        ``sig.auth.authenticate``).
        """
        signed = HttpRequest.of(request)
        claimed = mechanisms(signed)  # asked once: its header map and decoded query are not made again
        auth, presigned_v4, presigned_v2 = claimed
        if auth is None and not presigned_v4 and not presigned_v2:
            return ANONYMOUS
        if "X-Amz-Expires=-" in request.raw_query:
            # A URL presigned to expire in the past (S3 answers as for any expired URL).
            raise s3_error("AccessDenied", "Request has expired")
        result = authenticate(signed, self.secret, virtual_host_bucket=virtual_host_bucket, claimed=claimed)
        return Principal(self._lookup(result.access_key_id)[0], result)

    def allowed(self, user_id: str, action: Action, repo: str = "*") -> bool:
        """Whether ``user_id``'s policies allow ``action`` on ``repo`` (cached for ``TTL``)."""
        return self._decisions.allowed(user_id, action, repo)

    def forget(self) -> None:
        """Drop cached decisions (after this process changed policies)."""
        self._decisions.clear()
