"""Branches: create, list, get, delete, reset, revert, cherry-pick, commit, and the diff of uncommitted changes."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from lakemount.api.context import INERT_HEADERS, Ctx, empty, json_response, repo_of
from lakemount.api.errors import bad_request
from lakemount.api.models import commit_json, diff_json, ref_json
from lakemount.api.pagination import after_filter, paginate
from lakemount.api.routing import PAGINATION, Param, operation
from lakemount.auth.policies import Action
from lakemount.catalog.model import Difference
from lakemount.serving.http import Response

TAG = "branches"
DELIMITER = Param("delimiter", description="group paths by this delimiter (only '/' or none)")


@operation("GET", "/repositories/{repository}/branches", "listBranches", tag=TAG, summary="branches of a repository",
           params=(*PAGINATION, Param("show_hidden", "boolean")), response="RefList")
def list_branches(ctx: Ctx) -> Response:
    """listBranches: branches by name after ``after``/under ``prefix``, a page of ``amount``; 403 without ReadRepo."""
    repo = repo_of(ctx, Action.READ_REPO)
    shown = ctx.catalog.list_branches(repo, show_hidden=ctx.q_bool("show_hidden"))
    items = after_filter(shown, lambda b: b.name, prefix=ctx.q("prefix") or "", after=ctx.q("after") or "")
    return json_response(200, paginate(items, ctx.page_size(), lambda b: b.name, lambda b: ref_json(b.name, b.commit_id)))


@operation("POST", "/repositories/{repository}/branches", "createBranch", tag=TAG, summary="create a branch at a ref",
           body="BranchCreation", status=201, content_type="text/html", errors=(400, 401, 403, 404, 409))
def create_branch(ctx: Ctx) -> Response:
    """createBranch: create branch ``name`` at ref ``source``, answering its commit id as text (201); 404 unknown source, 409 if it exists."""
    repo = repo_of(ctx, Action.WRITE_REPO)
    body = ctx.json_body()
    b = ctx.catalog.create_branch(repo, body["name"], body["source"], hidden=bool(body.get("hidden")))
    return Response(201, [("Content-Type", "text/html"), *INERT_HEADERS], b.commit_id.encode())  # lakeFS's type


@operation("GET", "/repositories/{repository}/branches/{branch}", "getBranch", tag=TAG, summary="a branch", response="Ref")
def get_branch(ctx: Ctx) -> Response:
    """getBranch: a branch and its head commit; 403 without ReadRepo, 404 if unknown."""
    repo = repo_of(ctx, Action.READ_REPO)
    b = ctx.catalog.get_branch(repo, ctx.params["branch"])
    return json_response(200, ref_json(b.name, b.commit_id))


@operation("DELETE", "/repositories/{repository}/branches/{branch}", "deleteBranch", tag=TAG, summary="delete a branch",
           params=(Param("force", "boolean"),), status=204, errors=(400, 401, 403, 404))
def delete_branch(ctx: Ctx) -> Response:
    """deleteBranch: delete a branch (204); 403 without WriteRepo, 404 if unknown."""
    repo = repo_of(ctx, Action.WRITE_REPO)
    ctx.catalog.delete_branch(repo, ctx.params["branch"])
    return empty(204)


@operation("PUT", "/repositories/{repository}/branches/{branch}", "resetBranch", tag=TAG,
           summary="drop uncommitted changes (all, under a prefix, or one object)", body="ResetCreation", status=204,
           errors=(400, 401, 403, 404))
def reset_branch(ctx: Ctx) -> Response:
    """resetBranch: drop uncommitted changes (all, under ``path`` as prefix, or one object) (204); 400 for an object reset without a path, 404 unknown branch."""
    repo = repo_of(ctx, Action.WRITE_REPO)
    body = ctx.json_body()
    branch = ctx.params["branch"]
    ctx.catalog.get_branch(repo, branch)
    kind = body["type"]
    if kind == "reset":
        ctx.catalog.reset(repo, branch)
    elif kind == "common_prefix":
        ctx.catalog.reset(repo, branch, prefix=body.get("path") or "")
    else:
        if not body.get("path"):
            raise bad_request("reset of an object needs its path")
        ctx.catalog.reset(repo, branch, path=body["path"])
    return empty(204)


@operation("PUT", "/repositories/{repository}/branches/{branch}/hard_reset", "hardResetBranch", tag="experimental",
           summary="point the branch at a ref (it must have no uncommitted changes)",
           params=(Param("ref", required=True, description="after the reset, the branch points at this ref's commit"),
                   Param("force", "boolean")),
           status=204, errors=(400, 401, 403, 404))
def hard_reset_branch(ctx: Ctx) -> Response:
    """hardResetBranch: move the branch's head to ``ref``'s commit (204); 400 if it has uncommitted changes (dirty
    branch), 403 on a protected branch, 404 for an unknown branch or ref."""
    repo = repo_of(ctx, Action.WRITE_REPO)
    ctx.catalog.hard_reset(repo, ctx.params["branch"], ctx.q_required("ref"), committer=ctx.user or "lakemount")
    return empty(204)


def _parent_number(n: int | None) -> int | None:
    return None if not n else n


@operation("POST", "/repositories/{repository}/branches/{branch}/revert", "revertBranch", tag=TAG,
           summary="commit the inverse of a commit's change", body="RevertCreation", status=204,
           errors=(400, 401, 403, 404, 409))
def revert_branch(ctx: Ctx) -> Response:
    """revertBranch: commit the inverse of commit ``ref``'s change on the branch (204); 400 for commit_overrides, 409 on conflict."""
    repo = repo_of(ctx, Action.WRITE_REPO)
    body = ctx.json_body()
    if body.get("commit_overrides"):
        raise bad_request("commit_overrides is not supported")
    ctx.catalog.revert(repo, ctx.params["branch"], body["ref"], parent_number=_parent_number(body.get("parent_number")),
                       committer=ctx.user or "lakemount", allow_empty=bool(body.get("allow_empty")))
    return empty(204)


