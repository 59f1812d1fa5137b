"""UploadPart: store one part's bytes, verified, under the upload; then record it.

A part is an object of its own under ``_lakefs/multipart/<upload>/``, written
whole before the part row points at it; re-sending a part replaces it.
"""

from __future__ import annotations

import secrets
import time

from lakemount.auth.policies import Action
from lakemount.catalog.model import Repository
from lakemount.catalog.s3state import Part, Upload
from lakemount.errors import ConcurrentUpdate, UploadNotFound
from lakemount.gateway.context import Ctx
from lakemount.gateway.errors import s3_error
from lakemount.gateway.multipart import MAX_PART_NUMBER, MAX_PART_SIZE
from lakemount.gateway.objects import quoted, receive
from lakemount.serving.http import Response


def upload_of(ctx: Ctx, action: Action = Action.WRITE_REPO, *, completed: bool = False) -> tuple[Upload, Repository]:
    """The upload named by ``uploadId``, checked against the bucket and key; raises NoSuchUpload.

    ``completed`` admits an upload completed recently (for a retried completion).
    """
    target = ctx.target()
    ctx.require(action, target)
    upload = ctx.services.uploads.get(ctx.query.get("uploadId", ""), completed=completed)
    if upload.bucket != ctx.bucket or upload.key != ctx.key:
        raise s3_error("NoSuchUpload", UploadId=upload.upload_id)
    return upload, target.repo


def part_number(ctx: Ctx) -> int:
    """The request's ``partNumber`` (1-10000); raises ``S3Error`` InvalidArgument otherwise."""
    text = ctx.query.get("partNumber", "")
    if not text.isdigit() or not 1 <= int(text) <= MAX_PART_NUMBER:
        raise s3_error("InvalidArgument", "Part number must be an integer between 1 and 10000, inclusive", ArgumentName="partNumber", ArgumentValue=text)
    return int(text)


def parts_dir(upload: Upload) -> str:
    """Where an upload's parts are stored, relative to the storage namespace."""
    return f"_lakefs/multipart/{upload.upload_id}"


def part_key(upload: Upload, number: int) -> str:
    """A fresh namespace-relative key for part ``number`` of ``upload`` (unique, so a retried part never overwrites)."""
    return f"{parts_dir(upload)}/{number:05d}-{secrets.token_hex(4)}"


def record_part(ctx: Ctx, upload: Upload, part: Part) -> None:
    """Point the upload's part at a stored object; the object goes if the upload is gone."""
    cat = ctx.services.catalog
    try:
        old = ctx.services.uploads.put_part(upload.upload_id, part)
    except (UploadNotFound, ConcurrentUpdate):
        cat.delete_stored(part.url)
        raise
    if old is not None:
        cat.delete_stored(old)


def handle(ctx: Ctx) -> Response:
    """UploadPart: store the body as part ``partNumber``; returns its ETag. Raises ``S3Error`` NoSuchUpload."""
    upload, repo = upload_of(ctx)
    number = part_number(ctx)
    cat = ctx.services.catalog
    key = part_key(upload, number)
    body = receive(ctx.req, ctx.principal.auth, cat, repo, max_size=MAX_PART_SIZE, address=key)
    record_part(ctx, upload, Part(number, body.md5, body.size, cat.physical_url(repo, key), time.time()))
    headers = [("ETag", quoted(body.md5))]
    headers += [(f"x-amz-checksum-{a}", v) for a, v in body.checksums.items()]
    return Response(200, headers)
