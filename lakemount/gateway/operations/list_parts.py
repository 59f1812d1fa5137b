"""ListParts: the parts of an upload in progress, by part number."""

from __future__ import annotations

from datetime import UTC, datetime

from lakemount.auth.policies import Action
from lakemount.gateway.context import Ctx
from lakemount.gateway.errors import s3_error
from lakemount.gateway.listing import parse_max
from lakemount.gateway.operations.upload_part import upload_of
from lakemount.gateway.xml import Owner, PartRecord, render_list_parts
from lakemount.serving.http import Response


def handle(ctx: Ctx) -> Response:
    """ListParts: the upload's stored parts, paginated; raises ``S3Error`` NoSuchUpload, InvalidArgument."""
    upload, _repo = upload_of(ctx, Action.READ_REPO)
    limit = parse_max(ctx.query.get("max-parts"), "max-parts")
    marker_text = ctx.query.get("part-number-marker", "0") or "0"
    if not marker_text.isdigit():
        raise s3_error("InvalidArgument", "part-number-marker must be an integer", ArgumentName="part-number-marker")
    marker = int(marker_text)
    parts = ctx.services.uploads.parts(upload.upload_id, after=marker, limit=limit + 1)
    truncated = len(parts) > limit
    parts = parts[:limit]
    records = [PartRecord(p.part_number, datetime.fromtimestamp(p.created, UTC), p.etag, p.size) for p in parts]
    owner = Owner(upload.owner, upload.owner)
    body = render_list_parts(
        bucket=upload.bucket,
        key=upload.key,
        upload_id=upload.upload_id,
        part_number_marker=marker,
        next_part_number_marker=parts[-1].part_number if parts else marker,
        max_parts=limit,
        is_truncated=truncated,
        parts=records,
        owner=owner,
    )
    return Response(200, [("Content-Type", "application/xml")], body)
