"""The API's request handler: route, authenticate, run the operation, translate errors.

``ApiService.handle`` is the blocking ``Request -> Response`` function the
ASGI adapter (``serving/asgi.py``) runs in its thread pool.  Every failure becomes a
JSON ``{"message": ...}`` with lakeFS's status code; an unexpected exception
is logged and answered 500 without details (it is a bug, and tests assert
it never happens).  ``GET /metrics`` (outside ``/api/v1``) answers the request
metrics of every server sharing the home (``serving/metrics.py``).
"""

from __future__ import annotations

import logging
import os
from functools import cached_property
from typing import Final

from lakemount.api import (  # noqa: F401 - importing a resource module registers its operations
    audit,
    blame,
    branches,
    commits,
    csrf,
    events,
    iceberg_tables,
    imports,
    object_diff,
    objects,
    preview,
    pulls,
    refs,
    repositories,
    rules,
    setup,
    staging,
    tags,
    users,
)
from lakemount.api.auth import COOKIE, Authenticator, _cookie, signing_key
from lakemount.api.context import ApiCatalog, Ctx, error_response, parse_query
from lakemount.api.errors import ApiError, not_found, translate
from lakemount.api.routing import OPERATIONS, Router
from lakemount.app import App
from lakemount.audit import context as audit_context
from lakemount.audit import operations
from lakemount.audit.record import API
from lakemount.auth.crypto import read_key_file
from lakemount.auth.policies import Action
from lakemount.errors import LakeMountError
from lakemount.iceberg.errors import IcebergError
from lakemount.iceberg.service import IcebergService
from lakemount.serving import metrics
from lakemount.serving.http import BodyTimeout, ClientDisconnected, Request, Response
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


class IcebergGate:
    """The authenticator as the Iceberg catalog asks it: the same keys, tokens and policies, errors in its shape."""

    TYPES: Final = {401: "NotAuthorizedException", 403: "ForbiddenException", 429: "TooManyRequestsException"}

    def __init__(self, authenticator: Authenticator) -> None:
        self.auth = authenticator

    def _shaped(self, e: ApiError) -> IcebergError:
        return IcebergError(e.status, self.TYPES.get(e.status, "BadRequestException"), e.message, e.headers)

    def login(self, access_key_id: str, secret: str, client: str) -> tuple[str, int]:
        try:
            return self.auth.login(access_key_id, secret, client)
        except ApiError as e:
            raise self._shaped(e) from None

    def user(self, authorization: str | None, client: str) -> str:
        if not authorization:
            raise IcebergError(401, "NotAuthorizedException",
                               "missing credentials: a bearer token from oauth/tokens, or basic auth with an access key")
        try:
            return self.auth.authenticate(authorization, None, client)
        except ApiError as e:
            raise self._shaped(e) from None

    def require(self, user: str, action: Action, repo: str) -> None:
        try:
            self.auth.require(user, action, repo)
        except ApiError as e:
            raise self._shaped(e) from None

    def allowed(self, user: str, action: Action, repo: str) -> bool:
        return self.auth.allowed(user, action, repo)

    def own_key(self, authorization: str | None) -> tuple[str, str]:
        try:
            return self.auth.own_key(authorization)
        except ApiError as e:
            raise self._shaped(e) from None


def iceberg_defaults(app: App) -> dict[str, str]:
    """What the catalog's ``config`` tells every client: path-style S3 through the gateway (its address when it is
    fixed: ``lakemount serve`` sets the one it bound), in its region; the caller's own key is added per request."""
    gw = app.config.gateways.s3
    out = {"s3.path-style-access": "true", "s3.region": gw.region, "client.region": gw.region}
    host, _, port = gw.listen_address.rpartition(":")
    host = host.strip("[]")
    if port.isdigit() and int(port) and host not in ("", "0.0.0.0", "::"):
        scheme = "https" if gw.tls.cert_file else "http"
        out["s3.endpoint"] = f"{scheme}://{'[' + host + ']' if ':' in host else host}:{port}"
    return out


