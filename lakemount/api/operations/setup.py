"""Server-level operations: health, version and storage configuration, login, the current user, the API document.

Storage configuration answers ``pre_sign_support: true`` when the block store
is S3 and ``blockstore.s3.disable_pre_signed`` is not set: lakeFS's clients
then move object data straight to and from S3 with presigned URLs
(``getPhysicalAddress``/``linkPhysicalAddress``, ``presign=true`` on stat and
get).  On the local block store it is false (lakeFS's local adapter does not
presign either) and clients send data through the API (``uploadObject``).
``pre_sign_support_ui`` stays false (lakeFS's default; our UI uploads through
the API) and presigned multipart uploads are not offered.
"""

from __future__ import annotations

from typing import Final

import lakemount
from lakemount.api import csrf
from lakemount.api.auth import COOKIE, TOKEN_SECONDS
from lakemount.api.context import Ctx, empty, json_response
from lakemount.api.routing import operation
from lakemount.serving.http import Response

LAKEFS_API_LEVEL: Final = "1.50.0"
"""The lakeFS API level these operations follow: clients gate features on ``version_config.version``
(lakefs-spec's ``touch`` needs 1.3.1), so it names that level; lakemount's own version is in ``version_context``."""


def _version() -> str:
    return LAKEFS_API_LEVEL


def _context() -> str:
    return f"lakemount {getattr(lakemount, '__version__', '0.1.0')}"


def storage_config(ctx: Ctx) -> dict[str, object]:
    """lakeFS's ``StorageConfig`` for the configured block store: presigning on S3 unless disabled, imports supported."""
    blockstore = ctx.service.app.config.blockstore
    kind = blockstore.type
    presign = kind == "s3" and not blockstore.s3.disable_pre_signed
    example = "s3://bucket/prefix" if kind == "s3" else "local:///var/lib/lakemount/data/repo"
    return {
        "blockstore_type": kind,
        "blockstore_namespace_example": example,
        "blockstore_namespace_ValidityRegex": "^(s3://|local:///)",
        # Where repositories created without a namespace go (the configured prefix, or the local store's
        # data directory): the SDK's, lakefs-spec's and the UI's repository forms start from it.
        "default_namespace_prefix": ctx.catalog.namespace_root,
        "pre_sign_support": presign,
        "pre_sign_support_ui": False,
        "import_support": True,
        "import_validity_regex": "^(s3|local)://",
        "pre_sign_multipart_upload": False,
        "blockstore_id": "",
        "blockstore_description": "",
    }


@operation("GET", "/healthcheck", "healthCheck", tag="healthCheck", summary="check that the API serves", status=204,
           auth=False, errors=())
def health_check(ctx: Ctx) -> Response:
    """healthCheck: 204 while the API serves; needs no authentication."""
    return empty(204)


@operation("GET", "/config/version", "getLakeFSVersion", tag="config", summary="server version",
           response="VersionConfig", errors=(401,))
def get_version(ctx: Ctx) -> Response:
    """getLakeFSVersion: the lakeFS API level followed, with lakemount's version as ``version_context``."""
    return json_response(200, {"version": _version(), "version_context": _context(), "upgrade_recommended": False})


@operation("GET", "/config/storage", "getStorageConfig", tag="config", summary="block store configuration",
           response="StorageConfig", errors=(401,))
def get_storage_config(ctx: Ctx) -> Response:
    """getStorageConfig: the block store configuration (see ``storage_config``)."""
    return json_response(200, storage_config(ctx))


@operation("GET", "/config", "getConfig", tag="config", summary="version and storage configuration",
           response="Config", errors=(401,))
def get_config(ctx: Ctx) -> Response:
    """getConfig: version and storage configuration together."""
    sc = storage_config(ctx)
    return json_response(200, {"version_config": {"version": _version(), "version_context": _context(), "upgrade_recommended": False},
                               "storage_config": sc, "storage_config_list": [sc]})


@operation("POST", "/auth/login", "login", tag="auth", summary="exchange an access key and its secret for a token",
           body="LoginInformation", response="AuthenticationToken", auth=False, errors=(400, 401, 429))
def login(ctx: Ctx) -> Response:
    """login: exchange an access key and secret for a token, also set as session and CSRF cookies; 401 on bad credentials."""
    body = ctx.json_body()
    token, exp = ctx.auth.login(body["access_key_id"], body["secret_access_key"], ctx.request.client)
    cookie = f"{COOKIE}={token}; Path=/; Max-Age={TOKEN_SECONDS}; HttpOnly; SameSite=Strict"
    return json_response(200, {"token": token, "token_expiration": exp},
                         (("Set-Cookie", cookie), ("Set-Cookie", csrf.new_cookie())))


@operation("POST", "/auth/logout", "logout", tag="auth", summary="forget the session cookie", status=204,
           auth=False, errors=())
def logout(ctx: Ctx) -> Response:
    """logout: clear the session and CSRF cookies (204); needs no authentication."""
    return Response(204, [("Set-Cookie", f"{COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict"),
                          ("Set-Cookie", csrf.clear_cookie())], b"")


@operation("GET", "/user", "getCurrentUser", tag="auth", summary="the authenticated user", response="CurrentUser",
           errors=(401,))
def current_user(ctx: Ctx) -> Response:
    """getCurrentUser: the authenticated user in lakeFS's ``CurrentUser`` shape."""
    from lakemount.api.operations.users import user_json

    assert ctx.user is not None
    return json_response(200, {"user": user_json(ctx.service.app.auth.get_user(ctx.user))})


@operation("GET", "/openapi.json", "getOpenAPI", tag="internal", summary="this API's OpenAPI document",
           auth=False, errors=())
def openapi_document(ctx: Ctx) -> Response:
    """getOpenAPI: this API's OpenAPI document, unauthenticated."""
    from lakemount.api.openapi import document

    return json_response(200, document(ctx.service.routes))
