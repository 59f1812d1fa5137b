"""Refs: the commit log (filtered by paths and prefixes), the diff of two refs, merge, and merge base."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import dropwhile

from lakemount.api.context import Ctx, json_response, repo_of
from lakemount.api.errors import bad_request
from lakemount.api.models import commit_json
from lakemount.api.operations.branches import DELIMITER, diff_page
from lakemount.api.pagination import paginate
from lakemount.api.routing import AMOUNT, PAGINATION, Param, operation
from lakemount.auth.policies import Action
from lakemount.catalog.model import Commit
from lakemount.catalog.shapes import parse_since
from lakemount.errors import NothingToMerge
from lakemount.serving.http import Response

TAG = "refs"


@operation("GET", "/repositories/{repository}/refs/{ref}/commits", "logCommits", tag=TAG,
           summary="commits reachable from a ref, newest first; with objects/prefixes only those changing them",
           params=(
               Param("after", description="commit id of the previous page's last commit"),
               AMOUNT,
               Param("objects", array=True, description="only commits that change one of these paths"),
               Param("prefixes", array=True, description="only commits that change something under one of these"),
               Param("limit", "boolean", description="stop after amount results (no further pages)"),
               Param("first_parent", "boolean"),
               Param("since", description="only commits at or after this date-time"),
               Param("stop_at", description="stop at this commit (included)"),
               Param("search", description="lakemount: only commits whose message, committer or metadata holds this "
                                           "text (any case), or whose id starts with it"),
           ),
           response="CommitList")
def log_commits(ctx: Ctx) -> Response:
    """logCommits: a page of the ref's history, filtered by ``objects``/``prefixes``/``since``/``search`` and stopped at
    ``stop_at``; 403 without ReadRepo."""
    repo = repo_of(ctx, Action.READ_REPO)
    commits = ctx.catalog.log(
        repo, ctx.params["ref"], since=parse_since(ctx.q("since"), "since"), first_parent=ctx.q_bool("first_parent"),
        paths=ctx.q_list("objects"), prefixes=ctx.q_list("prefixes"), matching=ctx.q("search") or "",
    )
    stop_at = ctx.q("stop_at") or ""
    if stop_at:
        stop_id = ctx.catalog.commit_of(repo, stop_at).id

        def until(it: Iterator[Commit]) -> Iterator[Commit]:
            for c in it:
                yield c
                if c.id == stop_id:
                    return

        commits = until(commits)
    after = ctx.q("after") or ""
    if after:
        seen = iter(commits)
        commits = dropwhile(lambda c: c.id != after, seen)
        next(commits, None)  # the previous page's last commit itself
    page = paginate(commits, ctx.page_size(), lambda c: c.id, commit_json)
    if ctx.q_bool("limit"):
        page["pagination"]["has_more"] = False
        page["pagination"]["next_offset"] = ""
    return json_response(200, page)


@operation("GET", "/repositories/{repository}/refs/{leftRef}/diff/{rightRef}", "diffRefs", tag=TAG,
           summary="what changed from leftRef to rightRef (three_dot: since their merge base)",
           params=(*PAGINATION, DELIMITER, Param("type", description="three_dot (default) or two_dot"),
                   Param("include_right_stats", "boolean")),
           response="DiffList")
def diff_refs(ctx: Ctx) -> Response:
    """diffRefs: a page of what ``rightRef`` changed, since the merge base (three_dot) or against ``leftRef`` (two_dot); 400 for another type."""
    repo = repo_of(ctx, Action.READ_REPO)
    kind = ctx.q("type") or "three_dot"
    left, right = ctx.params["leftRef"], ctx.params["rightRef"]
    if kind == "two_dot":
        records = ctx.catalog.diff(repo, left, right, prefix=ctx.q("prefix") or "")
    elif kind == "three_dot":
        # What rightRef changed since it and leftRef parted (unrelated histories: against leftRef itself).
        base = ctx.catalog.merge_base(repo, left, right)
        records = ctx.catalog.diff(repo, base or left, right, prefix=ctx.q("prefix") or "")
    else:
        raise bad_request("type must be two_dot or three_dot")
    return diff_page(ctx, records, delimiter=ctx.q("delimiter") or "")


@operation("POST", "/repositories/{repository}/refs/{sourceRef}/merge/{destinationBranch}", "mergeIntoBranch", tag=TAG,
           summary="merge a ref into a branch", body="Merge", body_required=False, response="MergeResult",
           errors=(400, 401, 403, 404, 409, 412))
def merge_into_branch(ctx: Ctx) -> Response:
    """mergeIntoBranch: merge ``sourceRef`` into the branch, answering the resulting commit id; 409 on conflict, 403 without
    WriteRepo, 400 "no changes" when the source brings nothing and ``allow_empty`` is not set (as lakeFS)."""
    repo = repo_of(ctx, Action.WRITE_REPO)
    body = ctx.json_body()
    strategy = body.get("strategy") or None
    source, dest = ctx.params["sourceRef"], ctx.params["destinationBranch"]
    from lakemount.node import settle

    for branch in dict.fromkeys((dest, source)):  # what this node's write-back mounts hold for either side comes first
        settle(ctx.service.app, repo, branch)
    result = ctx.catalog.merge(
        repo, source, dest, strategy=strategy,
        squash=bool(body.get("squash_merge")), message=body.get("message") or None,
        committer=ctx.user or "lakemount", metadata=sorted((body.get("metadata") or {}).items()),
        allow_empty=bool(body.get("allow_empty")),
    )
    if not result.merged:
        raise NothingToMerge(source, f"{repo}/{dest}")
    return json_response(200, {"reference": result.commit_id})


@operation("GET", "/repositories/{repository}/refs/{sourceRef}/merge/{destinationBranch}", "findMergeBase", tag=TAG,
           summary="the merge base of a ref and a branch", response="FindMergeBaseResult")
def find_merge_base(ctx: Ctx) -> Response:
    """findMergeBase: the commits of both refs and their merge base; 400 when they share no history."""
    repo = repo_of(ctx, Action.READ_REPO)
    src, dst = ctx.params["sourceRef"], ctx.params["destinationBranch"]
    base = ctx.catalog.merge_base(repo, src, dst)
    if base is None:
        raise bad_request("the refs share no history")
    return json_response(200, {
        "source_commit_id": ctx.catalog.commit_of(repo, src).id,
        "destination_commit_id": ctx.catalog.commit_of(repo, dst).id,
        "base_commit_id": base,
    })
