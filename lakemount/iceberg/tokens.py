"""``POST /v1/oauth/tokens``: OAuth2 client credentials (an access key id and its secret) for a bearer token.

The token is the API's own (``Gate.login``: the same signed token ``/auth/login``
hands out, for the same user and time), so rights and expiry are one thing for
every front end.  Errors take OAuth2's shape (``{"error", "error_description"}``),
as the spec's ``OAuthErrorResponse`` says, not the catalog's.
"""

from __future__ import annotations

import base64
import binascii
import time
from typing import Any, Final, Protocol
from urllib.parse import parse_qsl, unquote_plus

from lakemount.iceberg.errors import IcebergError

ACCESS_TOKEN_TYPE: Final = "urn:ietf:params:oauth:token-type:access_token"


class Login(Protocol):
    """What issues a token for valid credentials (the API's authenticator, adapted)."""

    def login(self, access_key_id: str, secret: str, client: str) -> tuple[str, int]:
        """(token, expiry in unix seconds) for credentials sent from ``client``; raises ``IcebergError`` 401 for bad
        credentials, 429 while failed attempts back off."""


class OAuthError(Exception):
    """An OAuth2 error answer: status, ``error`` code and description."""

    def __init__(self, status: int, error: str, description: str, headers: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(description)
        self.status = status
        self.error = error
        self.description = description
        self.headers = headers

    def body(self) -> dict[str, Any]:
        return {"error": self.error, "error_description": self.description}


def _basic(authorization: str | None) -> tuple[str, str]:
    """(client id, secret) from ``Authorization: Basic`` (RFC 6749's client_secret_basic, as DuckDB sends them)."""
    scheme, _, cred = (authorization or "").strip().partition(" ")
    if scheme.lower() != "basic":
        return "", ""
    try:
        decoded = base64.b64decode(cred.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise OAuthError(401, "invalid_client", "malformed basic credentials") from None
    client_id, _, secret = decoded.partition(":")
    return unquote_plus(client_id), unquote_plus(secret)


def issue(form: bytes, authorization: str | None, gate: Login, client: str = "") -> dict[str, Any]:
    """The ``OAuthTokenResponse`` for a form body sent from ``client``, the client's credentials in it or in
    ``authorization`` (basic); raises ``OAuthError`` (400 bad request or grant, 401 bad client, 429 ``slow_down``
    with ``Retry-After`` while failed attempts back off: the API's login throttle)."""
    try:
        fields = dict(parse_qsl(form.decode("utf-8"), keep_blank_values=True, strict_parsing=False))
    except (UnicodeDecodeError, ValueError):
        raise OAuthError(400, "invalid_request", "the form is not valid UTF-8") from None
    grant = fields.get("grant_type", "")
    if grant != "client_credentials":
        raise OAuthError(400, "unsupported_grant_type",
                         f"grant_type {grant[:60]!r} is not supported: use client_credentials with an access key")
    client_id, secret = fields.get("client_id", ""), fields.get("client_secret", "")
    if not client_id and not secret:
        client_id, secret = _basic(authorization)
    if not client_id or not secret:
        raise OAuthError(401, "invalid_client", "client_id and client_secret (an access key id and its secret) are required")
    try:
        token, expiry = gate.login(client_id, secret, client)
    except IcebergError as e:
        if e.code == 429:
            raise OAuthError(429, "slow_down", e.message, e.headers) from None
        raise OAuthError(401, "invalid_client", e.message) from None
    return {"access_token": token, "token_type": "bearer", "issued_token_type": ACCESS_TOKEN_TYPE,
            "expires_in": max(0, expiry - int(time.time()))}