class ApiService:
    """The API of one process over one ``App``."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.router = Router(OPERATIONS)

    @cached_property
    def catalog(self) -> ApiCatalog:
        """The catalog as the operations see it (``ApiCatalog``: what they may call)."""
        return self.app.catalog

    @cached_property
    def authenticator(self) -> Authenticator:
        return Authenticator(self.app.auth, signing_key(server_key(self.app)))

    @cached_property
    def iceberg(self) -> IcebergService:
        return IcebergService(self.app.catalog, IcebergGate(self.authenticator), iceberg_defaults(self.app), self.app.audit)

    def handle(self, request: Request) -> Response:
        """Answer one request (never raises); ``Response.operation`` is its operationId, ``ui`` or ``metrics``."""
        name = ["unknown"]  # set by _handle once the request is routed
        seen: list[Ctx] = []  # the request's context, once routed and authenticated
        # The request's record, filled in by the operation (audit_context.note); with the trail off, nothing to fill.
        pending = audit_context.Pending() if self.app.audit is not None else None
        try:
            response = self._handle(request, name, seen, pending)
        except ApiError as e:
            response = error_response(e)
        except LakeMountError as e:
            response = error_response(translate(e))
        except ClientDisconnected:
            response = error_response(ApiError(400, "client disconnected before the request body was complete"))
        except BodyTimeout as e:
            response = error_response(ApiError(408, str(e)))
        except Exception:  # noqa: BLE001 - a bug: logged, answered without details
            log.exception("unexpected error serving %s %s", request.method, request.raw_path)
            response = error_response(ApiError(500, "internal error"))
        response.operation = name[0]
        if seen and pending is not None:
            if name[0] in AUDITED:
                self._record(seen[0], pending, response)
            elif name[0] in FAILURES_AUDITED and response.status >= 400:
                self._record(seen[0], pending, response, op=FAILURES_AUDITED[name[0]])
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

    def _handle(self, request: Request, name: list[str], seen: list[Ctx], pending: audit_context.Pending | None) -> Response:
        path = request.raw_path
        if path == METRICS_PATH and self.app.config.api.metrics:
            name[0] = "metrics"
            return self._metrics(request)
        if IcebergService.serves(path):
            response = self.iceberg.handle(request)  # answers in the Iceberg protocol's shape, never raises
            name[0] = response.operation
            return response
        if not path.startswith(PREFIX + "/") and path != PREFIX:
            name[0] = "ui"
            try:
                return pages.serve(request, self._logged_in)  # the web UI
            except pages.PageError as e:
                raise ApiError(e.status, e.message, e.headers) from None
        try:
            op, params, other = self.router.match(request.method, path[len(PREFIX) :] or "/")
        except UnicodeDecodeError:
            raise ApiError(400, "path is not valid UTF-8") from None
        if op is None:
            if other:
                raise ApiError(405, f"method {request.method} not allowed here")
            raise not_found(f"no such API path: {path[:200]}")
        name[0] = op.operation_id
        ctx = Ctx(self, request, op, params, parse_query(request.raw_query))
        if op.auth:
            ctx.user = self.authenticator.authenticate(request.header("authorization"), request.header("cookie"),
                                                      request.client)
            csrf.check(request.method, request.header("authorization"), request.header("cookie"),
                       request.header(csrf.HEADER))
        ctx.check_query()
        seen.append(ctx)
        if pending is None:
            result = op.func(ctx)
        else:  # the operation runs as its caller: the catalog's versioning records name who asked
            tokens = audit_context.enter(audit_context.Actor(ctx.user or "", API, request.client), pending)
            try:
                result = op.func(ctx)
            finally:
                audit_context.leave(tokens)
        assert isinstance(result, Response)
        return result

    def _metrics(self, request: Request) -> Response:
        """Prometheus text of every server sharing this home (unauthenticated, like lakeFS's; ``api.metrics``)."""
        if request.method not in ("GET", "HEAD"):
            raise ApiError(405, f"method {request.method} not allowed here", (("Allow", "GET, HEAD"),))
        text = metrics.exposition(self.app.config.home)
        if self.app.audit is not None:
            from lakemount.audit.log import render_metrics

            text += render_metrics(self.app.config.home)
        return Response(200, [("Content-Type", metrics.CONTENT_TYPE), ("Cache-Control", "no-store")], text.encode())
