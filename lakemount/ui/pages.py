"""Serving the UI's files: ``/`` (the app, after login), ``/login`` and ``/static/*``.

The pages are static: the script renders everything from ``/api/v1`` JSON
with DOM text nodes (never ``innerHTML`` of data), so nothing here formats
user data.  ``/`` without a valid session cookie (missing, forged, expired,
or of a deleted access key or user) is a 302 to ``/login``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import Final

from lakemount.serving.http import Request, Response

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


class PageError(Exception):
    """A request the pages do not answer with a page: an HTTP status, a one-line message, extra headers.

    The API server sends it as one of its own errors (JSON ``{"message": ...}``).
    """

    def __init__(self, status: int, message: str, headers: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers


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
        raise PageError(404, f"no such file: /static/{name[:200]}")
    ctype = TYPES.get(name[name.rfind("."):], "application/octet-stream")
    return Response(200, [("Content-Type", ctype), ("Content-Length", str(len(data))), *SECURITY_HEADERS], data)


def serve(request: Request, logged_in: Callable[[str | None], bool]) -> Response:
    """Answer a request outside ``/api/v1`` (GET/HEAD only); raises ``PageError`` 404/405.

    ``logged_in(cookie_header)`` says whether the request's cookies hold a valid session (the API server's business).
    """
    path = request.raw_path.split("?", 1)[0]
    if path not in PAGES and not path.startswith("/static/"):
        raise PageError(404, f"no such API path: {path[:200]}")
    if request.method not in ("GET", "HEAD"):
        raise PageError(405, f"method {request.method} not allowed here", (("Allow", "GET, HEAD"),))
    if path.startswith("/static/"):
        return _file(path[len("/static/"):])
    if path == "/login":
        return _file("index.html")
    if path in ("/", "/index.html"):
        if not logged_in(request.header("cookie")):
            return Response(302, [("Location", "/login"), ("Content-Length", "0")], b"")
        return _file("index.html")
    raise AssertionError(path)  # PAGES covers every other path
