"""Repositories: create (with a storage namespace), list, get, delete, metadata, and what the caller may do in one."""

from __future__ import annotations

from lakemount.api.context import Ctx, empty, json_response
from lakemount.api.errors import bad_request
from lakemount.api.models import repository_json
from lakemount.api.pagination import after_filter, paginate
from lakemount.api.routing import PAGINATION, Param, operation
from lakemount.auth.policies import Action
from lakemount.serving.http import Response

TAG = "repositories"
# What getRepositoryPermissions answers about: the actions of lakemount's policies that speak of one repository.
REPOSITORY_ACTIONS = (Action.READ_REPO, Action.WRITE_REPO, Action.DELETE_REPO, Action.IMPORT_FROM_STORAGE)


@operation("GET", "/repositories", "listRepositories", tag=TAG, summary="repositories the caller may read",
           params=(*PAGINATION, Param("search", description="only repositories whose name contains this")),
           response="RepositoryList")
def list_repositories(ctx: Ctx) -> Response:
    """listRepositories: a page of the repositories the caller may read, filtered by ``search``/``prefix``/``after``."""
    search = ctx.q("search") or ""
    repos = [r for r in ctx.catalog.list_repositories() if search in r.name and ctx.allowed(Action.READ_REPO, r.name)]
    items = after_filter(repos, lambda r: r.name, prefix=ctx.q("prefix") or "", after=ctx.q("after") or "")
    return json_response(200, paginate(items, ctx.page_size(), lambda r: r.name, repository_json))


@operation("POST", "/repositories", "createRepository", tag=TAG, summary="create a repository",
           params=(Param("bare", "boolean", description="create without an initial commit (refused: every repository starts with one)"),),
           body="RepositoryCreation", response="Repository", status=201, errors=(400, 401, 403, 409))
def create_repository(ctx: Ctx) -> Response:
    """createRepository: create a repository (201), with ``sample_data`` holding a sample dataset in one commit; 400 for
    read_only, bare or a ``storage_id`` other than the one store's (""), 409 if it exists, 403 without CreateRepo."""
    body = ctx.json_body()
    name = body["name"]
    ctx.require(Action.CREATE_REPO, name)
    if body.get("storage_id"):
        # One block store per server, whose id is "" (the storage config's blockstore_id), as lakeFS's single store.
        raise bad_request(f"unknown storage_id {body['storage_id'][:64]!r}: this server has one store, whose id is ''")
    if body.get("read_only"):
        raise bad_request("read-only repositories are not supported")
    if ctx.q_bool("bare"):
        raise bad_request("bare repositories are not supported")
    ns = body["storage_namespace"]
    if ns and not ns.startswith(("s3://", "local:///")):
        # What the storage config advertises (blockstore_namespace_ValidityRegex); an in-memory
        # store would be one worker's alone.
        raise bad_request("storage_namespace must be s3://bucket/prefix or local:///absolute/path")
    repo = ctx.catalog.create_repository(name, ns or None, body.get("default_branch") or "main")
    if body.get("sample_data"):
        ctx.catalog.add_samples(name, committer=ctx.user or "lakemount")
    return json_response(201, repository_json(repo))


@operation("GET", "/repositories/{repository}", "getRepository", tag=TAG, summary="a repository", response="Repository")
def get_repository(ctx: Ctx) -> Response:
    """getRepository: one repository; 403 without ReadRepo, 404 if unknown."""
    name = ctx.params["repository"]
    ctx.require(Action.READ_REPO, name)
    return json_response(200, repository_json(ctx.catalog.repository(name)))


@operation("DELETE", "/repositories/{repository}", "deleteRepository", tag=TAG, summary="delete a repository",
           params=(Param("force", "boolean"),), status=204, errors=(400, 401, 403, 404))
def delete_repository(ctx: Ctx) -> Response:
    """deleteRepository: delete a repository (204); 403 without DeleteRepo, 404 if unknown."""
    name = ctx.params["repository"]
    ctx.require(Action.DELETE_REPO, name)
    ctx.catalog.delete_repository(name)
    return empty(204)


@operation("GET", "/repositories/{repository}/metadata", "getRepositoryMetadata", tag=TAG,
           summary="a repository's metadata (lakemount keeps none: always empty)", response="RepositoryMetadata")
def get_repository_metadata(ctx: Ctx) -> Response:
    """getRepositoryMetadata: always ``{}`` (lakemount keeps none) once the repository exists (404 if not)."""
    name = ctx.params["repository"]
    ctx.require(Action.READ_REPO, name)
    ctx.catalog.repository(name)
    return json_response(200, {})


@operation("GET", "/repositories/{repository}/permissions", "getRepositoryPermissions", tag=TAG,
           summary="which repository actions the caller may do here (lakemount extension: the web UI disables "
                   "the controls of actions it may not)", response="RepositoryPermissions")
def get_repository_permissions(ctx: Ctx) -> Response:
    """getRepositoryPermissions: ``{user, repository, actions: {ReadRepo, WriteRepo, DeleteRepo, ImportFromStorage: bool}}`` as the
    caller's policies decide them, the same decisions every operation makes; 403 without ReadRepo, 404 if unknown."""
    name = ctx.params["repository"]
    ctx.require(Action.READ_REPO, name)
    ctx.catalog.repository(name)
    return json_response(200, {"user": str(ctx.user), "repository": name,
                               "actions": {a.value: ctx.allowed(a, name) for a in REPOSITORY_ACTIONS}})
