"""``S3Gateway``: one HTTP request in, one S3 response out.

Finds the bucket and key (path style, or virtual-host style under a configured
domain), authenticates the caller, picks the operation (``routing.py``) and
runs it; every failure becomes S3's XML error with the request id that the
``x-amz-request-id`` header also carries.  Blocking and synchronous: the
server adapter (``serving/asgi.py``) calls it from worker threads.
"""

from __future__ import annotations

import itertools
import logging
import os
import unicodedata
from typing import Final
from urllib.parse import unquote_to_bytes

from lakemount.app import App
from lakemount.audit import context as audit_context
from lakemount.audit import operations
from lakemount.audit.record import GATEWAY
from lakemount.errors import LakeMountError
from lakemount.gateway import routing
from lakemount.gateway.access import ANONYMOUS, Access, Principal
from lakemount.gateway.buckets import BucketMap
from lakemount.gateway.context import Ctx, Services
from lakemount.gateway.errors import S3Error, from_exception
from lakemount.gateway.settings import GatewaySettings
from lakemount.gateway.xml import render_error
from lakemount.serving.http import BodyTimeout, ClientDisconnected, Request, Response

log = logging.getLogger("lakemount.gateway")


HOST_ID = "lakemount"

# Request ids: this process's random half, then a count (16 hex digits, as S3's).  They name a request in logs
# and error documents, and guard nothing: drawing 8 random bytes for each (``secrets``) cost a system call and
# a GIL hand-off per request (stop 57's profile of S3A's mix: 4% of a worker's request time).
_ids: list[str] = [os.urandom(4).hex().upper()]
_ID_COUNT = itertools.count(1)
os.register_at_fork(after_in_child=lambda: _ids.__setitem__(0, os.urandom(4).hex().upper()))  # a forked worker's own


def new_request_id() -> str:
    """A new request id, unique within this process and, by its random half, across processes."""
    return f"{_ids[0]}{next(_ID_COUNT) & 0xFFFFFFFF:08X}"


# Operations the audit trail records (one record per request, written when the response is known), as
# audit/operations.py lists them; bucket-level housekeeping (ACL, location, uploads' parts) is not data access.
AUDITED: Final = operations.names(frontend=GATEWAY)


def _bad_uri() -> S3Error:
    return S3Error("InvalidURI", "Couldn't parse the specified URI.", 400)


def decode_key(raw: str) -> str:
    """A key from its percent-encoded form; raises InvalidURI for bytes S3 cannot take."""
    try:
        key = unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        raise _bad_uri() from None
    # C1 control characters only appear in keys by mistake (a Latin-1 string
    # encoded twice); S3-compatible stores refuse them as unparsable.  An ASCII key has neither (checked in C).
    if not key.isascii() and (any(0x80 <= ord(c) <= 0x9F for c in key) or any(unicodedata.category(c) == "Cs" for c in key)):
        raise _bad_uri()
    return key


