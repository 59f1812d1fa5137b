"""HeadObject: GetObject's headers (conditions, ranges and parts included) without the body."""

from __future__ import annotations

from lakemount.gateway.context import Ctx
from lakemount.gateway.operations.get_object import respond
from lakemount.serving.http import Response


def handle(ctx: Ctx) -> Response:
    """HeadObject: the headers GetObject would send, without the body."""
    return respond(ctx, head=True)
