"""Staging by address: hand out an address to upload to (with a presigned PUT URL), then link it to a path.

lakeFS's ``getPhysicalAddress`` and ``linkPhysicalAddress``, what the
``lakefs`` SDK's ``ObjectWriter`` does with ``pre_sign=True``: the client
PUTs the bytes straight to the block store, then links the address, which
stages the entry like ``uploadObject`` would (write permission, protected
branches refused, ``If-None-Match: *``).  The address is signed for one
repository, branch and path and expires; the catalog (``catalog/uploads.py``)
checks it, and that the object is there with the stated size and ETag,
before anything is staged.
"""

from __future__ import annotations

from typing import Any

from lakemount.api.context import Ctx, json_response, repo_of
from lakemount.api.errors import ApiError, bad_request
from lakemount.api.models import object_json
from lakemount.api.operations.objects import PATH, check_path
from lakemount.api.routing import Param, operation
from lakemount.audit.context import note
from lakemount.auth.policies import Action
from lakemount.catalog.model import upload_entry
from lakemount.serving.http import Response

TAG = "staging"
MAX_USER_METADATA = 2048
MAX_MTIME = (1 << 63) // 1_000_000_000 - 1  # seconds whose nanoseconds still fit the entry's int64


@operation("GET", "/repositories/{repository}/branches/{branch}/staging/backing", "getPhysicalAddress", tag=TAG,
           summary="an address in the storage namespace to upload an object to (presign=true: with a presigned PUT URL)",
           params=(PATH, Param("presign", "boolean", description="also return a presigned PUT URL (S3 block store)")),
           response="StagingLocation", errors=(400, 401, 403, 404))
def get_physical_address(ctx: Ctx) -> Response:
    """getPhysicalAddress: a fresh signed address for ``path`` on the branch; 400 for presign on a store that cannot, 403 on a protected branch."""
    repo = repo_of(ctx, Action.WRITE_REPO)
    path = check_path(ctx.q_required("path"))
    loc = ctx.catalog.issue_link_address(repo, ctx.params["branch"], path, presigned=ctx.q_bool("presign"))
    out: dict[str, Any] = {"physical_address": loc.physical_address, "presigned_url": loc.presigned_url}
    if loc.presigned_url_expiry is not None:
        out["presigned_url_expiry"] = loc.presigned_url_expiry
    return json_response(200, out)


def _user_metadata(body: dict[str, Any]) -> list[tuple[str, str]]:
    meta = body.get("user_metadata") or {}
    if sum(len(k) + len(v) for k, v in meta.items()) > MAX_USER_METADATA:
        raise bad_request(f"user metadata larger than {MAX_USER_METADATA} bytes")
    return sorted(meta.items())


@operation("PUT", "/repositories/{repository}/branches/{branch}/staging/backing", "linkPhysicalAddress", tag=TAG,
           summary="stage an object uploaded to an address getPhysicalAddress handed out",
           params=(PATH, Param("If-None-Match", where="header"), Param("If-Match", where="header")),
           body="StagingMetadata", response="ObjectStats", errors=(400, 401, 403, 404, 412))
def link_physical_address(ctx: Ctx) -> Response:
    """linkPhysicalAddress: stage ``path`` as the uploaded object (200, its stats); 400 for an address not handed out for
    this repository, branch and path, an expired one, or a wrong size or checksum; 404 if nothing was uploaded; 412 on a failed condition."""
    repo = repo_of(ctx, Action.WRITE_REPO)
    branch = ctx.params["branch"]
    path = check_path(ctx.q_required("path"))
    body = ctx.json_body()
    cat = ctx.catalog
    cat.writable_branch(repo, branch)
    address = body["staging"].get("physical_address") or ""
    if not address:
        raise bad_request("staging.physical_address is required")
    meta = _user_metadata(body)
    mtime = body.get("mtime")
    if mtime is not None and not 0 <= mtime <= MAX_MTIME:
        raise bad_request(f"mtime out of range: {mtime}")
    linked = cat.verify_link(repo, branch, path, address, size=body["size_bytes"], checksum=body["checksum"])
    note(commit=cat.get_branch(repo, branch).commit_id, nbytes=linked.size)  # the audit record's (a write of linked.size)
    inm = (ctx.request.header("if-none-match") or "").strip()
    im = (ctx.request.header("if-match") or "").strip()
    if inm and inm != "*":
        raise bad_request("If-None-Match supports only '*'")
    if im:
        current = cat.get_optional(repo, branch, path)
        if current is None or im.strip('"') != current.etag:
            raise ApiError(412, f"If-Match does not match the object at {path}")
    entry = upload_entry(linked.address, linked.size, linked.etag, path,
                       body.get("content_type") or "application/octet-stream", meta)
    if mtime is not None:  # lakeFS takes the client's time as the object's (the SDK sends none)
        entry = entry._replace(mtime_ns=mtime * 1_000_000_000)
    entry = cat.stage_upload(repo, branch, path, entry, if_absent=inm == "*", timed=mtime is not None)
    out = object_json(cat, cat.repository(repo), path, entry)
    out["metadata"] = dict(meta)
    return json_response(200, out)
