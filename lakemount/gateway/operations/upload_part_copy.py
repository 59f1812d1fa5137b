"""UploadPartCopy: a part whose bytes are (a range of) an existing object."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from lakemount.catalog.s3state import Part
from lakemount.gateway.context import Ctx
from lakemount.gateway.copying import find_source
from lakemount.gateway.objects import check_conditions, parse_copy_range
from lakemount.gateway.operations.upload_part import part_key, part_number, record_part, upload_of
from lakemount.gateway.xml import render_copy_part_result
from lakemount.serving.bodies import read_stream
from lakemount.serving.http import Response


def handle(ctx: Ctx) -> Response:
    """UploadPartCopy: store (a range of) an existing object as a part; raises ``S3Error`` NoSuchUpload, NoSuchKey."""
    upload, repo = upload_of(ctx)
    number = part_number(ctx)
    source = find_source(ctx)
    check_conditions(ctx.req, source.entry, prefix="x-amz-copy-source-if-")
    size = source.entry.size
    header = ctx.req.header("x-amz-copy-source-range")
    start, length = parse_copy_range(header, size) if header is not None else (0, size)
    cat = ctx.services.catalog
    key = part_key(upload, number)
    with cat.writer(repo, address=key, hash_sha256=False) as w:
        chunks, f = read_stream(cat, source.target.repo, source.entry, start, length)
        try:
            for chunk in chunks:
                w.write(chunk)
        finally:
            if f is not None:
                f.close()
    now = time.time()
    record_part(ctx, upload, Part(number, w.info.etag, length, cat.physical_url(repo, key), now))
    body = render_copy_part_result(w.info.etag, datetime.fromtimestamp(now, UTC))
    return Response(200, [("Content-Type", "application/xml")], body)
