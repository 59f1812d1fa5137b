"""HeadBucket: 200 if the bucket exists and the caller may read it."""

from __future__ import annotations

from lakemount.auth.policies import Action
from lakemount.gateway.context import Ctx
from lakemount.serving.http import Response


def handle(ctx: Ctx) -> Response:
    """HeadBucket: 200 with the region when the caller may read the bucket."""
    ctx.require(Action.READ_REPO)
    return Response(200, [("x-amz-bucket-region", ctx.services.settings.region)])
