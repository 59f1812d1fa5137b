"""The API server's request handler: which front end a request is for, and the API's dispatch.

``ApiService.handle`` is the blocking ``Request -> Response`` function the ASGI adapter (``serving/asgi.py``)
runs in its thread pool.  One server answers four things, told apart by the path alone: ``GET /metrics``
(outside ``/api/v1``: the request metrics of every server sharing the home, ``serving/metrics.py``), the Iceberg
REST catalog under ``/iceberg/`` (``iceberg/service.py``, in its own protocol's shape), the lakeFS API under
``/api/v1`` (the operations ``routes.py`` lists, through the shared router ``serving/routes.py``), and the web
UI's pages for every other path (``ui/pages.py``).  An API request is routed, its caller authenticated, its query
checked, then its operation runs as that caller.  Every failure becomes a JSON ``{"message": ...}`` with lakeFS's
status code; an unexpected exception is logged and answered 500 without details (it is a bug, and tests assert
it never happens).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from functools import cached_property
from typing import Final

from lakemount.api import csrf
from lakemount.api.auth import COOKIE, Authenticator, _cookie, signing_key
from lakemount.api.context import ApiCatalog, Ctx, error_response, parse_query
from lakemount.api.errors import ApiError, not_found, translate
from lakemount.api.routes import ROUTES
from lakemount.api.routing import Operation
from lakemount.app import App
from lakemount.audit import context as audit_context
from lakemount.audit import operations
from lakemount.audit.record import API
from lakemount.auth.crypto import read_key_file
from lakemount.errors import LakeMountError
from lakemount.iceberg.host import IcebergGate, iceberg_defaults
from lakemount.iceberg.service import IcebergService
from lakemount.serving import metrics
from lakemount.serving.http import BodyTimeout, ClientDisconnected, Request, Response
from lakemount.serving.routes import Router
from lakemount.ui import pages

log = logging.getLogger("lakemount.api")

PREFIX: Final = "/api/v1"
# Outside the lakeFS API (so not in its OpenAPI document), where lakeFS serves it too.
METRICS_PATH: Final = "/metrics"
# Data operations the audit trail records, one record per request when its status is known; the
# versioning verbs (commit, merge, branches, ...) are recorded by the catalog itself (catalog/events.py).
AUDITED: Final = operations.names(frontend=API)  # as audit/operations.py lists them
# Versioning verbs the catalog records when they succeed: this edge records them when they fail (refused by a
# policy, by protection or a hook, a missing ref, a conflict), under the name the catalog's record has.
FAILURES_AUDITED: Final = {
    "commit": "commit", "mergeIntoBranch": "merge", "revertBranch": "revert", "cherryPick": "cherry-pick",
    "resetBranch": "reset", "hardResetBranch": "reset", "createBranch": "branch-created", "deleteBranch": "branch-deleted",
    "createTag": "tag-created", "deleteTag": "tag-deleted", "setBranchProtectionRules": "protection",
    "deleteBranchProtectionRule": "protection", "mergePullRequest": "pull-request",
}


def server_key(app: App) -> str:
    """The install's server key (``auth.encrypt.secret_key``, else ``LAKEMOUNT_HOME/server.key``), as ``App.auth`` reads it."""
    return (app.config.auth.encrypt.secret_key or read_key_file(os.path.join(app.config.home, "server.key")))


