"""The source side of CopyObject and UploadPartCopy: ``x-amz-copy-source`` and its data.

A copy never copies data within a repository: the new entry points at the
same content address.  Between repositories the content-addressed object is
copied into the destination's storage namespace once (if it is not already
there), because each repository's garbage collection only knows its own
references.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

from lakemount.auth.policies import Action
from lakemount.catalog.catalog import Catalog
from lakemount.catalog.model import Entry, Repository
from lakemount.errors import NotFound
from lakemount.gateway.buckets import Target
from lakemount.gateway.context import Ctx
from lakemount.gateway.errors import s3_error
from lakemount.gateway.objects import is_object
from lakemount.serving.bodies import READ_CHUNK


@dataclass(frozen=True, slots=True)
class Source:
    """The object a copy reads: the source bucket and key as sent, where they resolve, and its entry."""

    bucket: str
    key: str
    target: Target
    entry: Entry


def parse_copy_source(header: str) -> tuple[str, str]:
    """(bucket, key) of ``x-amz-copy-source`` (``[/]bucket/key[?versionId=v]``, URL-encoded)."""
    text = header.strip()
    text, _, query = text.partition("?")
    decoded = unquote(text, errors="strict")
    if decoded.startswith("/"):
        decoded = decoded[1:]
    bucket, sep, key = decoded.partition("/")
    if not bucket or not sep or not key:
        raise s3_error("InvalidArgument", "Copy Source must mention the source bucket and key: sourcebucket/sourcekey", ArgumentName="x-amz-copy-source")
    version = ""
    for part in query.split("&"):
        name, _, value = part.partition("=")
        if name == "versionId":
            version = unquote(value)
    if version not in ("", "null"):
        raise s3_error("NoSuchVersion", Key=key, VersionId=version)
    return bucket, key


def find_source(ctx: Ctx) -> Source:
    """The object named by ``x-amz-copy-source``; the caller must be able to read it."""
    header = ctx.req.header("x-amz-copy-source") or ""
    bucket, key = parse_copy_source(header)
    target = ctx.services.buckets.resolve(bucket)
    ctx.require(Action.READ_REPO, target)
    ref, path = target.split(key)
    if not ref or not path:
        raise s3_error("NoSuchKey", Key=key)
    resolved = ctx.resolve_ref(target, ref, key)
    try:
        entry = ctx.services.catalog.stat(target.repo.name, resolved, path)
    except NotFound:
        raise s3_error("NoSuchKey", Key=key) from None
    if not is_object(entry):
        raise s3_error("NoSuchKey", Key=key)
    return Source(bucket, key, target, entry)


def address_in(catalog: Catalog, src_repo: Repository, dst_repo: Repository, entry: Entry) -> str:
    """The address under which ``entry``'s data is reachable from ``dst_repo``."""
    if "://" in entry.address or src_repo.storage_namespace == dst_repo.storage_namespace or entry.size == 0:
        return entry.address
    src_url = catalog.physical_url(src_repo, entry.address)
    dst_url = catalog.physical_url(dst_repo, entry.address)
    if catalog.is_stored(dst_url):
        return entry.address
    # The same address in the other namespace (a content address, or an upload's linked name).
    with (
        catalog.writer(dst_repo, address=entry.address, hash_md5=False, hash_sha256=False) as w,
        catalog.open_stored(src_url) as f,
    ):
        while chunk := f.read(READ_CHUNK):
            w.write(chunk)
    return entry.address
