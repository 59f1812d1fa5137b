"""The Iceberg REST catalog's HTTP side: routes under ``/iceberg/api/v1`` and ``/iceberg/relative_to/<repo>.<ref>/api/v1``.

The API server hands every request under ``/iceberg/`` to
:meth:`IcebergService.handle` with a :class:`Gate` (its authenticator, adapted),
so a token, a key and a policy mean the same here as in the lakeFS API: reads
need ``ReadRepo`` and writes ``WriteRepo`` on the namespace's repository.
Every failure is answered in the protocol's shape (``errors.py``); an
unexpected exception is logged and answered 500 without details, as the API
answers it (it is a bug, and tests assert it never happens).

Every change is an audit record (front end ``iceberg``), refused and failed
ones too, with the response's status: a namespace created, dropped or given
properties (its path ``db/``), a table or a view created, registered,
renamed (a record at each name), dropped, committed or replaced (its path
``db/events/``, so ``lakemount audit lakefs://REPO/REF/db/events/`` is the
table's history), one record per table of a transaction.  A commit's
``detail`` says what changed: the table, the snapshot it added (id,
operation, data files and records added and deleted, the paths of the first
files it added), the schema (its id, and whether the commit changed it), the
update actions and the metadata file.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol
from urllib.parse import parse_qsl, unquote

import orjson

from lakemount.audit.record import ICEBERG
from lakemount.auth.policies import Action
from lakemount.catalog.model import Branch, Repository
from lakemount.errors import LakeMountError, NotFound
from lakemount.iceberg import contents, requirements, updates, views
from lakemount.iceberg.errors import IcebergError, bad_request, no_such_namespace, translate
from lakemount.iceberg.metadata import new_table, string_map, want
from lakemount.iceberg.names import Base, Namespace, TableId, check_level, path_in, split_levels, url
from lakemount.iceberg.tables import Change, Loaded, Tables, TablesCatalog
from lakemount.iceberg.tokens import OAuthError, issue
from lakemount.iceberg.views import Views
from lakemount.serving.http import BodyTimeout, BodyTooLarge, ClientDisconnected, Request, Response, read_bounded
from lakemount.serving.routes import Router, compile_template

log = logging.getLogger("lakemount.iceberg")

ROOT: Final = "/iceberg/api"
RELATIVE: Final = "/iceberg/relative_to/"
MAX_BODY: Final = 16 << 20  # a transaction of many tables with large snapshot summaries fits


class Gate(Protocol):
    """Authentication and rights, as the API server decides them (errors already in the protocol's shape)."""

    def login(self, access_key_id: str, secret: str, client: str) -> tuple[str, int]:
        """(token, expiry) for credentials sent from ``client``; raises ``IcebergError`` 401 (429 backing off)."""

    def user(self, authorization: str | None, client: str) -> str:
        """The caller of a request with this ``Authorization`` header from ``client``; raises ``IcebergError`` 401
        (429 while basic auth's failures back off)."""

    def require(self, user: str, action: Action, repo: str) -> None:
        """Raises ``IcebergError`` 403 unless ``user`` may do ``action`` on ``repo``."""

    def allowed(self, user: str, action: Action, repo: str) -> bool: ...

    def own_key(self, authorization: str | None) -> tuple[str, str]:
        """The access key (id, secret) the request authenticates with (a token's: the key it was minted from);
        raises ``IcebergError`` 401."""


class AuditSink(Protocol):
    """Where the catalog's changes are recorded (``lakemount.audit.log.AuditLog``)."""

    def record(self, *, repo: str, op: str, ref: str = "", path: str = "", status: int = 200, user: str | None = None,
               frontend: str | None = None, client: str | None = None, detail: str = "") -> None: ...


@dataclass(frozen=True, slots=True)
class Touched:
    """One namespace or table a write request changes, for its audit record: ``detail`` is filled in once done."""

    op: str
    repo: str
    ref: str
    path: str
    detail: dict[str, Any]


@dataclass
class Call:
    """One routed request: the address form, path parameters, the caller, and what it changes (``touched``)."""

    request: Request
    base: Base
    params: dict[str, str]
    user: str = ""
    _body: Any = None
    touched: list[Touched] = field(default_factory=list)

    def touches(self, op: str, what: Namespace | TableId, **detail: Any) -> dict[str, Any]:
        """Note that this request changes ``what`` (``op``, the protocol's operation); returns its detail to fill in."""
        ns = what if isinstance(what, Namespace) else what.namespace
        shown = ".".join(what.namespace.levels + (what.name,)) if isinstance(what, TableId) else ".".join(ns.levels)
        noun = "namespace" if isinstance(what, Namespace) else "view" if op.endswith("View") else "table"
        entry = Touched(op, ns.repo, ns.ref, what.path, {noun: shown, **detail})
        self.touched.append(entry)
        return entry.detail

    def json(self) -> Any:
        """The JSON body (an object); 400 if missing or malformed, 413 past ``MAX_BODY``."""
        if self._body is None:
            raw = _read(self.request)
            try:
                self._body = orjson.loads(raw) if raw.strip() else None
            except orjson.JSONDecodeError:
                raise bad_request("malformed JSON body") from None
            if not isinstance(self._body, dict):
                raise bad_request("the request body must be a JSON object")
        return self._body

    def levels(self) -> tuple[str, ...]:
        return split_levels(self.params["namespace"])

    def namespace(self) -> Namespace:
        return self.base.namespace(self.levels())

    def table(self) -> TableId:
        return self.base.table(self.levels(), self.params["table"])

    def query(self) -> dict[str, str]:
        try:
            return dict(parse_qsl(self.request.raw_query, keep_blank_values=True, errors="strict"))
        except (UnicodeDecodeError, ValueError):
            raise bad_request("query string is not valid UTF-8") from None


def _read(request: Request) -> bytes:
    """The body, up to ``MAX_BODY`` bytes by the API's rule (``read_bounded``: 413 at once for a larger declared
    length, and as soon as a chunked one passes it)."""
    try:
        return read_bounded(request, MAX_BODY)
    except BodyTooLarge as e:
        raise IcebergError(413, "BadRequestException", str(e)) from None


def _json(status: int, payload: Any, headers: tuple[tuple[str, str], ...] = ()) -> Response:
    return Response(status, [("Content-Type", "application/json"), ("X-Content-Type-Options", "nosniff"), *headers],
                    orjson.dumps(payload))


def _empty(status: int = 204) -> Response:
    return Response(status, [], b"")


Handler = Callable[["IcebergService", Call], Response]


@dataclass(frozen=True, slots=True)
class Route:
    """One served route: method, path template below the address (``/v1/...``), its matcher and handler, whether
    it needs a caller, and whether ``/v1/config`` advertises it (the spec lists neither config nor tokens).
    ``ROUTES`` at the end of this module lists every route; the router is the API's (``serving/routes.py``)."""

    method: str
    template: str
    pattern: re.Pattern[str]
    handler: Handler
    auth: bool
    advertised: bool

    @property
    def name(self) -> str:
        """The handler's name, the response's ``operation`` (``list_namespaces``)."""
        return self.handler.__name__

    def endpoint(self) -> str:
        """The spec's name of the route in ``ConfigResponse.endpoints`` (``GET /v1/{prefix}/namespaces``)."""
        return f"{self.method} /v1/{{prefix}}{self.template[len('/v1'):]}"

    def __call__(self, svc: IcebergService, call: Call) -> Response:
        return self.handler(svc, call)


def route(method: str, template: str, *, auth: bool = True, advertised: bool = True) -> Callable[[Handler], Route]:
    """Declare a handler for ``method`` and a path template below ``/v1`` (``{name}``: one segment) (decorator): its
    name in the module becomes the :class:`Route`, which ``ROUTES`` must list to serve it."""

    def declare(func: Handler) -> Route:
        return Route(method, template, compile_template(template), func, auth, advertised)

    return declare


def endpoints() -> list[str]:
    """``ConfigResponse.endpoints``: every advertised route of ``ROUTES``, in its order (what is served is what
    ``/v1/config`` advertises: one source)."""
    return [r.endpoint() for r in ROUTES if r.advertised]


class IcebergCatalog(TablesCatalog, Protocol):
    """What the service calls of the catalog: the tables store's reads and writes, and the listings of repositories
    and branches that answer the top namespaces (``Catalog`` implements it)."""

    def list_repositories(self) -> list[Repository]: ...

    def list_branches(self, repo: str, *, show_hidden: bool = True) -> list[Branch]: ...


class IcebergService:
    """The catalog's HTTP front end over one catalog and one gate."""

    def __init__(self, catalog: IcebergCatalog, gate: Gate, defaults: dict[str, str] | None = None,
                 audit: AuditSink | None = None) -> None:
        self.tables = Tables(catalog)
        self.views = Views(self.tables)
        self.catalog = catalog
        self.gate = gate
        self.defaults = dict(defaults or {})
        self.audit = audit

    @staticmethod
    def serves(path: str) -> bool:
        """Whether a raw request path is the catalog's."""
        return path.startswith("/iceberg/")

    def handle(self, request: Request) -> Response:
        """Answer one request (never raises); ``Response.operation`` names the route."""
        name = "iceberg"
        calls: list[Call] = []  # the routed request, once it is
        try:
            response, name = self._handle(request, calls)
        except IcebergError as e:
            response = _json(e.code, e.body(), e.headers)
        except OAuthError as e:
            response = _json(e.status, e.body(), e.headers)
        except LakeMountError as e:
            err = translate(e)
            response = _json(err.code, err.body())
        except ClientDisconnected:
            response = _json(400, bad_request("client disconnected before the request body was complete").body())
        except BodyTimeout as e:
            response = _json(408, IcebergError(408, "BadRequestException", str(e)).body())
        except Exception:  # noqa: BLE001 - a bug: logged, answered without details
            log.exception("unexpected error serving %s %s", request.method, request.raw_path)
            response = _json(500, IcebergError(500, "InternalServerError", "internal error").body())
        if request.method == "HEAD":
            response = _empty(response.status if response.status != 200 else 204)
        response.operation = name
        if calls and self.audit is not None:
            self._record(calls[0], response.status)
        return response

    def _record(self, call: Call, status: int) -> None:
        """One audit record per namespace or table ``call`` changed (or tried to), with the response's status."""
        assert self.audit is not None
        for t in call.touched:
            self.audit.record(repo=t.repo, op=t.op, ref=t.ref, path=t.path, status=status, user=call.user,
                              frontend=ICEBERG, client=call.request.client,
                              detail=orjson.dumps(t.detail, default=str).decode())

    def _split(self, path: str) -> tuple[Base, str]:
        """(address form, the path below it) of a raw path; 404 for a path of no form."""
        if path.startswith(ROOT + "/"):
            return Base(), path[len(ROOT):]
        if path.startswith(RELATIVE):
            where, sep, rest = path[len(RELATIVE):].partition("/api/")
            repo, dot, ref = unquote(where, errors="strict").partition(".")
            if sep and dot:
                check_level(repo, "repository")
                check_level(ref, "ref")
                return Base((repo, ref)), "/" + rest
        raise IcebergError(404, "NoSuchEndpointException", f"no such catalog path: {path[:200]}")

    def _handle(self, request: Request, calls: list[Call]) -> tuple[Response, str]:
        try:
            base, rest = self._split(request.raw_path)
        except UnicodeDecodeError:
            raise bad_request("path is not valid UTF-8") from None
        try:
            r, params, other = ROUTER.match(request.method, rest)
        except UnicodeDecodeError:
            raise bad_request("path is not valid UTF-8") from None
        if r is None:
            if other:
                raise IcebergError(405, "MethodNotAllowedException", f"method {request.method} not allowed here")
            raise IcebergError(404, "NoSuchEndpointException", f"no such catalog path: {request.raw_path[:200]}")
        call = Call(request, base, params)
        if r.auth:
            call.user = self.gate.user(request.header("authorization"), request.client)
            calls.append(call)
        return r(self, call), r.name

    # ------------------------------------------------------------------ helpers
    def read(self, call: Call, repo: str) -> None:
        self.gate.require(call.user, Action.READ_REPO, repo)

    def write(self, call: Call, repo: str) -> None:
        self.gate.require(call.user, Action.WRITE_REPO, repo)

    def client_config(self, call: Call) -> dict[str, str]:
        """What a client needs to read and write data through the S3 gateway: path-style access, region, the
        gateway's address (when fixed) and the caller's own access key, which the gateway's policies judge."""
        key_id, secret = self.gate.own_key(call.request.header("authorization"))
        return {**self.defaults, "s3.access-key-id": key_id, "s3.secret-access-key": secret}

    def loaded_json(self, call: Call, table: TableId) -> dict[str, Any]:
        return self.tables.load(table).result(config=self.client_config(call))


# ---------------------------------------------------------------------- config and tokens
@route("GET", "/v1/config", advertised=False)
def get_config(svc: IcebergService, call: Call) -> Response:
    """getConfig: client defaults (S3 through the gateway with the caller's key) and the endpoints served."""
    return _json(200, {"defaults": svc.client_config(call), "overrides": {}, "endpoints": endpoints()})


@route("POST", "/v1/oauth/tokens", auth=False, advertised=False)
def get_token(svc: IcebergService, call: Call) -> Response:
    """getToken: client credentials (access key id and secret) for a bearer token."""
    return _json(200, issue(_read(call.request), call.request.header("authorization"), svc.gate, call.request.client))


# ---------------------------------------------------------------------- namespaces
@route("GET", "/v1/namespaces")
def list_namespaces(svc: IcebergService, call: Call) -> Response:
    """listNamespaces: repositories, their branches, or the namespaces below ``parent``."""
    parent = call.base.full(split_levels(call.query().get("parent", "")))
    for level in parent:
        check_level(level)
    names: list[tuple[str, ...]]
    if not parent:
        names = [(r.name,) for r in svc.catalog.list_repositories() if svc.gate.allowed(call.user, Action.READ_REPO, r.name)]
    elif len(parent) == 1:
        svc.read(call, parent[0])
        try:
            names = [(parent[0], b.name) for b in svc.catalog.list_branches(parent[0])]
        except NotFound:
            raise no_such_namespace(parent[0]) from None
    else:
        svc.read(call, parent[0])
        names = [(parent[0], parent[1], *n) for n in svc.tables.child_namespaces(parent[0], parent[1], parent[2:])]
    return _json(200, {"namespaces": [call.base.shown(n) for n in names]})


@route("POST", "/v1/namespaces")
def create_namespace(svc: IcebergService, call: Call) -> Response:
    """createNamespace: a namespace below a branch (its parent must exist)."""
    body = call.json()
    levels = want(body, "namespace", list, "create namespace request")
    if not all(isinstance(x, str) for x in levels):
        raise bad_request("namespace levels must be strings")
    ns = call.base.namespace(tuple(levels))
    props = string_map(body.get("properties"), "properties")
    call.touches("createNamespace", ns)
    svc.write(call, ns.repo)
    svc.tables.create_namespace(ns, props)
    return _json(200, {"namespace": call.base.shown(ns.full), "properties": props})


def _namespace_or_ref(svc: IcebergService, call: Call) -> tuple[tuple[str, ...], dict[str, str]]:
    """(full levels, properties) of the namespace of a path; a repository or ref alone is a namespace without properties."""
    full = call.base.full(call.levels())
    for level in full:
        check_level(level)
    if not full:
        raise bad_request("empty namespace")
    svc.read(call, full[0])
    if len(full) >= 3:
        ns = Namespace(full[0], full[1], full[2:])
        return full, svc.tables.namespace_properties(ns)
    try:
        if len(full) == 1:
            svc.catalog.repository(full[0])
        else:
            svc.catalog.resolve(full[0], full[1])
    except NotFound:
        raise no_such_namespace(".".join(full)) from None
    return full, {}


@route("GET", "/v1/namespaces/{namespace}")
def load_namespace(svc: IcebergService, call: Call) -> Response:
    """loadNamespaceMetadata: a namespace's properties."""
    full, props = _namespace_or_ref(svc, call)
    return _json(200, {"namespace": call.base.shown(full), "properties": props})


@route("HEAD", "/v1/namespaces/{namespace}")
def namespace_exists(svc: IcebergService, call: Call) -> Response:
    """namespaceExists: 204 if it exists, else 404."""
    _namespace_or_ref(svc, call)
    return _empty()


@route("DELETE", "/v1/namespaces/{namespace}")
def drop_namespace(svc: IcebergService, call: Call) -> Response:
    """dropNamespace: an empty namespace (409 ``NamespaceNotEmptyException`` otherwise)."""
    ns = call.namespace()
    call.touches("dropNamespace", ns)
    svc.write(call, ns.repo)
    svc.tables.drop_namespace(ns)
    return _empty()


@route("POST", "/v1/namespaces/{namespace}/properties")
def update_properties(svc: IcebergService, call: Call) -> Response:
    """updateProperties: set and remove a namespace's properties."""
    ns = call.namespace()
    body = call.json()
    removals = body.get("removals") or []
    if not isinstance(removals, list) or not all(isinstance(x, str) for x in removals):
        raise bad_request("'removals' must be a list of strings")
    changes = string_map(body.get("updates"), "updates")
    call.touches("updateProperties", ns, updated=sorted(changes), removed=sorted(removals))
    svc.write(call, ns.repo)
    return _json(200, svc.tables.update_namespace(ns, removals, changes))


# ---------------------------------------------------------------------- tables
def _identifier(base: Base, table: TableId) -> dict[str, Any]:
    return {"namespace": base.shown(table.namespace.full), "name": table.name}


@route("GET", "/v1/namespaces/{namespace}/tables")
def list_tables(svc: IcebergService, call: Call) -> Response:
    """listTables: the tables of a namespace, in name order."""
    ns = call.namespace()
    svc.read(call, ns.repo)
    names = svc.tables.table_names(ns)
    return _json(200, {"identifiers": [_identifier(call.base, TableId(ns, n)) for n in names]})


@route("POST", "/v1/namespaces/{namespace}/tables")
def create_table(svc: IcebergService, call: Call) -> Response:
    """createTable: a table's first metadata (``stage-create``: the metadata, nothing written)."""
    ns = call.namespace()
    body = call.json()
    table = TableId(ns, check_level(body.get("name"), "table name"))
    if not body.get("stage-create"):  # a staged creation writes nothing; its commit is the record
        detail = call.touches("createTable", table)
    svc.write(call, ns.repo)
    if body.get("location") not in (None, ""):
        want(body, "location", str, "create table request")
    if body.get("stage-create"):
        if svc.tables.exists(table):
            raise IcebergError(409, "AlreadyExistsException", f"Table already exists: {table.shown()}")
        location = url(ns.repo, ns.ref, table.path.rstrip("/"))
        return _json(200, {"metadata": new_table(body, location), "config": svc.client_config(call)})
    done = svc.tables.commit([Change(table, [], [])], create=body)
    detail.update(committed(svc, done[0], []))
    return _json(200, done[0].result(config=svc.client_config(call)))


@route("GET", "/v1/namespaces/{namespace}/tables/{table}")
def load_table(svc: IcebergService, call: Call) -> Response:
    """loadTable: a table's metadata at the namespace's ref (a tag or commit: read-only time travel)."""
    table = call.table()
    svc.read(call, table.namespace.repo)
    return _json(200, svc.loaded_json(call, table))


@route("HEAD", "/v1/namespaces/{namespace}/tables/{table}")
def table_exists(svc: IcebergService, call: Call) -> Response:
    """tableExists: 204 if it exists, else 404."""
    table = call.table()
    svc.read(call, table.namespace.repo)
    svc.tables.load(table)
    return _empty()


def committed(svc: IcebergService, done: Loaded, updates_made: list[dict[str, Any]]) -> dict[str, Any]:
    """What a table commit changed, for its audit record: the snapshot it added (id, operation, data files and
    records added and deleted, from the snapshot's summary; ``added_files``, the paths of the first
    ``contents.ADDED_SHOWN`` files it added, from its own manifests), the schema (its id; ``schema_changed`` when
    an update added or chose one), the update actions, and the metadata file written.

    The commit is done when this runs: manifests that cannot be read are ``added_files_error``, never a failed
    response (a client told a commit failed would retry one that held)."""
    meta = done.metadata
    actions = [str(u.get("action")) for u in updates_made]
    out: dict[str, Any] = {"actions": actions, "metadata": done.metadata_path,
                           "schema_id": meta.get("current-schema-id"),
                           "schema_changed": bool({"add-schema", "set-current-schema"} & set(actions))}
    added = [u["snapshot"] for u in updates_made if u.get("action") == "add-snapshot" and isinstance(u.get("snapshot"), dict)]
    snapshot = added[-1] if added else None
    out["snapshot_id"] = snapshot.get("snapshot-id") if snapshot else meta.get("current-snapshot-id")
    if snapshot is not None:
        summary = snapshot.get("summary") or {}
        out["operation"] = summary.get("operation")
        for key in ("added-data-files", "deleted-data-files", "added-records", "deleted-records"):
            if key in summary:
                out[key.replace("-", "_")] = int(summary[key]) if str(summary[key]).isdigit() else summary[key]
        ns = done.table.namespace
        if svc.audit is None:  # the trail is off: no manifest read for a record nobody keeps
            return out
        try:
            out["added_files"] = contents.added_files(svc.catalog, ns.repo, ns.ref, snapshot)
        except (contents.ContentsError, LakeMountError) as e:
            out["added_files_error"] = str(e)[:300]
        except Exception as e:  # noqa: BLE001 - a bug, logged; the commit it describes holds
            log.exception("reading the files snapshot %s of %s added", out["snapshot_id"], done.table.shown())
            out["added_files_error"] = f"internal error: {type(e).__name__}"
    return out


def _change(call: Call, table: TableId, body: Any) -> Change:
    return Change(table, requirements.parse(want(body, "requirements", list, "commit request")),
                  updates.parse(want(body, "updates", list, "commit request")))


@route("POST", "/v1/namespaces/{namespace}/tables/{table}")
def update_table(svc: IcebergService, call: Call) -> Response:
    """updateTable: commit requirements and updates to one table (409 ``CommitFailedException`` if one fails)."""
    table = call.table()
    body = call.json()
    if body.get("identifier") is not None and call.base.identifier(body["identifier"]) != table:
        raise bad_request("the body's identifier is not the table of the path")
    change = _change(call, table, body)
    detail = call.touches("updateTable", table)
    svc.write(call, table.namespace.repo)
    done = svc.tables.commit([change])[0]
    detail.update(committed(svc, done, change.updates))
    result = done.result()
    return _json(200, {"metadata-location": result["metadata-location"], "metadata": result["metadata"]})


@route("DELETE", "/v1/namespaces/{namespace}/tables/{table}")
def drop_table(svc: IcebergService, call: Call) -> Response:
    """dropTable: remove a table's pointer (``purgeRequested``: its objects too)."""
    table = call.table()
    purge = call.query().get("purgeRequested", "false").lower() == "true"
    call.touches("dropTable", table, purge=purge)
    svc.write(call, table.namespace.repo)
    svc.tables.drop(table, purge=purge)
    return _empty()


@route("POST", "/v1/namespaces/{namespace}/register")
def register_table(svc: IcebergService, call: Call) -> Response:
    """registerTable: a table from a metadata file already in the branch."""
    ns = call.namespace()
    body = call.json()
    table = TableId(ns, check_level(body.get("name"), "table name"))
    location = want(body, "metadata-location", str, "register table request")
    overwrite = want(body, "overwrite", bool, "register table request", optional=True) or False
    detail = call.touches("registerTable", table, overwrite=overwrite)
    svc.write(call, ns.repo)
    done = svc.tables.register(table, path_in(ns.repo, location), overwrite=overwrite)
    detail.update(committed(svc, done, []))
    return _json(200, done.result(config=svc.client_config(call)))


@route("POST", "/v1/namespaces/{namespace}/tables/{table}/metrics")
def report_metrics(svc: IcebergService, call: Call) -> Response:
    """reportMetrics: accepted and not kept (clients send scan and commit reports)."""
    table = call.table()
    svc.read(call, table.namespace.repo)
    call.json()
    return _empty()


@route("POST", "/v1/tables/rename")
def rename_table(svc: IcebergService, call: Call) -> Response:
    """renameTable: within one repository and ref."""
    body = call.json()
    source = call.base.identifier(body.get("source"))
    dest = call.base.identifier(body.get("destination"))
    call.touches("renameTable", source, to=".".join((*dest.namespace.levels, dest.name)))
    call.touches("renameTable", dest, **{"from": ".".join((*source.namespace.levels, source.name))})
    svc.write(call, source.namespace.repo)
    svc.tables.rename(source, dest)
    return _empty()


# ---------------------------------------------------------------------- views
def _view(call: Call) -> TableId:
    return call.base.table(call.levels(), call.params["view"])


@route("GET", "/v1/namespaces/{namespace}/views")
def list_views(svc: IcebergService, call: Call) -> Response:
    """listViews: the views of a namespace, in name order."""
    ns = call.namespace()
    svc.read(call, ns.repo)
    return _json(200, {"identifiers": [_identifier(call.base, TableId(ns, n)) for n in svc.views.names(ns)]})


@route("POST", "/v1/namespaces/{namespace}/views")
def create_view(svc: IcebergService, call: Call) -> Response:
    """createView: a view's first metadata (409 if a view or a table has the name)."""
    ns = call.namespace()
    body = call.json()
    view = TableId(ns, check_level(body.get("name"), "view name"))
    detail = call.touches("createView", view)
    svc.write(call, ns.repo)
    path, meta = svc.views.create(view, body)
    detail.update(metadata=path)
    return _json(200, svc.views.result(view, path, meta, svc.client_config(call)))


@route("GET", "/v1/namespaces/{namespace}/views/{view}")
def load_view(svc: IcebergService, call: Call) -> Response:
    """loadView: a view's metadata at the namespace's ref (a tag or commit: as it was)."""
    view = _view(call)
    svc.read(call, view.namespace.repo)
    path, meta = svc.views.load(view)
    return _json(200, svc.views.result(view, path, meta, svc.client_config(call)))


@route("HEAD", "/v1/namespaces/{namespace}/views/{view}")
def view_exists(svc: IcebergService, call: Call) -> Response:
    """viewExists: 204 if it exists, else 404."""
    view = _view(call)
    svc.read(call, view.namespace.repo)
    svc.views.load(view)
    return _empty()


@route("POST", "/v1/namespaces/{namespace}/views/{view}")
def replace_view(svc: IcebergService, call: Call) -> Response:
    """replaceView: commit ``assert-view-uuid`` requirements and view updates (a new version, properties)."""
    view = _view(call)
    body = call.json()
    if body.get("identifier") is not None and call.base.identifier(body["identifier"]) != view:
        raise bad_request("the body's identifier is not the view of the path")
    reqs, ups = views.parse(body)
    detail = call.touches("replaceView", view)
    svc.write(call, view.namespace.repo)
    path, meta = svc.views.commit(view, reqs, ups)
    detail.update(metadata=path, actions=[u["action"] for u in ups])
    return _json(200, svc.views.result(view, path, meta, svc.client_config(call)))


@route("DELETE", "/v1/namespaces/{namespace}/views/{view}")
def drop_view(svc: IcebergService, call: Call) -> Response:
    """dropView: remove a view's pointer."""
    view = _view(call)
    call.touches("dropView", view)
    svc.write(call, view.namespace.repo)
    svc.views.drop(view)
    return _empty()


@route("POST", "/v1/views/rename")
def rename_view(svc: IcebergService, call: Call) -> Response:
    """renameView: within one repository and ref."""
    body = call.json()
    source = call.base.identifier(body.get("source"))
    dest = call.base.identifier(body.get("destination"))
    call.touches("renameView", source, to=".".join((*dest.namespace.levels, dest.name)))
    call.touches("renameView", dest, **{"from": ".".join((*source.namespace.levels, source.name))})
    svc.write(call, source.namespace.repo)
    svc.views.rename(source, dest)
    return _empty()


@route("POST", "/v1/namespaces/{namespace}/register-view")
def register_view(svc: IcebergService, call: Call) -> Response:
    """registerView: a view from a view metadata file already in the branch."""
    ns = call.namespace()
    body = call.json()
    view = TableId(ns, check_level(body.get("name"), "view name"))
    location = want(body, "metadata-location", str, "register view request")
    call.touches("registerView", view)
    svc.write(call, ns.repo)
    path, meta = svc.views.register(view, path_in(ns.repo, location))
    return _json(200, svc.views.result(view, path, meta, svc.client_config(call)))


@route("POST", "/v1/transactions/commit")
def commit_transaction(svc: IcebergService, call: Call) -> Response:
    """commitTransaction: several tables of one branch in one staging change (all or none)."""
    body = call.json()
    changes_json = want(body, "table-changes", list, "commit transaction request")
    if not changes_json:
        raise bad_request("'table-changes' is empty")
    changes = []
    for c in changes_json:
        if not isinstance(c, dict) or c.get("identifier") is None:
            raise bad_request("every table change of a transaction needs its 'identifier'")
        changes.append(_change(call, call.base.identifier(c["identifier"]), c))
    details = [call.touches("commitTransaction", c.table) for c in changes]
    svc.write(call, changes[0].table.namespace.repo)
    for change, done, detail in zip(changes, svc.tables.commit(changes), details, strict=True):
        detail.update(committed(svc, done, change.updates))
    return _empty()


# ---------------------------------------------------------------------- the route table
ROUTES: Final[tuple[Route, ...]] = (
    get_config,
    get_token,
    list_namespaces,
    create_namespace,
    load_namespace,
    namespace_exists,
    drop_namespace,
    update_properties,
    list_tables,
    create_table,
    load_table,
    table_exists,
    update_table,
    drop_table,
    register_table,
    report_metrics,
    rename_table,
    list_views,
    create_view,
    load_view,
    view_exists,
    replace_view,
    drop_view,
    rename_view,
    register_view,
    commit_transaction,
)
ROUTER: Final = Router(ROUTES)