class ApiService:
    """The API of one process over one ``App``."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.routes = ROUTES
        self.router = Router(ROUTES)

    @cached_property
    def catalog(self) -> ApiCatalog:
        """The catalog as the operations see it (``ApiCatalog``: what they may call)."""
        return self.app.catalog

    @cached_property
    def authenticator(self) -> Authenticator:
        return Authenticator(self.app.auth, signing_key(server_key(self.app)))

    @cached_property
    def iceberg(self) -> IcebergService:
        return IcebergService(self.app.catalog, IcebergGate(self.authenticator), iceberg_defaults(self.app.config),
                              self.app.audit)

    def handle(self, request: Request) -> Response:
        """Answer one request (never raises); ``Response.operation`` is its operationId, ``ui``, ``metrics``, the
        Iceberg route's name, or ``unknown`` for an API path no operation serves."""
        path = request.raw_path
        if path == METRICS_PATH and self.app.config.api.metrics:
            return _named(_answer(request, lambda: self._metrics(request)), "metrics")
        if IcebergService.serves(path):
            return self.iceberg.handle(request)  # answers in the Iceberg protocol's shape, never raises
        if not path.startswith(PREFIX + "/") and path != PREFIX:
            return _named(_answer(request, lambda: self._page(request)), "ui")
        try:
            op, params = self._route(request)
        except ApiError as e:
            return _named(error_response(e), "unknown")
        return _named(_answer(request, lambda: self._operate(request, op, params)), op.operation_id)

    def _route(self, request: Request) -> tuple[Operation, dict[str, str]]:
        """The operation of an API request and its path parameters; ``ApiError`` 400, 404 or 405."""
        path = request.raw_path
        try:
            op, params, other = self.router.match(request.method, path[len(PREFIX) :] or "/")
        except UnicodeDecodeError:
            raise ApiError(400, "path is not valid UTF-8") from None
        if op is None:
            if other:
                raise ApiError(405, f"method {request.method} not allowed here")
            raise not_found(f"no such API path: {path[:200]}")
        return op, params

    def _operate(self, request: Request, op: Operation, params: dict[str, str]) -> Response:
        """Admit the request (its caller, CSRF, its query), then run ``op`` as that caller and record it in the audit
        trail; a refusal before the operation runs raises (and is not recorded), the operation's own failure is its
        response."""
        ctx = Ctx(self, request, op, params, parse_query(request.raw_query))
        if op.auth:
            ctx.user = self.authenticator.authenticate(request.header("authorization"), request.header("cookie"),
                                                      request.client)
            csrf.check(request.method, request.header("authorization"), request.header("cookie"),
                       request.header(csrf.HEADER))
        ctx.check_query()
        if self.app.audit is None:
            return op(ctx)
        # The request's record, filled in by the operation (audit_context.note); it runs as its caller, so the
        # catalog's versioning records name who asked.
        pending = audit_context.Pending()
        tokens = audit_context.enter(audit_context.Actor(ctx.user or "", API, request.client), pending)
        try:
            response = op(ctx)
        except Exception as e:  # noqa: BLE001 - answered as _answer answers it, so the record has its status
            response = _error(request, e)
        finally:
            audit_context.leave(tokens)
        if op.operation_id in AUDITED:
            self._record(ctx, pending, response)
        elif op.operation_id in FAILURES_AUDITED and response.status >= 400:
            self._record(ctx, pending, response, op=FAILURES_AUDITED[op.operation_id])
        return response

    def _record(self, ctx: Ctx, pending: audit_context.Pending, response: Response, op: str = "") -> None:
        """One audit record of a data operation (refused and failed ones too), or of a failed versioning verb ``op``."""
        assert self.app.audit is not None
        op = op or ctx.op.operation_id
        path = pending.path or ctx.q("path") or ctx.q("dest_path") or ctx.q("prefix") or ""
        nbytes = pending.bytes
        if op == "getObject" and response.status < 300:
            nbytes = response.content_length()
        self.app.audit.record(repo=ctx.params.get("repository", ""), op=op,
                              ref=pending.ref or ctx.params.get("ref") or ctx.params.get("branch")
                              or ctx.params.get("destinationBranch") or ctx.params.get("tag") or "",
                              commit=pending.commit, path=path, nbytes=nbytes, status=response.status,
                              user=ctx.user or "", frontend=API, client=ctx.request.client)

    def _logged_in(self, cookie: str | None) -> bool:
        """Whether the ``Cookie`` header carries a valid session (not forged, expired, or of a deleted access key or user)."""
        if not _cookie(cookie, COOKIE):
            return False
        try:
            self.authenticator.authenticate(None, cookie)
        except ApiError:
            return False
        return True

    def _page(self, request: Request) -> Response:
        """The web UI's page or static file for a path outside ``/api/v1``."""
        try:
            return pages.serve(request, self._logged_in)
        except pages.PageError as e:
            raise ApiError(e.status, e.message, e.headers) from None

    def _metrics(self, request: Request) -> Response:
        """Prometheus text of every server sharing this home (unauthenticated, like lakeFS's; ``api.metrics``)."""
        if request.method not in ("GET", "HEAD"):
            raise ApiError(405, f"method {request.method} not allowed here", (("Allow", "GET, HEAD"),))
        text = metrics.exposition(self.app.config.home)
        if self.app.audit is not None:
            from lakemount.audit.log import render_metrics

            text += render_metrics(self.app.config.home)
        return Response(200, [("Content-Type", metrics.CONTENT_TYPE), ("Cache-Control", "no-store")], text.encode())


def _answer(request: Request, run: Callable[[], Response]) -> Response:
    """``run()``'s response, or the error response of what it raised (``_error``)."""
    try:
        return run()
    except Exception as e:  # noqa: BLE001 - every failure is answered
        return _error(request, e)


def _error(request: Request, e: Exception) -> Response:
    """The error response of an exception an operation or the API's admission raised; anything else is a bug:
    logged, answered 500 without details."""
    if isinstance(e, ApiError):
        return error_response(e)
    if isinstance(e, LakeMountError):
        return error_response(translate(e))
    if isinstance(e, ClientDisconnected):
        return error_response(ApiError(400, "client disconnected before the request body was complete"))
    if isinstance(e, BodyTimeout):
        return error_response(ApiError(408, str(e)))
    log.error("unexpected error serving %s %s", request.method, request.raw_path, exc_info=e)
    return error_response(ApiError(500, "internal error"))


def _named(response: Response, operation: str) -> Response:
    response.operation = operation
    return response
