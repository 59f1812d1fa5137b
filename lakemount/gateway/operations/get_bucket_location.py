"""GetBucketLocation: the configured region (empty for us-east-1, as S3 answers)."""

from __future__ import annotations

from lakemount.auth.policies import Action
from lakemount.gateway.context import Ctx
from lakemount.gateway.xml import render_location_constraint
from lakemount.serving.http import Response


def handle(ctx: Ctx) -> Response:
    """GetBucketLocation: the gateway's configured region."""
    ctx.require(Action.READ_REPO)
    return Response(200, [("Content-Type", "application/xml")], render_location_constraint(ctx.services.settings.region))
