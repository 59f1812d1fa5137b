"""AbortMultipartUpload: forget the upload and delete its parts."""

from __future__ import annotations

from lakemount.gateway.context import Ctx
from lakemount.gateway.operations.upload_part import upload_of
from lakemount.serving.http import Response


def handle(ctx: Ctx) -> Response:
    """AbortMultipartUpload: forget the upload and delete its parts; raises ``S3Error`` NoSuchUpload."""
    upload, _repo = upload_of(ctx)
    for part in ctx.services.uploads.delete(upload.upload_id):
        ctx.services.catalog.delete_stored(part.url)
    return Response(204)
