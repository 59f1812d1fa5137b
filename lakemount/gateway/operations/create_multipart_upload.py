"""CreateMultipartUpload: record an upload (target branch, path, content type, metadata)."""

from __future__ import annotations

import secrets

from lakemount.auth.policies import Action
from lakemount.gateway.context import Ctx
from lakemount.gateway.multipart import new_upload
from lakemount.gateway.objects import META_PREFIX, content_type_of
from lakemount.gateway.xml import render_initiate_multipart_upload
from lakemount.serving.http import Response
from lakemount.serving.metadata import metadata_from_headers


def handle(ctx: Ctx) -> Response:
    """CreateMultipartUpload: record a new upload of the target key and return its id."""
    target = ctx.target()
    ctx.require(Action.WRITE_REPO, target)
    assert ctx.bucket is not None and ctx.key is not None
    branch, path = ctx.write_path(target, ctx.key, new=True)
    upload_id = secrets.token_hex(20)
    ctx.services.uploads.create(
        new_upload(
            upload_id,
            ctx.bucket,
            ctx.key,
            target.repo.name,
            branch,
            path,
            ctx.user,
            content_type_of(ctx.req),
            metadata_from_headers(ctx.req, META_PREFIX),
        )
    )
    body = render_initiate_multipart_upload(ctx.bucket, ctx.key, upload_id)
    return Response(200, [("Content-Type", "application/xml")], body)
