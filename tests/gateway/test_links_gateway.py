"""Hard links made in a mount, seen through the S3 gateway: each name is an ordinary object with the same content,
and an overwrite through the gateway breaks the link for that name only (docs/SEMANTICS.md, "Hard links")."""

from __future__ import annotations

import os
from typing import Any

from lakemount.catalog.links import group_of
from tests.fuse.conftest import make_fs
from tests.fuse.pathfs import PathFS

from .server_fixture import Gateway


def test_item_gateway_sees_each_name_and_an_overwrite_breaks_the_link(gw: Gateway, s3: Any, bucket: str) -> None:
    app = gw.app()
    fs = make_fs(app, str(gw.home), "links")  # a mount's core on the gateway's stores, no kernel
    try:
        pfs = PathFS(fs)
        main = f"/{bucket}/main"
        pfs.write_file(f"{main}/a.txt", b"shared bytes")
        pfs.link(f"{main}/a.txt", f"{main}/b.txt")
        pfs.link(f"{main}/a.txt", f"{main}/c.txt")
        bodies = {k: s3.get_object(Bucket=bucket, Key=f"main/{k}") for k in ("a.txt", "b.txt", "c.txt")}
        assert {k: v["Body"].read() for k, v in bodies.items()} == dict.fromkeys(bodies, b"shared bytes")
        assert len({v["ETag"] for v in bodies.values()}) == 1
        assert not any(k.startswith("lakemount") for v in bodies.values() for k in v["Metadata"])  # the group is not shown
        listed = s3.list_objects_v2(Bucket=bucket, Prefix="main/")["Contents"]
        assert sorted(o["Key"] for o in listed) == ["main/a.txt", "main/b.txt", "main/c.txt"]
        entries = [app.catalog.stat(bucket, "main", k) for k in ("a.txt", "b.txt", "c.txt")]
        assert len({e.address for e in entries}) == 1  # no extra copy stored
        # an S3 PUT over one name: that name gets its own entry, the others keep the file
        s3.put_object(Bucket=bucket, Key="main/b.txt", Body=b"new bytes")
        fresh = PathFS(make_fs(app, str(gw.home), "links-2"))
        try:
            assert fresh.read_file(f"{main}/b.txt") == b"new bytes" and fresh.lstat(f"{main}/b.txt").nlink == 1
            a, c = fresh.lstat(f"{main}/a.txt"), fresh.lstat(f"{main}/c.txt")
            assert a.nlink == c.nlink == 2 and a.ino == c.ino
            assert fresh.read_file(f"{main}/c.txt") == b"shared bytes"
            # the next change through the mount rewrites the group without the overwritten name
            fresh.write_file(f"{main}/c.txt", b"changed")
            group = group_of(app.catalog.stat(bucket, "main", "a.txt"))
            assert group is not None and group.names == ("a.txt", "c.txt")
            assert s3.get_object(Bucket=bucket, Key="main/a.txt")["Body"].read() == b"changed"
            assert s3.get_object(Bucket=bucket, Key="main/b.txt")["Body"].read() == b"new bytes"
        finally:
            fresh.fs.close()
        assert os.path.isdir(gw.home)
    finally:
        fs.close()
