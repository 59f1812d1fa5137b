"""CopyObject: a new entry for the same data (no bytes copied within a repository).

``x-amz-metadata-directive: COPY`` (default) keeps the source's content type
and metadata, ``REPLACE`` takes them from the request; copying an object onto
itself is only allowed with REPLACE, as in S3.  The copy-source conditions
(``x-amz-copy-source-if-*``) are checked against the source.
"""

from __future__ import annotations

from lakemount.auth.policies import Action
from lakemount.catalog.model import upload_entry
from lakemount.gateway.context import Ctx
from lakemount.gateway.copying import address_in, find_source
from lakemount.gateway.errors import s3_error
from lakemount.gateway.objects import META_PREFIX, check_conditions, content_type_of, last_modified
from lakemount.gateway.xml import render_copy_object_result
from lakemount.serving.http import Response
from lakemount.serving.metadata import metadata_from_headers


def handle(ctx: Ctx) -> Response:
    """CopyObject: copy the source object to the target key, its metadata copied or replaced (``x-amz-metadata-directive``).

    Raises ``S3Error`` NoSuchKey/NoSuchVersion for a missing source, PreconditionFailed for a failed
    copy condition, InvalidArgument for a bad directive or source, InvalidRequest for a copy onto itself.
    """
    target = ctx.target()
    ctx.require(Action.WRITE_REPO, target)
    assert ctx.key is not None
    branch, path = ctx.write_path(target, ctx.key, new=True)
    source = find_source(ctx)
    check_conditions(ctx.req, source.entry, prefix="x-amz-copy-source-if-")
    directive = (ctx.req.header("x-amz-metadata-directive") or "COPY").upper()
    if directive not in ("COPY", "REPLACE"):
        raise s3_error("InvalidArgument", "Unknown metadata directive.", ArgumentName="x-amz-metadata-directive")
    src = source.entry
    if directive == "COPY":
        if source.bucket == ctx.bucket and source.key == ctx.key:
            raise s3_error(
                "InvalidRequest",
                "This copy request is illegal because it is trying to copy an object to itself without changing "
                "the object's metadata, storage class, website redirect location or encryption attributes.",
            )
        content_type, metadata = src.content_type, list(src.metadata)
    else:
        content_type, metadata = content_type_of(ctx.req), metadata_from_headers(ctx.req, META_PREFIX)
    cat = ctx.services.catalog
    address = address_in(cat, source.target.repo, target.repo, src)
    entry = upload_entry(address, src.size, src.etag, path, content_type, metadata)._replace(mode=src.mode, target=src.target)
    cat.put_entry(target.repo.name, branch, path, entry)
    body = render_copy_object_result(entry.etag, last_modified(entry))
    return Response(200, [("Content-Type", "application/xml")], body)
