"""``POST /repositories/{repository}/refs/{ref}/blame``: the commit that last changed each path of a page.

The web UI's "last change" column of a listing and line of an object page (lakemount's own operation).
A page of up to 1000 paths is one request: a listing's ``dir/`` prefixes are blamed on the last commit
that changed anything under them.  The walk is the catalog's (``catalog/blame.py``): first-parent, at most
``depth`` commits, answers cached by (commit, path).  POST because a page of paths does not fit a URL;
it changes nothing.
"""

from __future__ import annotations

from typing import Final

from lakemount.api.context import Ctx, json_response, repo_of
from lakemount.api.errors import bad_request
from lakemount.api.models import commit_json
from lakemount.api.operations.objects import check_path
from lakemount.api.routing import Param, operation
from lakemount.auth.policies import Action
from lakemount.catalog.blame import MAX_PATHS
from lakemount.serving.http import Response

DEFAULT_DEPTH: Final = 1000
MAX_DEPTH: Final = 100_000


@operation("POST", "/repositories/{repository}/refs/{ref}/blame", "blameObjects", tag="objects", body="PathList",
           params=(Param("depth", "integer", minimum=1, maximum=MAX_DEPTH,
                         description=f"commits walked back at most (default {DEFAULT_DEPTH})"),),
           response="BlameList",
           summary="the commit that last changed each of up to 1000 paths (a 'dir/' path: anything under it)")
def blame_objects(ctx: Ctx) -> Response:
    """blameObjects: per path, in the order given, the last commit that changed it (null beyond ``depth`` or when
    no commit has it) and whether the branch has it changed uncommitted; 400 for more than 1000 paths or a bad path."""
    repo = repo_of(ctx, Action.READ_REPO)
    paths = ctx.json_body()["paths"]
    if len(paths) > MAX_PATHS:
        raise bad_request(f"at most {MAX_PATHS} paths per request")
    for p in paths:
        check_path(p)
    depth = ctx.q_int("depth", DEFAULT_DEPTH)
    assert depth is not None
    blamed = ctx.catalog.blame(repo, ctx.params["ref"], paths, depth=depth)
    return json_response(200, {"results": [
        {"path": b.path, "commit": None if b.commit is None else commit_json(b.commit), "uncommitted": b.uncommitted,
         "beyond_depth": b.beyond_depth} for b in blamed]})
