"""GetBucketAcl: the caller has full control of what it may read (tools such as s3cmd ask)."""

from __future__ import annotations

from lakemount.auth.policies import Action
from lakemount.gateway.context import Ctx
from lakemount.gateway.xml import S3_NAMESPACE, escape
from lakemount.serving.http import Response


def handle(ctx: Ctx) -> Response:
    """GetBucketAcl: the caller as owner with FULL_CONTROL (lakemount has no per-bucket ACLs)."""
    ctx.require(Action.READ_REPO)
    owner = escape(ctx.user)
    body = (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<AccessControlPolicy xmlns="{S3_NAMESPACE}">'
        f"<Owner><ID>{owner}</ID><DisplayName>{owner}</DisplayName></Owner><AccessControlList><Grant>"
        '<Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="CanonicalUser">'
        f"<ID>{owner}</ID><DisplayName>{owner}</DisplayName></Grantee><Permission>FULL_CONTROL</Permission>"
        "</Grant></AccessControlList></AccessControlPolicy>"
    )
    return Response(200, [("Content-Type", "application/xml")], body.encode())
