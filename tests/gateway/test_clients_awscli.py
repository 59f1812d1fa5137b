"""The aws CLI against the gateway: ``aws s3 sync`` both ways, multipart ``aws s3 cp``, ``aws s3 ls``."""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .server_fixture import ADMIN_KEY, ADMIN_SECRET, Gateway, start_gateway

AWS = shutil.which("aws")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(AWS is None, reason="the aws CLI is not installed")]


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    g = start_gateway(tmp_path_factory.mktemp("gw-awscli"))
    yield g
    g.stop()


def aws(gw: Gateway, *args: str) -> str:
    env = dict(
        os.environ,
        AWS_ACCESS_KEY_ID=ADMIN_KEY,
        AWS_SECRET_ACCESS_KEY=ADMIN_SECRET,
        AWS_DEFAULT_REGION="us-east-1",
        AWS_CONFIG_FILE="/dev/null",
        AWS_SHARED_CREDENTIALS_FILE="/dev/null",
    )
    assert AWS is not None
    res = subprocess.run([AWS, "--endpoint-url", gw.url, *args], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, f"aws {' '.join(args)}: {res.stderr}"
    return res.stdout


def make_tree(root: Path) -> None:
    files = {
        "a.txt": b"alpha\n",
        "dir/b.csv": b"1,2\n3,4\n",
        "dir/sub/c.bin": os.urandom(300_000),
        "with space/d e.txt": b"spaces",
        "unicode/ü.txt": "ü".encode(),
        "empty": b"",
    }
    for name, data in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)


def same_tree(a: Path, b: Path) -> bool:
    cmp = filecmp.dircmp(a, b)
    if cmp.left_only or cmp.right_only or cmp.diff_files or cmp.funny_files:
        return False
    return all(same_tree(a / d, b / d) for d in cmp.common_dirs)


def test_sync_up_and_down(gw: Gateway, tmp_path: Path) -> None:
    bucket = gw.bucket()
    src, back = tmp_path / "src", tmp_path / "back"
    make_tree(src)
    aws(gw, "s3", "sync", str(src), f"s3://{bucket}/main/tree/")
    aws(gw, "s3", "sync", f"s3://{bucket}/main/tree/", str(back))
    assert same_tree(src, back)
    # A second sync has nothing to do, either way (also comparing times to the second); a
    # deletion is mirrored with --delete.
    assert aws(gw, "s3", "sync", str(src), f"s3://{bucket}/main/tree/").strip() == ""
    assert aws(gw, "s3", "sync", "--exact-timestamps", f"s3://{bucket}/main/tree/", str(back)).strip() == ""
    (src / "a.txt").unlink()
    aws(gw, "s3", "sync", str(src), f"s3://{bucket}/main/tree/", "--delete")
    listing = aws(gw, "s3", "ls", "--recursive", f"s3://{bucket}/main/tree/")
    assert "tree/a.txt" not in listing and "tree/dir/sub/c.bin" in listing
    assert aws(gw, "s3", "ls", f"s3://{bucket}/").split() == ["PRE", "main/"]


def test_multipart_cp(gw: Gateway, tmp_path: Path) -> None:
    bucket = gw.bucket()
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(21 * 1024 * 1024))
    aws(gw, "s3", "cp", str(big), f"s3://{bucket}/main/big.bin")
    head = json.loads(aws(gw, "s3api", "head-object", "--bucket", bucket, "--key", "main/big.bin"))
    assert head["ETag"].endswith('-3"') and head["ContentLength"] == big.stat().st_size  # 8 MiB parts
    out = tmp_path / "out.bin"
    aws(gw, "s3", "cp", f"s3://{bucket}/main/big.bin", str(out))
    assert out.read_bytes() == big.read_bytes()
    aws(gw, "s3", "cp", f"s3://{bucket}/main/big.bin", f"s3://{bucket}/main/copy.bin")
    aws(gw, "s3", "rm", f"s3://{bucket}/main/big.bin")
    listing = aws(gw, "s3", "ls", f"s3://{bucket}/main/")
    assert "copy.bin" in listing and "big.bin" not in listing
