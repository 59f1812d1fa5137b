"""The gateway and a FUSE mount of the same stores see each other's writes at once.

An object PUT through the gateway is a file in the mount of its branch, and a
file closed in the mount is an object through the gateway: both go through
the catalog and the ref store, with nothing cached in between but the mount's
head TTL (0.2 s here).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fuse.mounting import HAVE_FUSE, start, stop

from .server_fixture import Gateway, start_gateway

pytestmark = [pytest.mark.fuse, pytest.mark.slow, pytest.mark.skipif(not HAVE_FUSE, reason="needs /dev/fuse and fusermount3")]


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gateway, Path]]:
    tmp = tmp_path_factory.mktemp("gw-mount")
    gw = start_gateway(tmp, workers=1)
    mountpoint = tmp / "lake"
    try:
        m = start(str(gw.home), str(mountpoint), env=gw.env)
    except Exception:
        gw.stop()
        raise
    try:
        yield gw, mountpoint
    finally:
        stop(m)
        gw.stop()


def eventually(fn: Any, timeout: float = 3.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return fn()
        except (OSError, AssertionError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_gateway_writes_appear_in_the_mount(both: tuple[Gateway, Path]) -> None:
    gw, mnt = both
    s3 = gw.client()
    bucket = gw.bucket(s3)
    s3.put_object(Bucket=bucket, Key="main/from/gateway.txt", Body=b"put via S3")
    t = time.monotonic()
    data = eventually(lambda: (mnt / bucket / "main/from/gateway.txt").read_bytes())
    assert data == b"put via S3"
    assert time.monotonic() - t < 1.0  # within the mount's head TTL, not eventually
    s3.put_object(Bucket=bucket, Key="main/from/gateway.txt", Body=b"overwritten")

    def overwritten() -> None:
        assert (mnt / bucket / "main/from/gateway.txt").read_bytes() == b"overwritten"

    eventually(overwritten)
    s3.delete_object(Bucket=bucket, Key="main/from/gateway.txt")

    def gone() -> None:
        assert not (mnt / bucket / "main/from/gateway.txt").exists()

    eventually(gone)


def test_mount_writes_appear_in_the_gateway(both: tuple[Gateway, Path]) -> None:
    gw, mnt = both
    s3 = gw.client()
    bucket = gw.bucket(s3)
    branch_dir = mnt / bucket / "main"
    eventually(lambda: os.listdir(branch_dir))
    (branch_dir / "dir").mkdir()
    with open(branch_dir / "dir/written.csv", "wb") as f:
        f.write(b"a,b\n1,2\n")
    # Closed: the gateway sees it at once, no waiting.
    got = s3.get_object(Bucket=bucket, Key="main/dir/written.csv")
    assert got["Body"].read() == b"a,b\n1,2\n"
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="main/dir/")["Contents"]]
    assert "main/dir/written.csv" in keys


def test_item6_overwrite_and_delete_show_within_head_ttl(both: tuple[Gateway, Path]) -> None:
    """docs/SEMANTICS.md's bound, measured: a known key's overwrite or delete through S3 shows in a
    same-machine mount (SQLite ref store) within the head TTL (0.2 s here, plus the kernel's
    attribute timeout of the same length), not "at once" as new keys do."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "SEMANTICS.md").read_text()
    row = next(line for line in doc.splitlines() if "test_item6_overwrite_and_delete_show_within_head_ttl" in line)
    assert "overwrite or delete" in row and "`mount.head_ttl`" in row
    gw, mnt = both
    s3 = gw.client()
    bucket = gw.bucket(s3)
    path = mnt / bucket / "main/item6.txt"
    s3.put_object(Bucket=bucket, Key="main/item6.txt", Body=b"first")
    assert eventually(path.read_bytes) == b"first"

    def seen_after(change: Any, check: Any) -> float:
        t = time.monotonic()
        change()
        eventually(check, timeout=5.0)
        return time.monotonic() - t

    def overwritten() -> None:
        assert path.read_bytes() == b"second!"

    def gone() -> None:
        assert not path.exists()

    took_overwrite = seen_after(lambda: s3.put_object(Bucket=bucket, Key="main/item6.txt", Body=b"second!"), overwritten)
    took_delete = seen_after(lambda: s3.delete_object(Bucket=bucket, Key="main/item6.txt"), gone)
    head_ttl = 0.2
    # Twice the TTL (mount cache, then kernel attributes), plus generous slack for a loaded machine.
    assert took_overwrite < 2 * head_ttl + 1.5, took_overwrite
    assert took_delete < 2 * head_ttl + 1.5, took_delete
