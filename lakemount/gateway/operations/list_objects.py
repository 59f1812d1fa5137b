"""ListObjects (v1): keys after ``marker``, with prefix, delimiter and ``max-keys``."""

from __future__ import annotations

from lakemount.auth.policies import Action
from lakemount.gateway.context import Ctx
from lakemount.gateway.listing import list_page, parse_max
from lakemount.gateway.listing_xml import encoder, render_v1
from lakemount.serving.http import Response


def handle(ctx: Ctx) -> Response:
    """ListObjects (v1): one page of keys with prefix, delimiter and marker."""
    target = ctx.target()
    ctx.require(Action.READ_REPO, target)
    q = ctx.query
    encoder(q.get("encoding-type"))  # refuse a bad encoding-type before listing
    prefix = q.get("prefix", "")
    delimiter = q.get("delimiter", "")
    marker = q.get("marker", "")
    max_keys = parse_max(q.get("max-keys"))
    page = list_page(ctx.services.catalog, target, prefix, delimiter, marker, max_keys, kept=ctx.services.kept)
    body = render_v1(
        bucket=target.bucket,
        prefix=prefix,
        marker=marker,
        delimiter=delimiter,
        max_keys=max_keys,
        items=page.items,
        truncated=page.truncated,
        encoding_type=q.get("encoding-type"),
        owner=ctx.user,
    )
    return Response(200, [("Content-Type", "application/xml")], body)
