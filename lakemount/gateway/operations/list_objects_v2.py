"""ListObjectsV2: keys after ``continuation-token`` or ``start-after``; owners only on request."""

from __future__ import annotations

from lakemount.auth.policies import Action
from lakemount.gateway.context import Ctx
from lakemount.gateway.listing import decode_token, encode_token, list_page, parse_max
from lakemount.gateway.listing_xml import encoder, render_v2
from lakemount.serving.http import Response


def handle(ctx: Ctx) -> Response:
    """ListObjectsV2: one page of keys with prefix, delimiter, start-after and continuation token."""
    target = ctx.target()
    ctx.require(Action.READ_REPO, target)
    q = ctx.query
    encoder(q.get("encoding-type"))
    prefix = q.get("prefix", "")
    delimiter = q.get("delimiter", "")
    token = q.get("continuation-token")
    start_after = q.get("start-after", "")
    after = decode_token(token) if token else start_after
    max_keys = parse_max(q.get("max-keys"))
    page = list_page(ctx.services.catalog, target, prefix, delimiter, after, max_keys, kept=ctx.services.kept)
    body = render_v2(
        bucket=target.bucket,
        prefix=prefix,
        delimiter=delimiter,
        max_keys=max_keys,
        items=page.items,
        truncated=page.truncated,
        continuation_token=token,
        next_token=encode_token(page.last) if page.truncated and page.last is not None else None,
        start_after=start_after,
        encoding_type=q.get("encoding-type"),
        owner=ctx.user if q.get("fetch-owner", "").lower() == "true" else None,
    )
    return Response(200, [("Content-Type", "application/xml")], body)
