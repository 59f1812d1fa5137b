"""Objects: stat, get (with Range), head, upload (raw or form), delete one or many, list, copy.

Object paths are S3-like keys with the restrictions every lakemount front end
shares (they must also be paths in the mount): not empty, no leading ``/``,
no NUL, no ``.`` or ``..`` segment; anything else is a 400.
"""

from __future__ import annotations

import time
from typing import Any, Final

from lakemount.api.context import INERT_HEADERS, Ctx, empty, json_response, repo_of
from lakemount.api.errors import ApiError, bad_request
from lakemount.api.models import object_json
from lakemount.api.pagination import page
from lakemount.api.routing import PAGINATION, Param, operation
from lakemount.api.upload import receive_object
from lakemount.audit.context import note
from lakemount.auth.policies import Action
from lakemount.catalog.catalog import MAX_KEY_BYTES, encode_new_path
from lakemount.catalog.model import has_data, object_view, upload_entry
from lakemount.catalog.paths import dot_segment_problem
from lakemount.errors import ObjectNotFound
from lakemount.serving.bodies import read_body
from lakemount.serving.http import Response
from lakemount.serving.metadata import metadata_from_headers, metadata_headers, user_metadata
from lakemount.serving.ranges import RangeNotSatisfiable, http_date, parse_range

TAG = "objects"
META_HEADER: Final = "x-lakefs-meta-"
MAX_DELETE: Final = 1000
PATH = Param("path", required=True, description="the object's path")
PRESIGN = Param("presign", "boolean", description="physical addresses as presigned GET URLs (S3 block store); "
                "getObject answers 302 to one")


def check_path(path: str) -> str:
    """``path`` if it is a valid object path; raises ``ApiError`` 400."""
    if not path:
        raise bad_request("empty object path")
    if "\x00" in path:
        raise bad_request("object path contains NUL")
    if path.startswith("/"):
        raise bad_request("object path must not start with '/'")
    if dot_segment_problem(path) is not None:  # the catalog's key rule: every front end refuses these
        raise bad_request("object path must not contain '.' or '..' segments")
    if len(path.encode("utf-8", "surrogateescape")) > MAX_KEY_BYTES:
        raise bad_request(f"object path longer than {MAX_KEY_BYTES} bytes")
    return path


def _presigning(ctx: Ctx, repo_rec: Any) -> bool:
    """Whether the request asked for presigned URLs; 400 if it did and ``repo_rec``'s block store cannot give them."""
    if not ctx.q_bool("presign"):
        return False
    if not ctx.catalog.can_presign(repo_rec):
        scheme = repo_rec.storage_namespace.split("://", 1)[0]
        raise bad_request(f"presigned URLs are not supported for repository {repo_rec.name}: its {scheme}:// block "
                          "store does not hand them out (read through the API with presign=false)")
    return True


def _has_data(entry: Any) -> bool:
    return entry.size != 0 and bool(entry.address) and has_data(entry)


def _user_meta(entry: Any) -> list[tuple[str, str]]:
    """User metadata as the object view shows it (a symlink's target included)."""
    return user_metadata(object_view(entry).metadata)


def _resolve(ctx: Ctx, repo: str, path: str | None = None) -> Any:
    """The request's ref, resolved once (the audit trail records the commit it named, and ``path``: the edge need
    not read the query again for it)."""
    resolved = ctx.catalog.resolve(repo, ctx.params["ref"])
    note(commit=resolved.commit_id, path=path)
    return resolved


def _stats(ctx: Ctx, repo_rec: Any, path: str, entry: Any) -> dict[str, Any]:
    out = object_json(ctx.catalog, repo_rec, path, entry)
    out["metadata"] = dict(_user_meta(entry))
    return out


@operation("GET", "/repositories/{repository}/refs/{ref}/objects/stat", "statObject", tag=TAG,
           summary="an object's metadata", params=(PATH, Param("user_metadata", "boolean"), PRESIGN),
           response="ObjectStats")
def stat_object(ctx: Ctx) -> Response:
    """statObject: an object's ``ObjectStats`` with its user metadata unless user_metadata=false (presign: its address a presigned GET URL);
    400 for a bad path or presign on a store that cannot, 404 if absent."""
    repo = repo_of(ctx, Action.READ_REPO)
    repo_rec = ctx.catalog.repository(repo)
    presign = _presigning(ctx, repo_rec)
    path = check_path(ctx.q_required("path"))
    entry = ctx.catalog.stat(repo, _resolve(ctx, repo, path), path)  # _resolve: the audit trail notes commit and path
    out = _stats(ctx, repo_rec, path, entry)
    if not ctx.q_bool("user_metadata", True):  # as lakeFS: asked not to, an empty map
        out["metadata"] = {}
    if presign and _has_data(entry):
        url, expiry = ctx.catalog.presign_read(repo_rec, entry)
        out["physical_address"], out["physical_address_expiry"] = url, int(expiry)
    return json_response(200, out)


