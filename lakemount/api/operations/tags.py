"""Tags: list, create, get, delete."""

from __future__ import annotations

from lakemount.api.context import Ctx, empty, json_response, repo_of
from lakemount.api.errors import not_found
from lakemount.api.models import ref_json
from lakemount.api.pagination import after_filter, paginate
from lakemount.api.routing import PAGINATION, Param, operation
from lakemount.auth.policies import Action
from lakemount.catalog.model import Tag
from lakemount.serving.http import Response

TAG = "tags"


@operation("GET", "/repositories/{repository}/tags", "listTags", tag=TAG, summary="tags of a repository",
           params=PAGINATION, response="RefList")
def list_tags(ctx: Ctx) -> Response:
    """listTags: a page of tags by name after ``after``/under ``prefix``; 403 without ReadRepo."""
    repo = repo_of(ctx, Action.READ_REPO)
    items = after_filter(ctx.catalog.list_tags(repo), lambda t: t.name, prefix=ctx.q("prefix") or "", after=ctx.q("after") or "")
    return json_response(200, paginate(items, ctx.page_size(), lambda t: t.name, lambda t: ref_json(t.name, t.commit_id)))


@operation("POST", "/repositories/{repository}/tags", "createTag", tag=TAG, summary="tag a ref's commit",
           body="TagCreation", response="Ref", status=201, errors=(400, 401, 403, 404, 409))
def create_tag(ctx: Ctx) -> Response:
    """createTag: tag the commit ``ref`` names as ``id`` (201); 404 unknown ref, 409 if the tag exists."""
    repo = repo_of(ctx, Action.WRITE_REPO)
    body = ctx.json_body()
    t = ctx.catalog.create_tag(repo, body["id"], body["ref"])
    return json_response(201, ref_json(t.name, t.commit_id))


def _find(ctx: Ctx, repo: str, name: str) -> Tag:
    for t in ctx.catalog.list_tags(repo):
        if t.name == name:
            return t
    raise not_found(f"tag not found: {repo}/{name}")


@operation("GET", "/repositories/{repository}/tags/{tag}", "getTag", tag=TAG, summary="a tag", response="Ref")
def get_tag(ctx: Ctx) -> Response:
    """getTag: one tag and its commit; 404 if unknown."""
    repo = repo_of(ctx, Action.READ_REPO)
    t = _find(ctx, repo, ctx.params["tag"])
    return json_response(200, ref_json(t.name, t.commit_id))


@operation("DELETE", "/repositories/{repository}/tags/{tag}", "deleteTag", tag=TAG, summary="delete a tag",
           params=(Param("force", "boolean"),), status=204, errors=(400, 401, 403, 404))
def delete_tag(ctx: Ctx) -> Response:
    """deleteTag: delete a tag (204); 403 without WriteRepo, 404 if unknown."""
    repo = repo_of(ctx, Action.WRITE_REPO)
    _find(ctx, repo, ctx.params["tag"])
    ctx.catalog.delete_tag(repo, ctx.params["tag"])
    return empty(204)
