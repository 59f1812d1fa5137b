"""ListObjectVersions: the current version of each key (version id ``null``).

History lives in commits, not in S3 versions; tools that list versions to
find what exists (some sync and backup tools do) get the current state.
"""

from __future__ import annotations

from lakemount.auth.policies import Action
from lakemount.catalog.model import object_view
from lakemount.gateway.context import Ctx
from lakemount.gateway.listing import list_page, parse_max
from lakemount.gateway.objects import last_modified
from lakemount.gateway.xml import Owner, VersionRecord, render_list_versions
from lakemount.serving.http import Response


def handle(ctx: Ctx) -> Response:
    """ListObjectVersions: each object as its single ``null`` version (refs, not S3 versions, hold history)."""
    target = ctx.target()
    ctx.require(Action.READ_REPO, target)
    q = ctx.query
    prefix = q.get("prefix", "")
    delimiter = q.get("delimiter", "")
    key_marker = q.get("key-marker", "")
    max_keys = parse_max(q.get("max-keys"))
    page = list_page(ctx.services.catalog, target, prefix, delimiter, key_marker, max_keys, kept=ctx.services.kept)
    owner = Owner(ctx.user, ctx.user)
    versions: list[VersionRecord] = []
    prefixes: list[str] = []
    for key, entry in page.items:
        if entry is None:
            prefixes.append(key)
            continue
        view = object_view(entry)
        versions.append(VersionRecord(key, "null", True, last_modified(entry), view.etag, view.size, owner=owner))
    body = render_list_versions(
        bucket=target.bucket,
        prefix=prefix,
        key_marker=key_marker,
        version_id_marker=q.get("version-id-marker", ""),
        max_keys=max_keys,
        delimiter=delimiter or None,
        is_truncated=page.truncated,
        versions=versions,
        common_prefixes=prefixes,
        next_key_marker=page.last,
        next_version_id_marker="null",
        encoding_type=q.get("encoding-type"),
    )
    return Response(200, [("Content-Type", "application/xml")], body)