class S3Gateway:
    """The S3 protocol over one ``App``: it takes the services the operations use from it, once."""

    def __init__(self, app: App, settings: GatewaySettings) -> None:
        self.app = app
        self.settings = settings
        self.audit = app.audit  # its flusher runs once the process starts the app (App.start), not from here
        self.services = Services(
            catalog=app.catalog,
            access=Access(app.auth),
            buckets=BucketMap(app.bucket_store, app.catalog, settings),
            uploads=app.multipart_store,
            settings=settings,
        )

    def start(self) -> None:
        """Start listening for the ref store's change notices (PostgreSQL; nothing on SQLite): GET and HEAD keep
        what they read while notices can drop it.  Called once where the process starts serving (``build_asgi``,
        beside ``App.start``), not by the constructor, which starts no thread; calling it again does nothing."""
        self.services.kept.watch()

    # -- locating ----------------------------------------------------------------
    def vhost_bucket(self, req: Request) -> str | None:
        host = (req.header("host") or "").lower()
        if host.startswith("["):
            host = host[: host.find("]") + 1]
        else:
            host = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
        for domain in self.settings.domain_names:
            if host.endswith("." + domain):
                return host[: -len(domain) - 1]
        return None

    def locate(self, req: Request) -> tuple[str | None, str | None, str | None]:
        """(virtual-host bucket, bucket, key) of a request; raises InvalidURI."""
        vhost = self.vhost_bucket(req)
        path = req.raw_path or "/"
        if not path.startswith("/"):
            raise _bad_uri()
        if vhost is not None:
            key = decode_key(path[1:]) if len(path) > 1 else None
            return vhost, vhost, key
        rest = path[1:]
        if not rest:
            return None, None, None
        raw_bucket, sep, raw_key = rest.partition("/")
        bucket = decode_key(raw_bucket)
        key = decode_key(raw_key) if sep and raw_key else None
        return None, bucket, key

    # -- handling ------------------------------------------------------------------
    def handle(self, req: Request) -> Response:
        request_id = new_request_id()
        bucket = key = None
        name = "unknown"
        ctx: Ctx | None = None
        # The request's record, filled in by the operation (audit_context.note); with the trail off, nothing to fill.
        pending = audit_context.Pending() if self.audit is not None else None
        try:
            vhost, bucket, key = self.locate(req)
            # Routed before authenticating so that a refused request is still
            # counted under its operation; authentication's error comes first.
            try:
                op = routing.operation(req, bucket, key)
            except S3Error as routing_error:
                self.services.access.authenticate(req, virtual_host_bucket=vhost)
                raise routing_error from None
            name = routing.operation_name(op)
            principal: Principal = self.services.access.authenticate(req, virtual_host_bucket=vhost)
            ctx = Ctx(self.services, req, principal, bucket, key, request_id)
            if principal is ANONYMOUS and not routing.anonymous_allowed(op):
                raise S3Error("AccessDenied", "Access Denied", 403)
            if pending is None:
                response = op(ctx)
            else:  # the operation runs as its caller: the catalog's versioning records name who asked
                tokens = audit_context.enter(audit_context.Actor(ctx.principal.user_id or "", GATEWAY, req.client), pending)
                try:
                    response = op(ctx)
                finally:
                    audit_context.leave(tokens)
        except ClientDisconnected:
            log.info("client %s went away during %s %s", req.client, req.method, req.raw_path)
            response = Response(400, [], b"")
        except S3Error as err:
            response = self.error_response(req, err, request_id)
        except BodyTimeout:
            timeout = S3Error(
                "RequestTimeout",
                "Your socket connection to the server was not read from or written to within the timeout period.",
                400,
            )
            response = self.error_response(req, timeout, request_id)
        except LakeMountError as err:
            fields = {"BucketName": bucket} if bucket and key is None else {"Key": key} if key else {}
            response = self.error_response(req, from_exception(err, **fields), request_id)
        except Exception as err:  # noqa: BLE001 - the edge: log it, answer InternalError
            log.exception("internal error on %s %s", req.method, req.raw_path)
            response = self.error_response(req, from_exception(err), request_id)
        response.headers.append(("x-amz-request-id", request_id))
        response.headers.append(("x-amz-id-2", HOST_ID))
        response.headers.append(("Server", "lakemount"))
        response.operation = name
        if pending is not None and ctx is not None and name in AUDITED:
            self._record(ctx, name, pending, response)
        return response

    def _record(self, ctx: Ctx, name: str, pending: audit_context.Pending, response: Response) -> None:
        """One audit record of an object or listing request, refused ones too (when the bucket was found).

        A served GET or HEAD costs this call and the log's append, nothing else in Python (tests/audit/test_cost.py):
        the operation noted the ref, its commit and the path it split the key into, the response carries its
        length, and the user is the principal's; the key is split again only for a request that failed before.
        """
        target = ctx._target
        if target is None or self.audit is None:
            return
        req = ctx.req
        if name.startswith("List"):  # the prefix within the ref (a repository bucket's keys start with the ref)
            path = target.split(req.query.get("prefix", ""))[1]
        else:
            path = pending.path or (target.split(ctx.key)[1] if ctx.key else "")
        if pending.bytes:
            nbytes = pending.bytes
        elif name == "GetObject" and response.status < 300:
            nbytes = response.length if response.length is not None else response.content_length()
        elif name == "PutObject":
            text = req.header("x-amz-decoded-content-length") or req.header("content-length") or "0"
            nbytes = int(text) if text.isdigit() else 0
        else:
            nbytes = 0
        ref = pending.ref or (target.split(ctx.key)[0] if ctx.key else target.ref or "")
        self.audit.record(repo=target.repo.name, op=name, ref=ref, commit=pending.commit, path=path, nbytes=nbytes,
                          status=response.status, user=ctx.principal.user_id or "", frontend=GATEWAY, client=req.client)

    def error_response(self, req: Request, err: S3Error, request_id: str) -> Response:
        if err.http_status >= 500:
            log.warning("%s %s -> %s %s", req.method, req.raw_path, err.code, err.message)
        else:
            log.debug("%s %s -> %s %s", req.method, req.raw_path, err.code, err.message)
        headers = [("Content-Type", "application/xml")]
        if err.code == "InvalidRange" and "ActualObjectSize" in err.fields:
            headers.append(("Content-Range", f"bytes */{err.fields['ActualObjectSize']}"))
        body = b"" if req.method == "HEAD" else render_error(err, resource=req.raw_path, request_id=request_id, host_id=HOST_ID)
        return Response(err.http_status, headers, body)
