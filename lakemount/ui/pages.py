"""Serving the UI's files: ``/`` (the app, after login), ``/login`` and ``/static/*``.

The pages are static: the script renders everything from ``/api/v1`` JSON
with DOM text nodes (never ``innerHTML`` of data), so nothing here formats
user data.  ``/`` without a valid session cookie (missing, forged, expired,
or of a deleted user) is a 302 to ``/login``.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any, Final

from lakemount.api.auth import COOKIE, _cookie
from lakemount.api.errors import ApiError
from lakemount.gateway.http import Request, Response

TYPES: Final = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
SECURITY_HEADERS: Final = [
    ("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
                                "object-src 'none'; frame-ancestors 'none'; base-uri 'none'"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "same-origin"),
    ("Cache-Control", "no-cache"),
]


PAGES: Final = frozenset({"/", "/index.html", "/login"})


@cache
def asset(name: str) -> bytes | None:
    """The bytes of ``static/<name>`` (package data), or None when there is no such file."""
    if "/" in name or name.startswith("."):
        return None
    f = resources.files("lakemount.ui").joinpath("static", name)
    return f.read_bytes() if f.is_file() else None


def _file(name: str) -> Response:
    data = asset(name)
    if data is None:
        raise ApiError(404, f"no such file: /static/{name[:200]}")
    ctype = TYPES.get(name[name.rfind("."):], "application/octet-stream")
    return Response(200, [("Content-Type", ctype), ("Content-Length", str(len(data))), *SECURITY_HEADERS], data)


def _logged_in(authenticator: Any, request: Request) -> bool:
    token = _cookie(request.header("cookie"), COOKIE)
    if not token:
        return False
    try:
        authenticator.authenticate(None, request.header("cookie"))
    except ApiError:
        return False
    return True


def serve(authenticator: Any, request: Request) -> Response:
    """Answer a request outside ``/api/v1`` (GET/HEAD only); raises ``ApiError`` 404/405 (JSON, as the API's)."""
    path = request.raw_path.split("?", 1)[0]
    if path not in PAGES and not path.startswith("/static/"):
        raise ApiError(404, f"no such API path: {path[:200]}")
    if request.method not in ("GET", "HEAD"):
        raise ApiError(405, f"method {request.method} not allowed here", (("Allow", "GET, HEAD"),))
    if path.startswith("/static/"):
        return _file(path[len("/static/"):])
    if path == "/login":
        return _file("index.html")
    if path in ("/", "/index.html"):
        if not _logged_in(authenticator, request):
            return Response(302, [("Location", "/login"), ("Content-Length", "0")], b"")
        return _file("index.html")
    raise AssertionError(path)  # PAGES covers every other path