@operation("POST", "/repositories/{repository}/branches/{branch}/cherry-pick", "cherryPick", tag=TAG,
           summary="commit a commit's change again on this branch", body="CherryPickCreation", response="Commit",
           status=201, errors=(400, 401, 403, 404, 409))
def cherry_pick(ctx: Ctx) -> Response:
    """cherryPick: commit ``ref``'s change again on the branch (201, the new commit); 400 for commit_overrides, 409 on conflict."""
    repo = repo_of(ctx, Action.WRITE_REPO)
    body = ctx.json_body()
    if body.get("commit_overrides"):
        raise bad_request("commit_overrides is not supported")
    c = ctx.catalog.cherry_pick(repo, ctx.params["branch"], body["ref"],
                                parent_number=_parent_number(body.get("parent_number")), committer=ctx.user or "lakemount")
    return json_response(201, commit_json(c))


@operation("POST", "/repositories/{repository}/branches/{branch}/commits", "commit", tag=TAG,
           summary="commit the branch's staged changes", body="CommitCreation", response="Commit", status=201,
           params=(Param("source_metarange", description="not supported"),), errors=(400, 401, 403, 404, 409, 412))
def commit(ctx: Ctx) -> Response:
    """commit: commit the branch's staged changes (201); 400 for an empty message, an out-of-range date or source_metarange, 412/409 from the catalog."""
    repo = repo_of(ctx, Action.WRITE_REPO)
    body = ctx.json_body()
    if ctx.q("source_metarange"):
        raise bad_request("source_metarange is not supported")
    if not body["message"]:
        raise bad_request("a commit needs a message")
    date = body.get("date")
    if date is not None and not 0 <= date < 1 << 40:
        raise bad_request("date out of range")
    from lakemount.node import settle

    settle(ctx.service.app, repo, ctx.params["branch"])  # what this node's write-back mounts hold for the branch comes first
    c = ctx.catalog.commit(
        repo, ctx.params["branch"], body["message"], committer=ctx.user or "lakemount",
        metadata=sorted((body.get("metadata") or {}).items()), allow_empty=bool(body.get("allow_empty")),
        date=float(date) if date is not None else None,
    ).commit
    return json_response(201, commit_json(c))


def diff_page(ctx: Ctx, records: Iterable[Difference], *, delimiter: str) -> Response:
    """A page of diff records (``Difference``s in key order), grouped by ``delimiter`` when given."""
    if delimiter not in ("", "/"):
        raise bad_request("delimiter must be '/' or empty")
    prefix = ctx.q("prefix") or ""
    after = ctx.q("after") or ""

    def items() -> Iterator[tuple[str, str, int | None, bool]]:
        last = None
        for rec in records:
            path = rec.key.decode("utf-8", "surrogateescape")
            if not path.startswith(prefix):
                continue
            if delimiter:
                i = path.find(delimiter, len(prefix))
                if i >= 0:
                    common = path[: i + 1]
                    if common == last or (after and common <= after):
                        continue
                    last = common
                    yield common, "changed", None, True
                    continue
            if after and path <= after:
                continue
            yield path, rec.kind, rec.size, False

    return json_response(200, paginate(items(), ctx.page_size(), lambda t: t[0],
                                       lambda t: diff_json(t[0], "prefix_changed" if t[3] else t[1], t[2], prefix=t[3])))


@operation("GET", "/repositories/{repository}/branches/{branch}/diff", "diffBranch", tag=TAG,
           summary="uncommitted changes of a branch", params=(*PAGINATION, DELIMITER), response="DiffList")
def diff_branch(ctx: Ctx) -> Response:
    """diffBranch: a page of the branch's uncommitted changes, grouped by ``delimiter``; 403 without ReadRepo."""
    repo = repo_of(ctx, Action.READ_REPO)
    records = ctx.catalog.diff_uncommitted(repo, ctx.params["branch"], prefix=ctx.q("prefix") or "")
    return diff_page(ctx, records, delimiter=ctx.q("delimiter") or "")


