"""A directory renamed in a mount (one move record, issue 40), seen through the S3 gateway at once from another
process's stores: the new prefix lists and reads every object, the old one nothing, a PUT under the old name
makes a new object there, and the commit keeps both (docs/SEMANTICS.md, "Directory renames")."""

from __future__ import annotations

from typing import Any

import pytest

from lakemount.fuse import namespace
from tests.fuse.conftest import make_fs
from tests.fuse.pathfs import PathFS

from .server_fixture import Gateway


def test_gateway_sees_a_directory_rename_made_in_a_mount(gw: Gateway, s3: Any, bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(namespace, "PER_KEY_RENAME", 0)  # a move record though the directory is small
    app = gw.app()
    for i in range(30):
        app.catalog.put(bucket, "main", f"d/sub/f{i:02d}", f"body {i}".encode())
    app.catalog.commit(bucket, "main", "a directory")
    fs = make_fs(app, str(gw.home), "moves")  # a mount's core on the gateway's stores, no kernel
    try:
        pfs = PathFS(fs)
        pfs.rename(f"/{bucket}/main/d", f"/{bucket}/main/e")
    finally:
        fs.close()

    def keys(prefix: str) -> list[str]:
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix, PaginationConfig={"PageSize": 7})
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    assert keys("main/d/") == []
    assert keys("main/e/") == [f"main/e/sub/f{i:02d}" for i in range(30)]
    assert s3.get_object(Bucket=bucket, Key="main/e/sub/f07")["Body"].read() == b"body 7"
    listed = s3.list_objects_v2(Bucket=bucket, Prefix="main/", Delimiter="/")
    assert [p["Prefix"] for p in listed.get("CommonPrefixes", [])] == ["main/e/"]
    s3.put_object(Bucket=bucket, Key="main/d/new", Body=b"after the rename")
    assert keys("main/d/") == ["main/d/new"]
    app.catalog.commit(bucket, "main", "moved")
    assert keys("main@/e/")[:1] == ["main@/e/sub/f00"] and len(keys("main@/e/")) == 30
    assert s3.get_object(Bucket=bucket, Key="main@/d/new")["Body"].read() == b"after the rename"
