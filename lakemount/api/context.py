"""What an operation receives (:class:`Ctx`: the request, its parameters, the caller, the catalog) and replies with.

Query parameters are checked against the operation's declared ones (type,
range); JSON bodies are read up to ``MAX_JSON_BYTES``, must be sent as
``application/json`` and are validated against the operation's schema, so
an operation only ever sees well-formed input.  :func:`repo_of` is how an
operation names the repository it acts on, the caller's permission checked.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO, Final, Protocol
from urllib.parse import parse_qsl

import orjson

from lakemount.api.errors import ApiError, bad_request
from lakemount.api.pagination import page_size
from lakemount.api.routing import Operation
from lakemount.api.schemas import validate
from lakemount.auth.model import UserID
from lakemount.auth.policies import Action
from lakemount.catalog.paths import printable_tree
from lakemount.iceberg.tables import TablesCatalog
from lakemount.serving.http import BodyTooLarge, Request, Response, read_bounded

if TYPE_CHECKING:
    from lakemount.actions.runner import Actions
    from lakemount.api.auth import Authenticator, Permission
    from lakemount.app import App
    from lakemount.audit.record import AuditRecord
    from lakemount.audit.table import Filter as AuditFilter
    from lakemount.catalog.blame import Blamed
    from lakemount.catalog.catalog import Listed
    from lakemount.catalog.confinement import ImportSource
    from lakemount.catalog.events import Feed
    from lakemount.catalog.gcrules import GcRules
    from lakemount.catalog.history import CommitResult, MergeResult
    from lakemount.catalog.model import Branch, Commit, Difference, Entry, Repository, ResolvedRef, Tag
    from lakemount.catalog.protection import BranchProtection
    from lakemount.catalog.pulls import Pulls
    from lakemount.catalog.uploads import Linked, StagingLocation
    from lakemount.catalog.writer import DataWriter

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


class ApiCatalog(TablesCatalog, Protocol):
    """What the API's operations call of the catalog (``Ctx.catalog``), and all they may call: ``Catalog`` implements
    it, and the type checker holds every operation's calls to these signatures.  A verb the API starts to use is
    added here first."""

    @property
    def actions(self) -> Actions: ...

    def add_samples(self, repo: str, *, committer: str = "lakemount") -> Commit: ...

    def apply(self, repo: str, ref: str | ResolvedRef, changes: Sequence[tuple[str, Entry | None]]) -> None: ...

    def audit_records(self, repo: str, where: AuditFilter, *, newest_first: bool = False, after: str = "") -> Iterator[AuditRecord]: ...

    def blame(self, repo: str, ref: str, paths: Sequence[str], *, depth: int) -> list[Blamed]: ...

    def can_presign(self, repo: Repository) -> bool: ...

    def cherry_pick(
        self,
        repo: str,
        branch: str,
        ref: str,
        *,
        parent_number: int | None = None,
        committer: str = "lakemount",
        allow_empty: bool = False,
    ) -> Commit: ...

    def commit(
        self,
        repo: str,
        branch: str,
        message: str,
        *,
        committer: str = "lakemount",
        metadata: Sequence[tuple[str, str]] = (),
        allow_empty: bool = False,
        date: float | None = None,
    ) -> CommitResult: ...

    def commit_of(self, repo: str, ref: str) -> Commit: ...

    def create_branch(self, repo: str, name: str, source: str, *, hidden: bool = False) -> Branch: ...

    def create_repository(self, name: str, storage_namespace: str | None = None, default_branch: str = "main") -> Repository: ...

    def create_tag(self, repo: str, name: str, target: str) -> Tag: ...

    def delete(self, repo: str, ref: str | ResolvedRef, path: str) -> None: ...

    def delete_branch(self, repo: str, name: str) -> int: ...

    def delete_gc_rules(self, repo: str) -> None: ...

    def delete_repository(self, name: str) -> None: ...

    def delete_tag(self, repo: str, name: str) -> None: ...

    def diff(self, repo: str, left: str, right: str, *, prefix: str = "") -> Iterator[Difference]: ...

    def diff_uncommitted(self, repo: str, branch: str, *, prefix: str = "") -> Iterator[Difference]: ...

    @property
    def feed(self) -> Feed: ...

    def gc_rules(self, repo: str) -> GcRules | None: ...

    def get_branch(self, repo: str, name: str) -> Branch: ...

    def get_commit(self, repo: str, commit_id: str) -> Commit: ...

    def get_optional(self, repo: str, ref: str | ResolvedRef, path: str) -> Entry | None: ...

    def hard_reset(self, repo: str, branch: str, ref: str, *, committer: str = "lakemount") -> Commit: ...

    def import_source(self, text: str, *, single: bool = False) -> ImportSource: ...

    def issue_link_address(self, repo: str, branch: str, path: str, *, presigned: bool, now: float | None = None) -> StagingLocation: ...

    def list_branches(self, repo: str, *, show_hidden: bool = True) -> list[Branch]: ...

    def list_repositories(self) -> list[Repository]: ...

    def list_tags(self, repo: str) -> list[Tag]: ...

    def log(
        self,
        repo: str,
        ref: str,
        *,
        limit: int | None = None,
        since: float | None = None,
        first_parent: bool = False,
        paths: Sequence[str] = (),
        prefixes: Sequence[str] = (),
        matching: str = "",
    ) -> Iterator[Commit]: ...

    def lookup(self, repo: str | Repository, ref: str, path: str) -> tuple[ResolvedRef, Entry | None]: ...

    def merge(
        self,
        repo: str,
        source: str,
        dest: str,
        *,
        strategy: str | None = None,
        squash: bool = False,
        message: str | None = None,
        committer: str = "lakemount",
        metadata: Sequence[tuple[str, str]] = (),
        guard: Callable[[], None] | None = None,
        allow_empty: bool = False,
    ) -> MergeResult: ...

    def merge_base(self, repo: str, a: str, b: str) -> str | None: ...

    def open(self, repo: Repository, entry: Entry) -> BinaryIO: ...

    def physical_url(self, repo: Repository, address: str) -> str: ...

    def presign_read(self, repo: Repository, entry: Entry) -> tuple[str, float]: ...

    @property
    def pulls(self) -> Pulls: ...

    def put_entry(self, repo: str, ref: str | ResolvedRef, path: str, entry: Entry) -> None: ...

    def repository(self, name: str) -> Repository: ...

    def reset(self, repo: str, branch: str, *, prefix: str | None = None, path: str | None = None) -> None: ...

    def resolve(self, repo: str | Repository, ref: str | ResolvedRef) -> ResolvedRef: ...

    def revert(
        self,
        repo: str,
        branch: str,
        ref: str,
        *,
        parent_number: int | None = None,
        committer: str = "lakemount",
        allow_empty: bool = False,
    ) -> Commit: ...

    def set_gc_rules(self, repo: str, rules: GcRules) -> None: ...

    def stage_upload(
        self,
        repo: str,
        ref: str | ResolvedRef,
        path: str,
        entry: Entry,
        *,
        if_absent: bool = False,
        timed: bool = False,
        ready: Callable[[], None] | None = None,
    ) -> Entry: ...

    def stat(self, repo: str, ref: str | ResolvedRef, path: str) -> Entry: ...

    def swap_protection_rules(self, repo: str, rules: dict[str, int], check: Callable[[list[str], dict[str, int]], None]) -> None: ...

    def verify_link(
        self,
        repo: str,
        branch: str,
        path: str,
        signed_address: str,
        *,
        size: int,
        checksum: str,
        now: float | None = None,
    ) -> Linked: ...

    def writable_branch(self, repo: str, ref: str | ResolvedRef) -> str: ...

    def writer(
        self,
        repo: str | Repository,
        *,
        expected: int | None = None,
        address: str | None = None,
        hash_md5: bool = True,
        hash_sha256: bool = True,
        defer: bool = False,
        lazy: bool = False,
    ) -> DataWriter: ...

    @property
    def namespace_root(self) -> str: ...

    @property
    def protection(self) -> BranchProtection: ...

    def read_chunks(self, repo: Repository, entry: Entry, start: int, length: int) -> Iterator[bytes]: ...

    def is_imported(self, entry: Entry) -> bool: ...

    # Last: in the class's body, ``list`` below names this method, not the builtin.
    def list(
        self,
        repo: str,
        ref: str | ResolvedRef,
        prefix: str = "",
        *,
        delimiter: str = "",
        after: str = "",
        limit: int | None = None,
    ) -> Iterator[Listed]: ...


class Service(Protocol):
    """What an operation reaches of the service it runs in (``handler.ApiService``): the ``App`` (its configuration,
    users, audit log), the catalog, the authenticator.  Declared here so this module need not import the handler,
    which imports the route table and so every operation's module."""

    @property
    def app(self) -> App: ...

    @property
    def catalog(self) -> ApiCatalog: ...

    @property
    def authenticator(self) -> Authenticator: ...

    @property
    def routes(self) -> tuple[Operation, ...]: ...


@dataclass
class Ctx:
    """One request on its way through an operation."""

    service: Service
    request: Request
    op: Operation
    params: dict[str, str]
    query: dict[str, list[str]]
    user: UserID | None = None
    _json: Any = field(default=None)

    @property
    def catalog(self) -> ApiCatalog:
        return self.service.catalog

    @property
    def auth(self) -> Authenticator:
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
