"""ListMultipartUploads: uploads in progress in a bucket, by key then upload id."""

from __future__ import annotations

from datetime import UTC, datetime

from lakemount.auth.policies import Action
from lakemount.gateway.context import Ctx
from lakemount.gateway.listing import parse_max
from lakemount.gateway.xml import Owner, UploadRecord, render_list_multipart_uploads
from lakemount.serving.http import Response


def handle(ctx: Ctx) -> Response:
    """ListMultipartUploads: the bucket's uploads in progress, by key and upload id."""
    ctx.require(Action.READ_REPO)
    assert ctx.bucket is not None
    q = ctx.query
    limit = parse_max(q.get("max-uploads"), "max-uploads")
    prefix = q.get("prefix", "")
    delimiter = q.get("delimiter", "")
    key_marker = q.get("key-marker", "")
    id_marker = q.get("upload-id-marker", "") if key_marker else ""
    uploads = ctx.services.uploads.uploads(
        ctx.bucket, prefix=prefix, key_marker=key_marker, upload_id_marker=id_marker, limit=10 * limit + 1000
    )
    records: list[UploadRecord] = []
    prefixes: list[str] = []
    truncated = False
    last_key = last_id = None
    for u in uploads:
        if delimiter:
            i = u.key.find(delimiter, len(prefix))
            if i >= 0:
                common = u.key[: i + len(delimiter)]
                if (prefixes and prefixes[-1] == common) or common <= key_marker:
                    continue
                if len(records) + len(prefixes) >= limit:
                    truncated = True
                    break
                prefixes.append(common)
                last_key, last_id = common, ""
                continue
        if len(records) + len(prefixes) >= limit:
            truncated = True
            break
        owner = Owner(u.owner, u.owner)
        records.append(UploadRecord(u.key, u.upload_id, datetime.fromtimestamp(u.initiated, UTC), owner=owner))
        last_key, last_id = u.key, u.upload_id
    body = render_list_multipart_uploads(
        bucket=ctx.bucket,
        prefix=prefix,
        key_marker=key_marker,
        upload_id_marker=id_marker,
        max_uploads=limit,
        delimiter=delimiter or None,
        is_truncated=truncated,
        uploads=records,
        common_prefixes=prefixes,
        next_key_marker=last_key,
        next_upload_id_marker=last_id,
        encoding_type=q.get("encoding-type"),
    )
    return Response(200, [("Content-Type", "application/xml")], body)
