"""CompleteMultipartUpload: assemble the listed parts into one object and stage it.

The parts are checked first (ascending numbers, known parts with matching
ETags, every part but the last at least 5 MiB); then their bytes are joined
into one content-addressed object whose ETag is S3's multipart form
``md5(md5(part1) ... md5(partN))-N``, its entry is staged, and the upload and
its part objects are deleted.  Assembling gigabytes takes a while, so for
large uploads the response starts at once and sends a space every few
seconds until the result (or an error document, as S3 does) is ready.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
from collections.abc import Iterator

from lakemount.audit.context import note
from lakemount.catalog.model import Repository, upload_entry
from lakemount.catalog.s3state import Part, Upload
from lakemount.errors import LakeMountError, UploadNotFound
from lakemount.gateway.context import Ctx
from lakemount.gateway.errors import S3Error, from_exception, s3_error
from lakemount.gateway.multipart import MIN_PART_SIZE
from lakemount.gateway.operations.upload_part import upload_of
from lakemount.gateway.xml import (
    MAX_BODY_BYTES,
    CompletedPart,
    parse_complete_multipart_upload,
    render_complete_multipart_upload,
    render_error,
)
from lakemount.serving.bodies import READ_CHUNK
from lakemount.serving.http import Response

log = logging.getLogger("lakemount.gateway")

STREAM_ABOVE = 256 * 1024 * 1024
KEEPALIVE_SECONDS = 5.0


def requested_parts(ctx: Ctx) -> list[CompletedPart]:
    """The parts listed in the body; a part number listed twice in a row counts once, last wins.

    (A client that re-sent a part may list both answers; the later upload is
    the one stored.)
    """
    out: list[CompletedPart] = []
    for r in parse_complete_multipart_upload(ctx.read_body(MAX_BODY_BYTES)):
        if out and out[-1].part_number == r.part_number:
            out[-1] = r
        else:
            out.append(r)
    return out


def _etag_text(etag: str) -> str:
    return etag.strip().strip('"').lower()


def chosen_parts(upload: Upload, requested: list[CompletedPart], stored: dict[int, Part]) -> list[Part]:
    """The stored parts named in the request, validated; raises the S3 error."""
    parts: list[Part] = []
    last = 0
    for r in requested:
        if r.part_number <= last:
            raise s3_error("InvalidPartOrder", UploadId=upload.upload_id)
        last = r.part_number
        p = stored.get(r.part_number)
        if p is None or p.etag != _etag_text(r.etag):
            raise s3_error("InvalidPart", UploadId=upload.upload_id, PartNumber=r.part_number, ETag=r.etag)
        parts.append(p)
    for p in parts[:-1]:
        if p.size < MIN_PART_SIZE:
            raise s3_error(
                "EntityTooSmall", ProposedSize=p.size, MinSizeAllowed=MIN_PART_SIZE, PartNumber=p.part_number, ETag=p.etag
            )
    return parts


def multipart_etag(etags: list[str]) -> str:
    """S3's ETag of a multipart object from its parts' MD5 hex digests."""
    digest = hashlib.md5(b"".join(bytes.fromhex(e) for e in etags), usedforsecurity=False).hexdigest()
    return f"{digest}-{len(etags)}"


def _result(upload: Upload, etag: str) -> bytes:
    return render_complete_multipart_upload(
        location=f"/{upload.bucket}/{upload.key}", bucket=upload.bucket, key=upload.key, etag=etag
    )


def assemble(ctx: Ctx, upload: Upload, repo: Repository, parts: list[Part]) -> bytes:
    """Join, store and stage; returns the result document.  Raises on failure."""
    cat = ctx.services.catalog
    # The object's ETag is made of the parts' (below): the writer needs only the SHA-256.
    with cat.writer(repo, hash_md5=False) as w:
        for p in parts:
            with cat.open_stored(p.url) as f:
                while chunk := f.read(READ_CHUNK):
                    w.write(chunk)
        if w.size != sum(p.size for p in parts):
            raise s3_error("InternalError", "a stored part changed size")
    etag = multipart_etag([p.etag for p in parts])
    entry = upload_entry(w.info.address, w.size, etag, upload.path, upload.content_type, upload.metadata)
    cat.stage_upload(upload.repo, upload.ref, upload.path, entry)
    note(ref=upload.ref, path=upload.path, nbytes=w.size)
    ctx.services.uploads.record_layout(etag, [p.size for p in parts])
    leftovers: list[Part] = []
    with contextlib.suppress(UploadNotFound):  # a concurrent identical completion already cleaned up
        leftovers = ctx.services.uploads.complete(upload.upload_id, etag)
    for p in leftovers:
        with contextlib.suppress(LakeMountError):
            cat.delete_stored(p.url)
    return _result(upload, etag)


def _streamed(ctx: Ctx, upload: Upload, repo: Repository, parts: list[Part]) -> Iterator[bytes]:
    result: list[bytes] = []
    done = threading.Event()

    def work() -> None:
        try:
            result.append(assemble(ctx, upload, repo, parts))
        except Exception as exc:  # noqa: BLE001 - reported in the body, as S3 does after a 200
            if not isinstance(exc, S3Error | LakeMountError):
                log.exception("completing upload %s", upload.upload_id)
            result.append(render_error(from_exception(exc), resource=ctx.req.raw_path, request_id=ctx.request_id))
        finally:
            done.set()

    threading.Thread(target=work, name="lm-gw-complete", daemon=True).start()
    yield b'<?xml version="1.0" encoding="UTF-8"?>\n'
    while not done.wait(KEEPALIVE_SECONDS):
        yield b" "
    doc = result[0]
    yield doc.split(b"\n", 1)[1] if doc.startswith(b"<?xml") else doc


def handle(ctx: Ctx) -> Response:
    """CompleteMultipartUpload: write the listed parts as one object (a retry of the same list gets the same answer).

    Raises ``S3Error`` NoSuchUpload, InvalidPart or InvalidPartOrder for a bad part list.
    """
    upload, repo = upload_of(ctx, completed=True)
    requested = requested_parts(ctx)
    if upload.completed_etag is not None:
        # A retried completion: the same parts again get the same answer.
        try:
            same = multipart_etag([_etag_text(r.etag) for r in requested]) == upload.completed_etag
        except ValueError:
            same = False
        if not same:
            raise s3_error("InvalidPart", UploadId=upload.upload_id)
        return Response(200, [("Content-Type", "application/xml")], _result(upload, upload.completed_etag))
    stored = {p.part_number: p for p in ctx.services.uploads.parts(upload.upload_id)}
    parts = chosen_parts(upload, requested, stored)
    if sum(p.size for p in parts) < STREAM_ABOVE:
        return Response(200, [("Content-Type", "application/xml")], assemble(ctx, upload, repo, parts))
    # No length known in advance: the server sends it chunked.
    return Response(200, [("Content-Type", "application/xml")], _streamed(ctx, upload, repo, parts))
