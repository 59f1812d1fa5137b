"""DeleteBucket: delete an empty repository (no object on any branch or tag).

A tag's objects stay readable as ``<tag>/<path>`` after every branch has been
emptied (``aws s3 rb --force`` removes what it lists, then the bucket), so a
tag that holds objects keeps the repository: BucketNotEmpty, naming the tag.

In-progress multipart uploads are aborted with it; the owner policy made
when the bucket was created goes too.  A configured alias cannot be deleted.
"""

from __future__ import annotations

import contextlib

from lakemount.auth.model import PolicyNotFound
from lakemount.auth.policies import Action
from lakemount.errors import LakeMountError
from lakemount.gateway.context import Ctx
from lakemount.gateway.errors import s3_error
from lakemount.gateway.operations.create_bucket import owner_policy_name
from lakemount.serving.http import Response


def handle(ctx: Ctx) -> Response:
    """DeleteBucket: delete an empty bucket's repository, its pending uploads and owner policy.

    Raises ``S3Error`` BucketNotEmpty if any branch or tag has an object, MethodNotAllowed for a configured alias.
    """
    target = ctx.target()
    ctx.require(Action.DELETE_REPO, target)
    if target.bucket in ctx.services.settings.aliases:
        raise s3_error("MethodNotAllowed", f"bucket {target.bucket} is a configured alias of a repository ref")
    cat = ctx.services.catalog
    repo = target.repo.name
    for branch in cat.list_branches(repo):
        if next(iter(cat.list(repo, branch.name, "", limit=1)), None) is not None:
            raise s3_error("BucketNotEmpty", BucketName=target.bucket)
    seen: set[str] = set()
    for tag in cat.list_tags(repo):
        if tag.commit_id in seen:
            continue
        seen.add(tag.commit_id)
        if next(iter(cat.list(repo, tag.name, "", limit=1)), None) is not None:
            raise s3_error(
                "BucketNotEmpty",
                f"The bucket you tried to delete is not empty: tag {tag.name!r} holds objects "
                f"(delete it with `lakemount tag delete lakefs://{repo}/{tag.name}`, or the repository with "
                f"`lakemount repo delete`)",
                BucketName=target.bucket,
            )
    for part in ctx.services.uploads.forget_repo(repo):
        with contextlib.suppress(LakeMountError):
            cat.delete_stored(part.url)
    cat.delete_repository(repo)
    ctx.services.kept.drop_repository(repo)
    ctx.services.buckets.forget(target.bucket)
    with contextlib.suppress(PolicyNotFound):
        ctx.services.access.store.delete_policy(owner_policy_name(repo))
    return Response(204)
