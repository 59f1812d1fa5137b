"""CreateBucket: a new repository (default branch ``main``) named after the bucket.

Re-creating a bucket one can read succeeds and changes nothing (S3's
us-east-1 behaviour); a bucket that exists but belongs to others is
BucketAlreadyExists.  A creator whose policies would not let them use the new
repository is given an owner policy for it, as S3 makes the creator the
bucket's owner.  The canned ACL (``x-amz-acl``) is remembered for anonymous
access.
"""

from __future__ import annotations

from lakemount.auth.model import PolicyAlreadyAttached, PolicyAlreadyExists
from lakemount.auth.policies import Action, Effect, Policy, Statement
from lakemount.errors import AlreadyExists
from lakemount.gateway.buckets import CANNED_ACLS, repo_name_for, valid_bucket_name
from lakemount.gateway.context import Ctx
from lakemount.gateway.errors import s3_error
from lakemount.gateway.xml import parse_create_bucket_configuration
from lakemount.serving.http import Response

OWNER_POLICY_PREFIX = "BucketOwner-"


def owner_policy_name(repo: str) -> str:
    """The name of the policy that makes a bucket's creator its owner."""
    return OWNER_POLICY_PREFIX + repo


def grant_owner(ctx: Ctx, repo: str) -> None:
    """Attach an owner policy for ``repo`` to the caller unless their policies already cover it."""
    if all(ctx.allowed(a, repo) for a in (Action.READ_REPO, Action.WRITE_REPO, Action.DELETE_REPO)):
        return
    store = ctx.services.access.store
    name = owner_policy_name(repo)
    actions = (Action.READ_REPO.value, Action.WRITE_REPO.value, Action.DELETE_REPO.value)
    try:
        store.create_policy(Policy(name, (Statement(Effect.ALLOW, actions, repo),)))
    except PolicyAlreadyExists:
        pass
    try:
        store.attach_policy(ctx.user, name)
    except PolicyAlreadyAttached:
        pass
    ctx.services.access.forget()


def handle(ctx: Ctx) -> Response:
    """CreateBucket: create a repository for the bucket and grant the caller ownership.

    Raises ``S3Error`` InvalidBucketName, InvalidArgument (unsupported ACL), AccessDenied, BucketAlreadyExists;
    succeeds for a caller who can already read an existing bucket of that name.
    """
    bucket = ctx.bucket
    assert bucket is not None
    if not valid_bucket_name(bucket):
        raise s3_error("InvalidBucketName", BucketName=bucket)
    acl = (ctx.req.header("x-amz-acl") or "private").strip()
    if acl not in CANNED_ACLS:
        raise s3_error("InvalidArgument", f"unsupported canned ACL {acl!r}", ArgumentName="x-amz-acl")
    parse_create_bucket_configuration(ctx.read_body(64 * 1024))
    if ctx.services.buckets.exists(bucket):
        target = ctx.target()
        if ctx.allowed(Action.READ_REPO, target.repo.name):
            return Response(200, [("Location", f"/{bucket}")])
        raise s3_error("BucketAlreadyExists", BucketName=bucket)
    repo = repo_name_for(bucket)
    if not ctx.allowed(Action.CREATE_REPO, repo):
        raise s3_error("AccessDenied")
    try:
        ctx.services.catalog.create_repository(repo)
    except AlreadyExists:
        # Taken meanwhile, or a repository with the derived name exists.
        raise s3_error("BucketAlreadyExists", BucketName=bucket) from None
    if repo != bucket or acl != "private":
        ctx.services.buckets.record(bucket, repo, acl=acl, owner=ctx.user)
    grant_owner(ctx, repo)
    return Response(200, [("Location", f"/{bucket}")])
