"""GetBucketVersioning: never enabled in S3's sense (history lives in commits), so an empty configuration."""

from __future__ import annotations

from lakemount.auth.policies import Action
from lakemount.gateway.context import Ctx
from lakemount.gateway.xml import S3_NAMESPACE
from lakemount.serving.http import Response


def handle(ctx: Ctx) -> Response:
    """GetBucketVersioning: an empty configuration (S3 versioning is never enabled; refs version instead)."""
    ctx.require(Action.READ_REPO)
    body = f'<?xml version="1.0" encoding="UTF-8"?>\n<VersioningConfiguration xmlns="{S3_NAMESPACE}"/>'
    return Response(200, [("Content-Type", "application/xml")], body.encode())
