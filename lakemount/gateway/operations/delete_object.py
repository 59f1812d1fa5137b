"""DeleteObject: stage the key's deletion; deleting a missing key succeeds, as in S3."""

from __future__ import annotations

from lakemount.auth.policies import Action
from lakemount.errors import NotFound
from lakemount.gateway.context import Ctx
from lakemount.serving.http import Response


def handle(ctx: Ctx) -> Response:
    """DeleteObject: remove the key from the target branch (204 even if it was absent, as S3 does)."""
    target = ctx.target()
    ctx.require(Action.WRITE_REPO, target)
    assert ctx.key is not None
    ref, path = target.split(ctx.key)
    if not path:
        return Response(204)  # "<branch>/" is the branch root, not an object
    branch, path = ctx.write_path(target, ctx.key)
    try:
        ctx.services.catalog.delete(target.repo.name, branch, path)
    except NotFound:
        pass
    return Response(204)
