"""PutObject: store the body content-addressed, then stage the object's entry.

The body is verified whole (length, signatures, Content-MD5, checksums)
before anything is stored, and the entry is staged only after the data is
durable, so a reader sees the old object or the new one, never part of one.
``If-None-Match: *`` refuses to overwrite, ``If-Match`` requires the current
ETag; both are checked before and again after the upload.
"""

from __future__ import annotations

from lakemount.auth.policies import Action
from lakemount.catalog.model import upload_entry
from lakemount.gateway.buckets import Target
from lakemount.gateway.context import Ctx
from lakemount.gateway.errors import s3_error
from lakemount.gateway.objects import (
    META_PREFIX,
    content_type_of,
    etag_matches,
    quoted,
    receive,
)
from lakemount.serving.http import Response
from lakemount.serving.metadata import metadata_from_headers


def check_write_conditions(ctx: Ctx, repo: str, branch: str, path: str) -> None:
    """If-None-Match / If-Match on a write; raises PreconditionFailed or NoSuchKey."""
    if_none = ctx.req.header("if-none-match")
    if_match = ctx.req.header("if-match")
    if if_none is None and if_match is None:
        return
    current = ctx.services.catalog.get_optional(repo, branch, path)
    if if_none is not None and current is not None and (if_none.strip() == "*" or etag_matches(if_none, current.etag)):
        raise s3_error("PreconditionFailed", Condition="If-None-Match")
    if if_match is not None:
        if current is None:
            raise s3_error("NoSuchKey", Key=ctx.key or "")
        if not etag_matches(if_match, current.etag):
            raise s3_error("PreconditionFailed", Condition="If-Match")


def branch_marker(ctx: Ctx, target: Target, key: str) -> Response | None:
    """``PUT <branch>/`` with an empty body: a directory marker for the branch itself.

    Tools that create every parent "directory" (pyarrow, Hadoop) send it; the
    branch root always exists, so it is answered without staging anything.
    """
    ref, path = target.split(key)
    if path or not key.endswith("/") or target.flat:
        return None
    ctx.writable_branch(target, ref, key)
    body = receive(ctx.req, ctx.principal.auth, ctx.services.catalog, target.repo, store=False)
    if body.size:
        raise s3_error("InvalidRequest", f"{key!r} names a branch: an object there needs a path after it")
    return Response(200, [("ETag", quoted(body.md5))])


def handle(ctx: Ctx) -> Response:
    """PutObject: store the body at the target key and stage it on the branch; returns its ETag.

    Raises ``S3Error`` PreconditionFailed/NoSuchKey for a failed If-Match/If-None-Match, InvalidRequest for
    a key that names a branch, and the body errors (MissingContentLength, EntityTooLarge, MetadataTooLarge).
    """
    target = ctx.target()
    ctx.require(Action.WRITE_REPO, target)
    assert ctx.key is not None
    marker = branch_marker(ctx, target, ctx.key)
    if marker is not None:
        return marker
    branch, path = ctx.write_path(target, ctx.key, new=True)
    repo = target.repo.name
    metadata = metadata_from_headers(ctx.req, META_PREFIX)
    check_write_conditions(ctx, repo, branch, path)
    cat = ctx.services.catalog
    # A small body is stored on a thread while its entry is staged (lsm staging stores its file
    # meanwhile): the entry is made visible only once both are stored.
    body = receive(ctx.req, ctx.principal.auth, cat, target.repo, defer=True)
    entry = upload_entry(body.address, body.size, body.md5, path, content_type_of(ctx.req), metadata)
    check_write_conditions(ctx, repo, branch, path)
    exclusive = (ctx.req.header("if-none-match") or "").strip() == "*"
    entry = cat.stage_upload(repo, branch, path, entry, if_absent=exclusive, ready=body.stored)
    headers = [("ETag", quoted(entry.etag))]
    headers += [(f"x-amz-checksum-{a}", v) for a, v in body.checksums.items()]
    return Response(200, headers)
