"""ListBuckets: the buckets the caller may read, by name, paginated with ``max-buckets``."""

from __future__ import annotations

from datetime import UTC, datetime

from lakemount.auth.policies import Action
from lakemount.gateway.context import Ctx
from lakemount.gateway.listing import decode_token, encode_token, parse_max
from lakemount.gateway.xml import BucketRecord, Owner, escape, render_list_buckets
from lakemount.serving.http import Response

MAX_BUCKETS = 10_000


def handle(ctx: Ctx) -> Response:
    """ListBuckets: the buckets (repositories and aliases) the caller may read, paginated."""
    limit = parse_max(ctx.query.get("max-buckets"), "max-buckets", MAX_BUCKETS)
    token = ctx.query.get("continuation-token")
    after = decode_token(token) if token else ""
    prefix = ctx.query.get("prefix", "")
    records: list[BucketRecord] = []
    truncated = False
    for name, repo in ctx.services.buckets.listing():
        if name <= after or not name.startswith(prefix) or not ctx.allowed(Action.READ_REPO, repo.name):
            continue
        if len(records) >= limit:
            truncated = True
            break
        records.append(BucketRecord(name, datetime.fromtimestamp(repo.creation_date, UTC)))
    body = render_list_buckets(records, Owner(ctx.user, ctx.user))
    extra = ""
    if truncated and records:
        extra += f"<ContinuationToken>{escape(encode_token(records[-1].name))}</ContinuationToken>"
    if prefix:
        extra += f"<Prefix>{escape(prefix)}</Prefix>"
    if extra:
        body = body.replace(b"</ListAllMyBucketsResult>", extra.encode() + b"</ListAllMyBucketsResult>")
    return Response(200, [("Content-Type", "application/xml")], body)
