"""CSRF protection for cookie-authenticated API calls (double-submit token).

Login sets, beside the HttpOnly session cookie, a ``lakemount_csrf`` cookie
the page's script can read; every state-changing request (not GET, HEAD or
OPTIONS) that authenticates with the session cookie must repeat that value
in the ``X-Lakemount-CSRF`` header.  Another site can make a browser send
the cookies, but it can neither read the token nor set a custom header
without a CORS preflight this server never grants.  Requests with an
``Authorization`` header (basic auth from the SDKs and the CLI, bearer
tokens) carry no ambient credentials and are not checked.
"""

from __future__ import annotations

import hmac
import secrets
from typing import Final

from lakemount.api.auth import COOKIE, TOKEN_SECONDS, _cookie
from lakemount.api.errors import ApiError

CSRF_COOKIE: Final = "lakemount_csrf"
HEADER: Final = "x-lakemount-csrf"
SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})


def new_cookie() -> str:
    """A ``Set-Cookie`` value with a fresh random CSRF token (readable by the page's script)."""
    return f"{CSRF_COOKIE}={secrets.token_urlsafe(24)}; Path=/; Max-Age={TOKEN_SECONDS}; SameSite=Strict"


def clear_cookie() -> str:
    """A ``Set-Cookie`` value that removes the CSRF cookie (logout)."""
    return f"{CSRF_COOKIE}=; Path=/; Max-Age=0; SameSite=Strict"


def check(method: str, authorization: str | None, cookie: str | None, header: str | None) -> None:
    """Raise ``ApiError`` 403 for a cookie-authenticated state change without a matching CSRF header.

    Safe methods, requests with an ``Authorization`` header and requests
    without a session cookie (they fail authentication anyway) pass.
    """
    if method.upper() in SAFE_METHODS or authorization or not _cookie(cookie, COOKIE):
        return
    expected = _cookie(cookie, CSRF_COOKIE)
    if not expected or not header or not hmac.compare_digest(expected.encode(), header.strip().encode()):
        raise ApiError(403, "CSRF check failed: a cookie-authenticated change needs the X-Lakemount-CSRF header "
                            "equal to the lakemount_csrf cookie")
