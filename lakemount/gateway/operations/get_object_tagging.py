"""GetObjectTagging: lakemount keeps no object tags, so an existing object's tag set is empty.

Clients read it on their own: the AWS CLI v2 (Debian 12's ``awscli``) reads the
source's tags before a multipart ``aws s3 cp`` between two S3 locations, and
copies nothing when the set is empty.  Writing tags (PutObjectTagging,
DeleteObjectTagging) and bucket tags stay NotImplemented (see ``routing``).
"""

from __future__ import annotations

from lakemount.gateway.context import Ctx
from lakemount.gateway.operations.get_object import find
from lakemount.gateway.xml import S3_NAMESPACE
from lakemount.serving.http import Response


def handle(ctx: Ctx) -> Response:
    """GetObjectTagging: an empty tag set for an object the caller may read; errors as GetObject."""
    find(ctx)  # NoSuchKey, NoSuchBucket, AccessDenied as GetObject
    body = f'<?xml version="1.0" encoding="UTF-8"?>\n<Tagging xmlns="{S3_NAMESPACE}"><TagSet/></Tagging>'
    return Response(200, [("Content-Type", "application/xml")], body.encode())
