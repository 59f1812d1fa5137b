"""What an operation receives (:class:`Ctx`: the request, its parameters, the caller, the catalog) and replies with.

Query parameters are checked against the operation's declared ones (type,
range); JSON bodies are read up to ``MAX_JSON_BYTES``, must be sent as
``application/json`` and are validated against the operation's schema, so
an operation only ever sees well-formed input.  :func:`repo_of` is how an
operation names the repository it acts on, the caller's permission checked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qsl

import orjson

from lakemount.api.errors import ApiError, bad_request
from lakemount.api.pagination import page_size
from lakemount.api.routing import Operation
from lakemount.api.schemas import validate
from lakemount.auth.model import UserID
from lakemount.auth.policies import Action
from lakemount.catalog.paths import printable_tree
from lakemount.serving.http import BodyTooLarge, Request, Response, read_bounded

if TYPE_CHECKING:
    from lakemount.api.auth import Permission
    from lakemount.api.handler import ApiService

MAX_JSON_BYTES: Final = 1 << 20
# The web UI shares the API's origin: bytes a user controls (an object, a hook's output, commit messages in
# the event stream) opened in the browser must not run scripts with the UI's session and CSRF cookies.
# Sandboxed, such a response is an inert document of no origin, and nosniff keeps the browser from
# reading it as HTML whatever it looks like; clients of the API ignore both headers.
UNTRUSTED_CSP: Final = "sandbox; default-src 'none'; img-src 'self' data:; media-src 'self'; style-src 'unsafe-inline'"
INERT_HEADERS: Final = (("Content-Security-Policy", UNTRUSTED_CSP), ("X-Content-Type-Options", "nosniff"))


def json_response(status: int, payload: Any, headers: tuple[tuple[str, str], ...] = ()) -> Response:
    """A JSON response (orjson), always UTF-8 text: a key stored before the catalog refused keys
    that are not UTF-8 goes out printable (``catalog.paths.printable``: ``\\xNN`` per undecodable
    byte), never as a lone ``\\udcXX`` escape that JSON parsers and the web UI choke on."""
    try:
        body = orjson.dumps(payload)
    except TypeError:  # a str with lone surrogates (surrogate-escaped bytes of a non-UTF-8 key)
        body = orjson.dumps(printable_tree(payload))
    return Response(status, [("Content-Type", "application/json"), ("X-Content-Type-Options", "nosniff"), *headers], body)


def empty(status: int = 204) -> Response:
    """A response with ``status`` and no body."""
    return Response(status, [], b"")


def error_response(err: ApiError) -> Response:
    """The JSON ``{"message": ...}`` response for ``err``, with its status and headers."""
    return json_response(err.status, {"message": err.message}, err.headers)


def parse_query(raw: str) -> dict[str, list[str]]:
    """Query parameters with every value of a repeated name (``objects=a&objects=b``)."""
    out: dict[str, list[str]] = {}
    try:
        pairs = parse_qsl(raw, keep_blank_values=True, errors="strict")
    except (UnicodeDecodeError, ValueError):
        raise bad_request("query string is not valid UTF-8") from None
    for k, v in pairs:
        out.setdefault(k, []).append(v)
    return out


@dataclass
class Ctx:
    """One request on its way through an operation."""

    service: ApiService
    request: Request
    op: Operation
    params: dict[str, str]
    query: dict[str, list[str]]
    user: UserID | None = None
    _json: Any = field(default=None)

    @property
    def catalog(self) -> Any:
        return self.service.catalog

    @property
    def auth(self) -> Any:
        return self.service.authenticator

    # --- authorization ---------------------------------------------------------------
    def require(self, action: Action | Permission, repo: str = "*") -> None:
        """Raises ``ApiError`` 403 unless the caller may do ``action`` on ``repo``."""
        assert self.user is not None
        self.service.authenticator.require(self.user, action, repo)

    def allowed(self, action: Action, repo: str = "*") -> bool:
        assert self.user is not None
        return self.service.authenticator.allowed(self.user, action, repo)

    # --- query -----------------------------------------------------------------------
    def q(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[0] if values else default

    def q_required(self, name: str) -> str:
        v = self.q(name)
        if v is None or v == "":
            raise bad_request(f"missing required query parameter {name!r}")
        return v

    def q_list(self, name: str) -> list[str]:
        """Every value of a repeated parameter (lakeFS's clients repeat the name)."""
        return [v for v in self.query.get(name, []) if v]

    def q_int(self, name: str, default: int | None = None) -> int | None:
        v = self.q(name)
        if v is None or v == "":
            return default
        try:
            n = int(v)
        except ValueError:
            raise bad_request(f"query parameter {name!r} must be an integer") from None
        if not -(1 << 63) <= n < 1 << 63:  # what the database takes (a larger one was a 500)
            raise bad_request(f"query parameter {name!r} out of range")
        return n

    def page_size(self) -> int:
        """The page size the request's ``amount`` asks for (see ``pagination.page_size``); 400 if it is no integer."""
        return page_size(self.q_int("amount"))

    def q_bool(self, name: str, default: bool = False) -> bool:
        v = self.q(name)
        if v is None or v == "":
            return default
        low = v.lower()
        if low in ("true", "1"):
            return True
        if low in ("false", "0"):
            return False
        raise bad_request(f"query parameter {name!r} must be true or false")

    def check_query(self) -> None:
        """Types and ranges of the declared query parameters; 400 on a bad one."""
        for p in self.op.params:
            if p.where != "query":
                continue
            if p.required and not self.q(p.name):
                raise bad_request(f"missing required query parameter {p.name!r}")
            if p.type == "integer":
                n = self.q_int(p.name)
                if n is not None and ((p.minimum is not None and n < p.minimum) or (p.maximum is not None and n > p.maximum)):
                    raise bad_request(f"query parameter {p.name!r} out of range")
            elif p.type == "boolean":
                self.q_bool(p.name)

    # --- body ------------------------------------------------------------------------
    def json_body(self) -> dict[str, Any]:
        """The validated JSON body (``{}`` when optional and absent); 400/413/415 on bad input."""
        if self._json is not None:
            return self._json  # type: ignore[no-any-return]
        assert self.op.body is not None and self.op.body != "raw"
        raw = self.read_body(MAX_JSON_BYTES)
        if not raw.strip():
            if self.op.body_required:
                raise bad_request("request body is required")
            self._json = {}
            return {}
        ctype = (self.request.header("content-type") or "application/json").split(";")[0].strip().lower()
        if ctype != "application/json" and not ctype.endswith("+json"):
            raise ApiError(415, f"request body must be application/json, not {ctype}")
        try:
            value = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as e:
            raise bad_request(f"malformed JSON body: {e}") from None
        except RecursionError:  # a 1 MiB body of '[[[[...' (was a 500)
            raise bad_request("malformed JSON body: nested too deeply") from None
        self._json = validate(value, self.op.body)
        return self._json  # type: ignore[no-any-return]

    def read_body(self, limit: int) -> bytes:
        """The whole body, refused with 413 past ``limit`` bytes (``serving.http.read_bounded``: at once when
        ``Content-Length`` declares more)."""
        try:
            return read_bounded(self.request, limit)
        except BodyTooLarge as e:
            raise ApiError(413, str(e)) from None


def repo_of(ctx: Ctx, action: Action | Permission) -> str:
    """The request's ``repository`` path parameter, after checking ``action`` on it (403 if denied)."""
    repo = ctx.params["repository"]
    ctx.require(action, repo)
    return repo
