"""Pull requests in lakeFS's shape (``/repositories/{repo}/pulls``), plus comments and approvals (our extension).

The caller is the author, commenter or approver.  Reading needs ``ReadRepo``;
opening, editing, commenting and approving need ``WriteRepo``; merging needs
``WriteRepo`` too and then the approvals the destination's rule requires.
"""

from __future__ import annotations

import datetime
from typing import Any

from lakemount.api.context import Ctx, empty, json_response, repo_of
from lakemount.api.errors import bad_request
from lakemount.api.pagination import after_filter, paginate
from lakemount.api.routing import AMOUNT, PAGINATION, Param, operation
from lakemount.auth.policies import Action
from lakemount.catalog.pulls import STATUSES, Comment, PullRequest
from lakemount.serving.http import Response

TAG = "pulls"


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.datetime.fromtimestamp(ts, tz=datetime.UTC).isoformat().replace("+00:00", "Z")


def pr_json(p: PullRequest) -> dict[str, Any]:
    """A pull request in lakeFS's PullRequest shape."""
    return {
        "id": p.id, "status": p.status, "title": p.title, "description": p.description,
        "source_branch": p.source_branch, "destination_branch": p.destination_branch, "author": p.author,
        "creation_date": _iso(p.creation_date), "closed_date": _iso(p.closed_date), "merged_commit_id": p.merged_commit_id,
    }


def comment_json(c: Comment) -> dict[str, Any]:
    """A comment as JSON."""
    return {"id": c.id, "author": c.author, "body": c.body, "creation_date": _iso(c.creation_date)}


def _user(ctx: Ctx) -> str:
    return str(ctx.user or "anonymous")


@operation("GET", "/repositories/{repository}/pulls", "listPullRequests", tag=TAG, summary="pull requests of a repository",
           params=(*PAGINATION, Param("status", description="open, closed, merged or all (default open)")),
           response="PullRequestsList")
def list_pulls(ctx: Ctx) -> Response:
    """Pull requests of a repository."""
    repo = repo_of(ctx, Action.READ_REPO)
    status = ctx.q("status") or "open"
    if status != "all" and status not in STATUSES:
        raise bad_request("status must be open, closed, merged or all")
    found = ctx.catalog.pulls.list_pulls(repo, None if status == "all" else status, limit=100_000)
    after = ctx.q("after") or ""
    items = after_filter(found, lambda p: f"{int(p.id):012d}", after=f"{int(after):012d}" if after.isdigit() else "")
    return json_response(200, paginate(items, ctx.page_size(), lambda p: p.id, pr_json))


@operation("POST", "/repositories/{repository}/pulls", "createPullRequest", tag=TAG, summary="open a pull request",
           body="PullRequestCreation", response="PullRequestCreationResponse", status=201, errors=(400, 401, 403, 404))
def create_pull(ctx: Ctx) -> Response:
    """Open a pull request."""
    repo = repo_of(ctx, Action.WRITE_REPO)
    b = ctx.json_body()
    p = ctx.catalog.pulls.create(repo, b["source_branch"], b["destination_branch"], b["title"], b.get("description", ""),
                                 author=_user(ctx))
    return json_response(201, {"id": p.id})


@operation("GET", "/repositories/{repository}/pulls/{pull_request}", "getPullRequest", tag=TAG, summary="a pull request",
           response="PullRequest")
def get_pull(ctx: Ctx) -> Response:
    """A pull request."""
    repo = repo_of(ctx, Action.READ_REPO)
    pulls = ctx.catalog.pulls
    p = pulls.get(repo, ctx.params["pull_request"])
    return json_response(200, {
        **pr_json(p),
        "required_approvals": pulls.required(repo, p.destination_branch),
        "approvals": [{"user": a.user, "creation_date": _iso(a.creation_date)} for a in pulls.approvals(repo, p.id)],
    })


