"""DeleteObjects: up to 1000 keys; the deletions on each branch are staged as one transaction.

Only keys that hold an object are staged as deletions (a deletion of nothing would leave a record every later
listing steps over: S3A deletes every parent's directory marker after each write, most of them absent).  Each key
is looked up as a GET looks it up (``Catalog.lookup`` with the repository's record, read once for the request):
one ref-store statement a key on a branch this process has read, where a resolution of the branch for each key
(``Catalog.get_optional`` by name) cost three (stop 57).
"""

from __future__ import annotations

from collections import defaultdict

from lakemount.auth.policies import Action
from lakemount.catalog.model import Repository
from lakemount.errors import LakeMountError
from lakemount.gateway.context import Ctx
from lakemount.gateway.errors import S3Error, from_exception
from lakemount.gateway.xml import MAX_BODY_BYTES, DeletedRecord, DeleteErrorRecord, parse_delete, render_delete_result
from lakemount.serving.http import Response


def handle(ctx: Ctx) -> Response:
    """DeleteObjects: remove each listed key; per-key failures are reported in the result, not raised."""
    target = ctx.target()
    ctx.require(Action.WRITE_REPO, target)
    request = parse_delete(ctx.read_body(MAX_BODY_BYTES))
    cat = ctx.services.catalog
    repo = target.repo.name
    deleted: list[DeletedRecord] = []
    errors: list[DeleteErrorRecord] = []
    by_branch: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for obj in request.objects:
        if not target.flat and obj.key.endswith("/") and obj.key.count("/") == 1:
            # "<branch>/" is the branch root, which Hadoop deletes as a parent
            # directory marker: there is nothing to delete.
            deleted.append(DeletedRecord(obj.key))
            continue
        try:
            branch, path = ctx.write_path(target, obj.key)
            by_branch[branch].append((obj.key, path))
        except (S3Error, LakeMountError) as exc:
            err = from_exception(exc)
            errors.append(DeleteErrorRecord(obj.key, err.code, err.message, obj.version_id))
    record: Repository | None = None
    for branch, items in by_branch.items():
        try:
            record = record or ctx.services.kept.repository(repo)  # as reads take it: never older than notices say
            present = [(key, path) for key, path in items if cat.lookup(record, branch, path)[1] is not None]
            if present:  # nothing to stage otherwise: the lookups found the branch, ``write_path`` checked its rules
                cat.apply(repo, branch, [(path, None) for _, path in present])
        except LakeMountError as exc:
            err = from_exception(exc)
            errors += [DeleteErrorRecord(key, err.code, err.message) for key, _ in items]
            continue
        deleted += [DeletedRecord(key) for key, _ in items]
    return Response(200, [("Content-Type", "application/xml")], render_delete_result(deleted, errors, quiet=request.quiet))
