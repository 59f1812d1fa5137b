"""One honest shape for symlinks and directory markers through a real gateway (issue 23 item 5).

HEAD, GET, ListObjects v1/v2 and ListObjectVersions agree with the API: 0 bytes,
the empty ETag (never ``""``), a content type that says what the object is, and
a symlink's target as ``x-amz-meta-lakemount-symlink-target``.
"""

from __future__ import annotations

import time
from typing import Any

from lakemount.catalog.model import (
    DIR_MODE,
    DIRECTORY_CONTENT_TYPE,
    EMPTY_ETAG,
    LINK_MODE,
    SYMLINK_CONTENT_TYPE,
    SYMLINK_TARGET_KEY,
    Entry,
)

from .server_fixture import Gateway

TARGET = "../data/real.csv"


def test_item5_symlinks_and_markers_have_one_shape_in_s3(gw: Gateway, s3: Any, bucket: str) -> None:
    cat = gw.app().catalog
    cat.put_entry(bucket, "main", "links/l", Entry("", len(TARGET), "", time.time_ns(), "", (), LINK_MODE, 0, 0, TARGET))
    cat.put_entry(bucket, "main", "empty/", Entry("", 0, "", time.time_ns(), "", (), DIR_MODE))
    etag = f'"{EMPTY_ETAG}"'
    for key, content_type, meta in (("main/links/l", SYMLINK_CONTENT_TYPE, {SYMLINK_TARGET_KEY: TARGET}),
                                    ("main/empty/", DIRECTORY_CONTENT_TYPE, {})):
        head = s3.head_object(Bucket=bucket, Key=key)
        assert (head["ContentLength"], head["ETag"], head["ContentType"], head["Metadata"]) == (0, etag, content_type, meta)
        got = s3.get_object(Bucket=bucket, Key=key)
        assert got["Body"].read() == b"" and got["ETag"] == etag and got["ContentType"] == content_type
        assert s3.head_object(Bucket=bucket, Key=key, IfMatch=etag)["ETag"] == etag
    for listing in (s3.list_objects_v2(Bucket=bucket, Prefix="main/")["Contents"],
                    s3.list_objects(Bucket=bucket, Prefix="main/")["Contents"],
                    s3.list_object_versions(Bucket=bucket, Prefix="main/")["Versions"]):
        assert sorted((o["Key"], o["Size"], o["ETag"]) for o in listing) == [
            ("main/empty/", 0, etag), ("main/links/l", 0, etag)]
