"""s3cmd against the gateway (SigV4 and SigV2): make a bucket, put (multipart too), get, ls, sync, del."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .server_fixture import ADMIN_KEY, ADMIN_SECRET, Gateway, start_gateway

S3CMD = shutil.which("s3cmd")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(S3CMD is None, reason="s3cmd is not installed (apt-get install s3cmd)")]


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    g = start_gateway(tmp_path_factory.mktemp("gw-s3cmd"))
    yield g
    g.stop()


def s3cmd(gw: Gateway, cfg: Path, *args: str) -> str:
    assert S3CMD is not None
    res = subprocess.run([S3CMD, "-c", str(cfg), *args], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, f"s3cmd {' '.join(args)}: {res.stdout}\n{res.stderr}"
    return res.stdout


def config(gw: Gateway, tmp: Path, *, v2: bool) -> Path:
    cfg = tmp / f"s3cfg-{'v2' if v2 else 'v4'}"
    host = gw.url.removeprefix("http://")
    cfg.write_text(
        "[default]\n"
        f"access_key = {ADMIN_KEY}\nsecret_key = {ADMIN_SECRET}\n"
        f"host_base = {host}\nhost_bucket = {host}\n"
        "use_https = False\nbucket_location = us-east-1\n"
        f"signature_v2 = {'True' if v2 else 'False'}\n"
        "multipart_chunk_size_mb = 5\n"
    )
    return cfg


@pytest.mark.parametrize("v2", [False, True], ids=["sigv4", "sigv2"])
def test_s3cmd_round_trip(gw: Gateway, tmp_path: Path, v2: bool) -> None:
    cfg = config(gw, tmp_path, v2=v2)
    bucket = f"s3cmd-{'v2' if v2 else 'v4'}"
    s3cmd(gw, cfg, "mb", f"s3://{bucket}")
    small = tmp_path / "small.txt"
    small.write_text("hello from s3cmd\n")
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(12 * 1024 * 1024))
    s3cmd(gw, cfg, "put", str(small), f"s3://{bucket}/main/small.txt")
    s3cmd(gw, cfg, "put", str(big), f"s3://{bucket}/main/dir/big.bin")
    listing = s3cmd(gw, cfg, "ls", "--recursive", f"s3://{bucket}/main/")
    assert f"s3://{bucket}/main/small.txt" in listing and f"s3://{bucket}/main/dir/big.bin" in listing
    got = tmp_path / "got.bin"
    s3cmd(gw, cfg, "get", f"s3://{bucket}/main/dir/big.bin", str(got))
    assert got.read_bytes() == big.read_bytes()
    tree = tmp_path / "tree"
    (tree / "x").mkdir(parents=True)
    (tree / "x" / "1.txt").write_text("1")
    (tree / "2.txt").write_text("2")
    s3cmd(gw, cfg, "sync", f"{tree}/", f"s3://{bucket}/main/synced/")
    listing = s3cmd(gw, cfg, "ls", "--recursive", f"s3://{bucket}/main/synced/")
    assert "synced/x/1.txt" in listing and "synced/2.txt" in listing
    s3cmd(gw, cfg, "del", "--recursive", "--force", f"s3://{bucket}/main/")
    assert s3cmd(gw, cfg, "ls", "--recursive", f"s3://{bucket}/main/").strip() == ""
    s3cmd(gw, cfg, "rb", f"s3://{bucket}")