def _object_headers(entry: Any) -> list[tuple[str, str]]:
    view = object_view(entry)
    headers = [
        ("Content-Type", view.content_type or "application/octet-stream"),
        ("ETag", f'"{view.etag}"'),
        ("Last-Modified", http_date(entry.mtime_ns)),
        ("Accept-Ranges", "bytes"),
    ]
    headers += metadata_headers(view.metadata, META_HEADER)  # the gateway's mapping (serving/metadata.py)
    headers += INERT_HEADERS  # an object stored as text/html, opened from its download link, runs nothing
    return headers


def _read(ctx: Ctx, *, with_body: bool) -> Response:
    repo = repo_of(ctx, Action.READ_REPO)
    repo_rec = ctx.catalog.repository(repo)
    presign = with_body and _presigning(ctx, repo_rec)
    path = check_path(ctx.q_required("path"))
    # The ref and the entry in one step: on a branch, one ref-store statement (Catalog.lookup).
    resolved, entry = ctx.catalog.lookup(repo_rec, ctx.params["ref"], path)
    note(commit=resolved.commit_id, path=path)
    if entry is None:
        raise ObjectNotFound(f"{repo}/{resolved.expr}/{path}")
    if presign and _has_data(entry):
        # As lakeFS: the client follows the redirect to the block store, Range and all.
        url, _expiry = ctx.catalog.presign_read(repo_rec, entry)
        return Response(302, [("Location", url), ("Cache-Control", "no-store")], b"")
    headers = _object_headers(entry)
    inm = ctx.request.header("if-none-match")
    view = object_view(entry)
    if with_body and inm is not None and inm.strip() in (f'"{view.etag}"', view.etag, "*"):
        return Response(304, headers[1:3], b"")
    size = view.size  # directory markers and symlinks have no data (the one object view, as in the gateway)
    try:
        rng = parse_range(ctx.request.header("range"), size)
    except RangeNotSatisfiable:
        raise ApiError(416, "requested range not satisfiable", (("Content-Range", f"bytes */{size}"),)) from None
    start, length = (0, size) if rng is None else rng
    status = 200 if rng is None else 206
    if rng is not None:
        headers.append(("Content-Range", f"bytes {start}-{start + length - 1}/{size}"))
    if not with_body:
        headers.append(("Content-Length", str(length)))
        return Response(status, headers, b"")
    if length == 0:
        return Response(status, headers, b"")
    body, close = read_body(ctx.catalog, repo_rec, entry, start, length)
    return Response(status, headers, body, length=length, close=close)


@operation("GET", "/repositories/{repository}/refs/{ref}/objects", "getObject", tag=TAG,
           summary="an object's data (Range supported)", content_type="application/octet-stream",
           params=(PATH, PRESIGN, Param("Range", where="header"), Param("If-None-Match", where="header")),
           errors=(400, 401, 404, 416))
def get_object(ctx: Ctx) -> Response:
    """getObject: an object's data, honouring Range (206/416) and If-None-Match (304); 404 if absent;
    presign: 302 to a presigned GET URL of it (objects without data are answered here)."""
    return _read(ctx, with_body=True)


@operation("HEAD", "/repositories/{repository}/refs/{ref}/objects", "headObject", tag=TAG,
           summary="an object's headers", params=(PATH, Param("Range", where="header")), errors=(400, 401, 404, 416),
           content_type="")
def head_object(ctx: Ctx) -> Response:
    """headObject: getObject's status and headers without the body."""
    return _read(ctx, with_body=False)


@operation("POST", "/repositories/{repository}/branches/{branch}/objects", "uploadObject", tag=TAG,
           summary="upload an object (raw body, or multipart/form-data with a 'content' field)",
           params=(PATH, Param("storageClass"), Param("force", "boolean"), Param("If-None-Match", where="header")),
           body="raw", response="ObjectStats", status=201, errors=(400, 401, 403, 404, 412, 413))
def upload_object(ctx: Ctx) -> Response:
    """uploadObject: stage the body (raw or multipart ``content``) as the object at ``path`` (201, its stats); 412 if If-None-Match: * and it exists, 403 on a protected branch."""
    repo = repo_of(ctx, Action.WRITE_REPO)
    branch = ctx.params["branch"]
    path = check_path(ctx.q_required("path"))
    encode_new_path(path)  # the catalog's key rule, before the body is read
    cat = ctx.catalog
    repo_rec = cat.repository(repo)
    note(commit=cat.get_branch(repo, branch).commit_id)
    # Refused before the body is read: a tag or a protected branch takes no upload (the staging would refuse it after).
    cat.writable_branch(repo, branch)
    exclusive = (ctx.request.header("if-none-match") or "").strip() == "*"
    meta = metadata_from_headers(ctx.request, META_HEADER)
    stored = receive_object(ctx.request, cat, repo_rec)
    note(nbytes=stored.size)
    entry = upload_entry(stored.address, stored.size, stored.md5, path, stored.content_type, meta)
    entry = cat.stage_upload(repo, branch, path, entry, if_absent=exclusive)
    return json_response(201, _stats(ctx, repo_rec, path, entry))


@operation("DELETE", "/repositories/{repository}/branches/{branch}/objects", "deleteObject", tag=TAG,
           summary="delete an object", params=(PATH, Param("force", "boolean")), status=204,
           errors=(400, 401, 403, 404))