@operation("PATCH", "/repositories/{repository}/pulls/{pull_request}", "updatePullRequest", tag=TAG,
           summary="edit, close or reopen a pull request", body="PullRequestBasic", status=204, errors=(400, 401, 403, 404, 412))
def update_pull(ctx: Ctx) -> Response:
    """Edit, close or reopen a pull request."""
    repo = repo_of(ctx, Action.WRITE_REPO)
    pid = ctx.params["pull_request"]
    b = ctx.json_body()
    pulls = ctx.catalog.pulls
    if "title" in b or "description" in b:
        pulls.edit(repo, pid, title=b.get("title"), description=b.get("description"))
    status = b.get("status")
    if status is not None and status != pulls.get(repo, pid).status:
        if status == "closed":
            pulls.close(repo, pid)
        elif status == "open":
            pulls.reopen(repo, pid)
        else:
            raise bad_request("status can be set to open or closed (merge through /merge)")
    return empty(204)


@operation("PUT", "/repositories/{repository}/pulls/{pull_request}/merge", "mergePullRequest", tag=TAG,
           summary="merge a pull request", body="PullRequestMerge", body_required=False, response="MergeResult",
           errors=(400, 401, 403, 404, 409, 412))
def merge_pull(ctx: Ctx) -> Response:
    """Merge a pull request."""
    repo = repo_of(ctx, Action.WRITE_REPO)
    b = ctx.json_body()
    p, res = ctx.catalog.pulls.merge(repo, ctx.params["pull_request"], strategy=b.get("strategy"),
                                     squash=bool(b.get("squash_merge")), committer=_user(ctx))
    return json_response(200, {"reference": res.commit_id, "summary": {"changes": res.changes}, "pull_request": pr_json(p)})


@operation("GET", "/repositories/{repository}/pulls/{pull_request}/comments", "listPullRequestComments", tag=TAG,
           summary="comments on a pull request, oldest first (lakemount extension)", response="PullRequestCommentList",
           params=(Param("after", description="id of the previous page's last comment"), AMOUNT))
def list_comments(ctx: Ctx) -> Response:
    """A page of the comments on a pull request (lakemount extension): read a page at a time, since a pull
    request may hold ``pulls.max_comments`` comments of up to 64 KiB each; 400 for a bad ``after``."""
    repo = repo_of(ctx, Action.READ_REPO)
    after = ctx.q("after") or "0"
    if not after.isascii() or not after.isdigit() or len(after) > 18:
        raise bad_request("after must be a comment id")
    n = ctx.page_size()
    found = ctx.catalog.pulls.comments(repo, ctx.params["pull_request"], int(after), n + 1)
    return json_response(200, paginate(found, n, lambda c: str(c.id), comment_json))


@operation("POST", "/repositories/{repository}/pulls/{pull_request}/comments", "createPullRequestComment", tag=TAG,
           summary="comment on a pull request (lakemount extension)", body="PullRequestCommentCreation",
           response="PullRequestComment", status=201, errors=(400, 401, 403, 404))
def create_comment(ctx: Ctx) -> Response:
    """Comment on a pull request (lakemount extension)."""
    repo = repo_of(ctx, Action.WRITE_REPO)
    c = ctx.catalog.pulls.comment(repo, ctx.params["pull_request"], ctx.json_body()["body"], author=_user(ctx))
    return json_response(201, comment_json(c))


@operation("POST", "/repositories/{repository}/pulls/{pull_request}/approvals", "approvePullRequest", tag=TAG,
           summary="approve a pull request as the caller (lakemount extension)", status=204, errors=(400, 401, 403, 404, 412))
def approve(ctx: Ctx) -> Response:
    """Approve a pull request as the caller (lakemount extension)."""
    repo = repo_of(ctx, Action.WRITE_REPO)
    ctx.catalog.pulls.approve(repo, ctx.params["pull_request"], user=_user(ctx))
    return empty(204)
