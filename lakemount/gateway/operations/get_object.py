"""GetObject: an object's bytes, whole, a Range of them, or one part of a multipart object.

Conditions (If-Match, If-None-Match, If-Modified-Since, If-Unmodified-Since)
apply with S3's precedence; ``response-*`` query parameters override the
stored headers.  The body is read through the catalog's cached data reads
(``serving/bodies.py``): a hot object is served without asking the object store.
"""

from __future__ import annotations

from lakemount.audit.context import note
from lakemount.auth.policies import Action
from lakemount.catalog.model import Entry, object_view
from lakemount.errors import NotFound
from lakemount.gateway.buckets import Target
from lakemount.gateway.context import Ctx
from lakemount.gateway.errors import s3_error
from lakemount.gateway.objects import check_conditions, is_object, object_headers, parse_range
from lakemount.serving.bodies import read_body
from lakemount.serving.http import Response

OVERRIDES = {
    "response-content-type": "Content-Type",
    "response-content-language": "Content-Language",
    "response-expires": "Expires",
    "response-cache-control": "Cache-Control",
    "response-content-disposition": "Content-Disposition",
    "response-content-encoding": "Content-Encoding",
}


def find(ctx: Ctx) -> tuple[Target, Entry]:
    """(target, entry) of the requested object; raises NoSuchKey, NoSuchBucket, AccessDenied."""
    target = ctx.target(read=True)  # a GET or HEAD: the repository's kept record will do
    ctx.require(Action.READ_REPO, target)
    assert ctx.key is not None
    ref, path = ctx.object_path(target, ctx.key)
    # The ref and the entry in one step: on a branch, one ref-store statement (Catalog.lookup), or
    # none while what an earlier GET found is kept (kept.py).
    try:
        resolved, entry = ctx.services.kept.lookup(target.repo, ref, path)
    except NotFound:
        raise ctx.no_such_ref(target, ref) from None
    note(ref=ref, commit=resolved.commit_id, path=path)  # the audit trail's record of this read (no second split)
    version = ctx.query.get("versionId")
    if version not in (None, "", "null"):
        raise s3_error("NoSuchVersion", Key=ctx.key, VersionId=version)
    if entry is None or not is_object(entry):
        raise s3_error("NoSuchKey", Key=ctx.key)
    return target, entry


def _part_range(ctx: Ctx, entry: Entry, size: int, text: str) -> tuple[int, int, int | None]:
    """(start, length, parts count) of ``partNumber``; raises InvalidArgument or InvalidPart."""
    if not text.isdigit() or not 1 <= int(text) <= 10000:
        raise s3_error("InvalidArgument", "Part number must be an integer between 1 and 10000, inclusive", ArgumentName="partNumber")
    n = int(text)
    sizes = ctx.services.uploads.layout(entry.etag) if "-" in entry.etag else None
    if sizes is None or sum(sizes) != size:
        if n != 1:
            raise s3_error("InvalidPart", "The requested partnumber is not satisfiable")
        return 0, size, None
    if n > len(sizes):
        raise s3_error("InvalidPart", "The requested partnumber is not satisfiable")
    return sum(sizes[: n - 1]), sizes[n - 1], len(sizes)


def respond(ctx: Ctx, *, head: bool) -> Response:
    """GetObject or HeadObject (``head``): headers, conditions and range handling; the body only for GET.

    Raises ``S3Error`` NoSuchKey, PreconditionFailed, InvalidRange; returns 304 when not modified.
    """
    target, entry = find(ctx)
    not_modified = check_conditions(ctx.req, entry)
    if not_modified is not None:
        return not_modified
    size = object_view(entry).size
    headers = object_headers(entry)
    status = 200
    start, length = 0, size
    part = ctx.query.get("partNumber")
    if part is not None:
        if ctx.req.header("range") is not None:
            raise s3_error("InvalidRequest", "Cannot specify both Range header and partNumber query parameter")
        start, length, count = _part_range(ctx, entry, size, part)
        if count is not None:
            status = 206
            headers.append(("x-amz-mp-parts-count", str(count)))
            headers.append(("Content-Range", f"bytes {start}-{start + length - 1}/{size}"))
    else:
        rng = parse_range(ctx.req.header("range"), size)
        if rng is not None:
            start, length = rng
            status = 206
            headers.append(("Content-Range", f"bytes {start}-{start + length - 1}/{size}"))
    for param, header in OVERRIDES.items():
        value = ctx.query.get(param)
        if value is not None:
            if ctx.principal.anonymous:
                raise s3_error("InvalidRequest", "Request specific response headers cannot be used for anonymous GET requests.")
            headers = [(k, v) for k, v in headers if k.lower() != header.lower()]
            headers.append((header, value))
    headers.append(("Content-Length", str(length)))
    if head:
        return Response(status, headers, b"", length)
    body, close = read_body(ctx.services.catalog, target.repo, entry, start, length)
    return Response(status, headers, body, length, close)


def handle(ctx: Ctx) -> Response:
    """GetObject: the object's bytes (or the requested range) with its headers."""
    return respond(ctx, head=False)