def delete_object(ctx: Ctx) -> Response:
    """deleteObject: stage the removal of the object at ``path`` (204); 403 without WriteRepo, 404 if absent."""
    repo = repo_of(ctx, Action.WRITE_REPO)
    ctx.catalog.delete(repo, ctx.params["branch"], check_path(ctx.q_required("path")))
    return empty(204)


@operation("POST", "/repositories/{repository}/branches/{branch}/objects/delete", "deleteObjects", tag=TAG,
           summary="delete up to 1000 objects at once (missing ones are not errors)", body="PathList",
           params=(Param("force", "boolean"),), response="ObjectErrorList", errors=(400, 401, 403, 404))
def delete_objects(ctx: Ctx) -> Response:
    """deleteObjects: stage the removal of up to 1000 paths; bad paths are reported per path, missing ones ignored; 400 over the limit."""
    repo = repo_of(ctx, Action.WRITE_REPO)
    branch = ctx.params["branch"]
    paths = ctx.json_body()["paths"]
    if len(paths) > MAX_DELETE:
        raise bad_request(f"at most {MAX_DELETE} paths per request")
    errors: list[dict[str, Any]] = []
    doomed: list[tuple[str, None]] = []
    ctx.catalog.get_branch(repo, branch)
    for p in paths:
        try:
            check_path(p)
        except ApiError as e:
            errors.append({"status_code": e.status, "message": e.message, "path": p})
            continue
        if ctx.catalog.get_optional(repo, branch, p) is not None:
            doomed.append((p, None))
    if doomed:
        ctx.catalog.apply(repo, branch, doomed)
    return json_response(200, {"errors": errors})


@operation("GET", "/repositories/{repository}/refs/{ref}/objects/ls", "listObjects", tag=TAG,
           summary="objects under a prefix, in path order; with a delimiter, common prefixes too",
           params=(*PAGINATION, Param("delimiter"), Param("user_metadata", "boolean"), PRESIGN),
           response="ObjectStatsList")
def list_objects(ctx: Ctx) -> Response:
    """listObjects: a page of ``amount`` objects under ``prefix`` after ``after``, with common prefixes when ``delimiter`` is given;
    presign: physical addresses as presigned GET URLs (400 on a store that cannot)."""
    repo = repo_of(ctx, Action.READ_REPO)
    cat = ctx.catalog
    repo_rec = cat.repository(repo)
    presign = _presigning(ctx, repo_rec)
    n = ctx.page_size()
    with_meta = ctx.q_bool("user_metadata", True)
    items = list(cat.list(repo, _resolve(ctx, repo), ctx.q("prefix") or "", delimiter=ctx.q("delimiter") or "",
                          after=ctx.q("after") or "", limit=n + 1))
    more = len(items) > n
    items = items[:n]
    # Rendered inline: a 1,000-entry page is the API's hottest loop.
    ns = repo_rec.storage_namespace.rstrip("/") + "/"
    results: list[dict[str, Any]] = []
    append = results.append
    for path, e in items:
        if e is None:
            append({"path": path, "path_type": "common_prefix", "physical_address": "", "checksum": "", "mtime": 0})
            continue
        addr = e.address
        view = object_view(e)
        append({
            "path": path, "path_type": "object",
            "physical_address": "" if not view.has_data else addr if "://" in addr else ns + addr,
            "checksum": view.etag, "size_bytes": view.size, "mtime": e.mtime_ns // 1_000_000_000,
            "metadata": dict(_user_meta(e)) if with_meta and view.metadata else {},
            "content_type": view.content_type or "application/octet-stream",
        })
        if presign and _has_data(e):
            url, expiry = cat.presign_read(repo_rec, e)
            results[-1]["physical_address"], results[-1]["physical_address_expiry"] = url, int(expiry)
    return json_response(200, page(results, more, items[-1].path if more else ""))


@operation("POST", "/repositories/{repository}/branches/{branch}/objects/copy", "copyObject", tag=TAG,
           summary="copy an object (no data is copied: both entries share it)", body="ObjectCopyCreation",
           params=(Param("dest_path", required=True),), response="ObjectStats", status=201,
           errors=(400, 401, 403, 404))
def copy_object(ctx: Ctx) -> Response:
    """copyObject: stage ``dest_path`` as a copy of ``src_path`` at ``src_ref`` sharing its data (201); 404 if the source is absent."""
    repo = repo_of(ctx, Action.WRITE_REPO)
    branch = ctx.params["branch"]
    body = ctx.json_body()
    dest = check_path(ctx.q_required("dest_path"))
    src = check_path(body["src_path"])
    src_ref = body.get("src_ref") or branch
    try:
        entry = ctx.catalog.stat(repo, src_ref, src)
    except ObjectNotFound:
        raise ApiError(404, f"source object not found: {src_ref}/{src}") from None
    new = entry._replace(mtime_ns=time.time_ns())
    ctx.catalog.put_entry(repo, branch, dest, new)
    return json_response(201, _stats(ctx, ctx.catalog.repository(repo), dest, new))
