"""Which S3 operation a request is: method, bucket, key and sub-resources.

One table read top to bottom; each operation lives in its own module under
``operations/``.  Sub-resources outside the gateway's subset (ACL writes,
policies, lifecycle, tag writes, ...) answer NotImplemented rather than being
mistaken for a plain GET or PUT of the bucket or object.  Reading an object's
tags answers an empty set (lakemount keeps none).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from lakemount.gateway.context import Ctx, not_implemented
from lakemount.gateway.errors import s3_error
from lakemount.gateway.operations import (
    abort_multipart_upload,
    complete_multipart_upload,
    copy_object,
    create_bucket,
    create_multipart_upload,
    delete_bucket,
    delete_object,
    delete_objects,
    get_bucket_acl,
    get_bucket_location,
    get_bucket_versioning,
    get_object,
    get_object_tagging,
    head_bucket,
    head_object,
    list_buckets,
    list_multipart_uploads,
    list_object_versions,
    list_objects,
    list_objects_v2,
    list_parts,
    put_object,
    upload_part,
    upload_part_copy,
)
from lakemount.serving.http import Request, Response

Operation = Callable[[Ctx], Response]

UNSUPPORTED: Final = frozenset(
    {
        "accelerate", "analytics", "attributes", "cors", "encryption", "intelligent-tiering", "inventory",
        "legal-hold", "lifecycle", "logging", "metrics", "notification", "object-lock", "ownershipControls",
        "policy", "policyStatus", "publicAccessBlock", "replication", "requestPayment", "restore", "retention",
        "select", "torrent", "website", "session",
    }
)  # fmt: skip

# Operations an unsigned request may reach; the bucket's canned ACL decides.
_ANONYMOUS_OK: Final = frozenset(
    {
        get_object.handle, head_object.handle, put_object.handle, list_objects.handle, list_objects_v2.handle,
        head_bucket.handle, delete_object.handle,
    }
)  # fmt: skip


def anonymous_allowed(op: Operation) -> bool:
    """True when ``op`` may be served to an unsigned request (the policy still decides on access)."""
    return op in _ANONYMOUS_OK


def operation_name(op: Operation) -> str:
    """S3's name of ``op`` (``GetObject`` for ``get_object.handle``), the metrics' operation label."""
    name = _NAMES.get(op)
    if name is None:
        module = op.__module__.rsplit(".", 1)[-1]
        name = _NAMES[op] = "".join(part.capitalize() for part in module.split("_"))
    return name


_NAMES: dict[Operation, str] = {}


def _method_not_allowed() -> Exception:
    return s3_error("MethodNotAllowed")


def operation(req: Request, bucket: str | None, key: str | None) -> Operation:
    """The operation serving this request; raises NotImplemented or MethodNotAllowed."""
    q = req.query
    method = req.method
    for sub in q:
        if sub in UNSUPPORTED:
            raise not_implemented(f"the ?{sub} sub-resource")
    if bucket is None:
        if method == "GET":
            return list_buckets.handle
        raise _method_not_allowed()
    if key is None:
        if "tagging" in q:
            raise not_implemented("the ?tagging sub-resource of a bucket")
        if method == "GET":
            if "location" in q:
                return get_bucket_location.handle
            if "versioning" in q:
                return get_bucket_versioning.handle
            if "acl" in q:
                return get_bucket_acl.handle
            if "uploads" in q:
                return list_multipart_uploads.handle
            if "versions" in q:
                return list_object_versions.handle
            if q.get("list-type") == "2":
                return list_objects_v2.handle
            return list_objects.handle
        if method == "HEAD":
            return head_bucket.handle
        if method == "PUT":
            if "acl" in q or "versioning" in q:
                raise not_implemented(f"PUT ?{'acl' if 'acl' in q else 'versioning'}")
            return create_bucket.handle
        if method == "DELETE":
            return delete_bucket.handle
        if method == "POST" and "delete" in q:
            return delete_objects.handle
        if method == "POST":
            raise not_implemented("POST object (browser form uploads)")
        raise _method_not_allowed()
    if "acl" in q:
        raise not_implemented("object ACLs")
    if "tagging" in q:
        if method == "GET":
            return get_object_tagging.handle
        raise not_implemented("writing object tags")
    if method == "GET":
        if "uploadId" in q:
            return list_parts.handle
        return get_object.handle
    if method == "HEAD":
        return head_object.handle
    if method == "PUT":
        copy = req.header("x-amz-copy-source") is not None
        if "partNumber" in q or "uploadId" in q:
            return upload_part_copy.handle if copy else upload_part.handle
        return copy_object.handle if copy else put_object.handle
    if method == "DELETE":
        if "uploadId" in q:
            return abort_multipart_upload.handle
        return delete_object.handle
    if method == "POST":
        if "uploads" in q:
            return create_multipart_upload.handle
        if "uploadId" in q:
            return complete_multipart_upload.handle
        raise not_implemented("POST on an object")
    raise _method_not_allowed()
