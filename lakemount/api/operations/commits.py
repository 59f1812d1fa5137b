"""Commits: one commit by id (any ref expression names its commit, as in lakeFS)."""

from __future__ import annotations

from lakemount.api.context import Ctx, json_response, repo_of
from lakemount.api.models import commit_json
from lakemount.api.routing import operation
from lakemount.auth.policies import Action
from lakemount.serving.http import Response


@operation("GET", "/repositories/{repository}/commits/{commitId}", "getCommit", tag="commits",
           summary="a commit (by id, or the commit a ref names)", response="Commit")
def get_commit(ctx: Ctx) -> Response:
    """getCommit: the commit a commit id or ref names; 403 without ReadRepo, 404 if none."""
    repo = repo_of(ctx, Action.READ_REPO)
    return json_response(200, commit_json(ctx.catalog.commit_of(repo, ctx.params["commitId"])))
