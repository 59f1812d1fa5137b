"""rclone against the gateway: ``rclone copy`` then ``rclone check`` (MD5 of every file), multipart included."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .server_fixture import ADMIN_KEY, ADMIN_SECRET, Gateway, start_gateway

RCLONE = shutil.which("rclone")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(RCLONE is None, reason="rclone is not installed (apt-get install rclone)")]


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    g = start_gateway(tmp_path_factory.mktemp("gw-rclone"))
    yield g
    g.stop()


def rclone(gw: Gateway, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert RCLONE is not None
    # rclone refuses AWS_CA_BUNDLE on a plain-HTTP endpoint; no other AWS_* may leak in either.
    env = dict(
        {k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
        RCLONE_CONFIG=str(tmp / "rclone.conf"),
        RCLONE_CONFIG_LAKE_TYPE="s3",
        RCLONE_CONFIG_LAKE_PROVIDER="Other",
        RCLONE_CONFIG_LAKE_ACCESS_KEY_ID=ADMIN_KEY,
        RCLONE_CONFIG_LAKE_SECRET_ACCESS_KEY=ADMIN_SECRET,
        RCLONE_CONFIG_LAKE_ENDPOINT=gw.url,
        RCLONE_CONFIG_LAKE_REGION="us-east-1",
        RCLONE_CONFIG_LAKE_FORCE_PATH_STYLE="true",
    )
    return subprocess.run([RCLONE, *args], env=env, capture_output=True, text=True, timeout=300)


def test_copy_and_check(gw: Gateway, tmp_path: Path) -> None:
    bucket = gw.bucket()
    src = tmp_path / "src"
    for name, size in (("a.txt", 10), ("dir/b.bin", 200_000), ("dir/sub/c.bin", 12 * 1024 * 1024), ("spa ce+plus%.txt", 5)):
        p = src / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(os.urandom(size))
    target = f"lake:{bucket}/main/copied"
    flags = ["--s3-upload-cutoff", "5M", "--s3-chunk-size", "5M"]
    res = rclone(gw, tmp_path, "copy", str(src), target, *flags)
    assert res.returncode == 0, res.stderr
    res = rclone(gw, tmp_path, "check", str(src), target)
    assert res.returncode == 0, res.stderr
    assert "0 differences found" in res.stderr
    # A changed file is caught by the check.
    (src / "a.txt").write_bytes(b"changed!!!")
    res = rclone(gw, tmp_path, "check", str(src), target)
    assert res.returncode != 0 and "1 differences found" in res.stderr
    back = tmp_path / "back"
    assert rclone(gw, tmp_path, "copy", target, str(back)).returncode == 0
    assert (back / "dir/sub/c.bin").read_bytes() == (src / "dir/sub/c.bin").read_bytes()
    listed = rclone(gw, tmp_path, "lsf", "-R", target).stdout.split()
    assert "dir/sub/c.bin" in listed
