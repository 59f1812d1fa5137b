"""Large files stream, through the kernel (issue 36): a kill -9 in the middle of a large write leaves
nothing staged of its bytes and no corrupt object, on the local store and on S3 (moto)."""

from __future__ import annotations

import hashlib
import mmap
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from lakemount.app import App
from lakemount.block.layout import data_sha
from lakemount.catalog.streaming import PART_SIZE
from lakemount.config import load
from lakemount.fuse import runner
from tests.fuse.conftest import REPO
from tests.fuse.mounting import cleanup_mountpoint, env_for, needs_fuse, start, stop, wait_for
from tests.moto_server import CREDENTIALS, moto_s3

pytestmark = needs_fuse

MiB = 1 << 20
BUCKET = "crash"


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with moto_s3(BUCKET) as url:
        yield url


def s3_env(home: str, endpoint: str, prefix: str) -> dict[str, str]:
    return env_for(
        home,
        LAKEMOUNT_BLOCKSTORE_TYPE="s3",
        LAKEMOUNT_BLOCKSTORE_DEFAULT_NAMESPACE_PREFIX=f"s3://{BUCKET}/{prefix}",
        LAKEMOUNT_BLOCKSTORE_S3_ENDPOINT=endpoint,
        LAKEMOUNT_BLOCKSTORE_S3_REGION="us-east-1",
        LAKEMOUNT_BLOCKSTORE_S3_ACCESS_KEY_ID="testing",
        LAKEMOUNT_BLOCKSTORE_S3_SECRET_ACCESS_KEY="testing",
    )


def kill_mid_write(home: str, mountpoint: str, env: dict[str, str], started: object) -> None:
    """Mount, write 3 parts' worth into a file left open, wait for ``started()``, kill -9 the mount."""
    m = start(home, mountpoint, env=env)
    try:
        fd = os.open(f"{mountpoint}/{REPO}/main/big", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        chunk = os.urandom(MiB)
        for _ in range(3 * PART_SIZE // MiB):
            os.write(fd, chunk)
        assert wait_for(started, timeout=30), "the large write never got under way in the store"  # type: ignore[arg-type]
        os.kill(m.proc.pid, signal.SIGKILL)
        assert m.proc.wait() == -signal.SIGKILL  # the mount died of the kill
        assert wait_for(lambda: runner.is_stale(mountpoint), timeout=5)
        try:
            os.close(fd)
        except OSError:
            pass
    finally:
        stop(m)
        cleanup_mountpoint(mountpoint)


def nothing_staged_of(app: App) -> None:
    entry = app.catalog.get_optional(REPO, "main", "big")
    assert entry is None or entry.size == 0, f"unacknowledged bytes were staged: {entry}"


def test_kill_9_mid_write_on_the_local_store_stages_nothing_and_stores_no_corrupt_object(
    home: str, tmp_path: Path
) -> None:
    app = App(load(env={"LAKEMOUNT_HOME": home}))
    app.catalog.create_repository(REPO)
    data = Path(app.catalog.repository(REPO).storage_namespace.removeprefix("local://")) / "data"
    spool = Path(home) / "tmp"

    def spooled() -> bool:  # the temp file holds the three parts: the write is in the mount
        return any(f.stat().st_size >= 3 * PART_SIZE for f in spool.rglob("w-*"))

    kill_mid_write(home, str(tmp_path / "mnt"), env_for(home), spooled)
    nothing_staged_of(app)
    for f in data.rglob("*"):
        if f.is_file():
            assert not f.name.startswith(".tmp-"), f"a half-stored object was left: {f}"
            assert hashlib.sha256(f.read_bytes()).hexdigest() == f.name, f"corrupt object {f}"


def test_kill_9_mid_write_on_s3_stages_nothing_and_leaves_only_an_incomplete_upload(
    home: str, tmp_path: Path, s3_endpoint: str
) -> None:
    env = s3_env(home, s3_endpoint, tmp_path.name)
    app = App(load(env=env))
    app.catalog.create_repository(REPO)
    client = boto3.client("s3", endpoint_url=s3_endpoint, **CREDENTIALS)

    def parts_out() -> bool:  # the fault must land while the upload is in parts, mid-way
        uploads = client.list_multipart_uploads(Bucket=BUCKET, Prefix=tmp_path.name).get("Uploads", [])
        return any(client.list_parts(Bucket=BUCKET, Key=u["Key"], UploadId=u["UploadId"]).get("Parts") for u in uploads)

    kill_mid_write(home, str(tmp_path / "mnt"), env, parts_out)
    nothing_staged_of(app)
    listed = client.list_objects_v2(Bucket=BUCKET, Prefix=f"{tmp_path.name}/{REPO}/data/").get("Contents", [])
    for obj in listed:
        name = data_sha(obj["Key"].removeprefix(f"{tmp_path.name}/{REPO}/"))
        body = client.get_object(Bucket=BUCKET, Key=obj["Key"])["Body"].read()
        assert name is not None and hashlib.sha256(body).hexdigest() == name, f"corrupt object {obj['Key']}"
        assert len(body) < PART_SIZE, f"the large file's bytes became an object: {obj['Key']}"
    assert client.list_multipart_uploads(Bucket=BUCKET, Prefix=tmp_path.name).get("Uploads"), "no upload was in flight"


def write_ops(mountpoint: str) -> int:
    with open(os.path.join(mountpoint, ".lakefs", "stats")) as f:
        for line in f:
            if line.startswith('lakemount_fuse_ops_total{op="write"}'):
                return int(float(line.split()[-1]))
    return 0


def test_cp_writes_through_the_mount_in_one_mib_requests(home: str, tmp_path: Path) -> None:
    """st_blksize is 1 MiB, so cp sizes its buffer to the kernel's largest FUSE write: one request per MiB."""
    app = App(load(env={"LAKEMOUNT_HOME": home}))
    app.catalog.create_repository(REPO)
    src = tmp_path / "src.bin"
    body = os.urandom(4 * MiB)
    src.write_bytes(body)
    mountpoint = str(tmp_path / "mnt")
    m = start(home, mountpoint, env=env_for(home))
    try:
        before = write_ops(mountpoint)
        dst = f"{mountpoint}/{REPO}/main/copy.bin"
        subprocess.run(["cp", str(src), dst], check=True)
        assert os.stat(dst).st_blksize == MiB
        assert write_ops(mountpoint) - before == 4, "cp wrote in smaller requests than 1 MiB"
        with open(dst, "rb") as f:
            assert f.read() == body
    finally:
        stop(m)


def stat_counter(mountpoint: str, name: str) -> int:
    with open(os.path.join(mountpoint, ".lakefs", "stats")) as f:
        for line in f:
            if line.startswith(f"lakemount_fuse_{name}"):
                return int(float(line.split()[-1]))
    return 0


def staged_bytes(app: App, path: str) -> bytes:
    entry = app.catalog.get_optional(REPO, "main", path)
    assert entry is not None, f"{path} is not staged"
    return app.catalog.read(app.catalog.repository(REPO), entry)


def test_write_only_handles_write_past_the_page_cache_and_every_reader_sees_their_bytes(home: str, tmp_path: Path) -> None:
    """Stop 51: a write-only open is direct_io.  Partial, overlapping, sparse and appending writes through
    one leave the right bytes and size for a reader whose pages were cached before (its read and its
    mapping), for a new reader, and, after an fsync, in the branch."""
    app = App(load(env={"LAKEMOUNT_HOME": home}))
    app.catalog.create_repository(REPO)
    mountpoint = str(tmp_path / "mnt")
    m = start(home, mountpoint, env=env_for(home))
    try:
        path = f"{mountpoint}/{REPO}/main/f.bin"
        expected = bytearray(b"A" * 3 * 4096)
        with open(path, "wb") as f:  # O_WRONLY | O_CREAT | O_TRUNC: a direct one
            f.write(expected)
        assert stat_counter(mountpoint, "direct_write_opens") == 1
        reader = os.open(path, os.O_RDONLY)
        try:
            assert os.pread(reader, len(expected), 0) == expected  # now in the kernel's pages
            with mmap.mmap(reader, len(expected), prot=mmap.PROT_READ) as mapped:
                assert mapped[:] == expected
                fd = os.open(path, os.O_WRONLY)
                try:
                    for offset, data in ((1000, b"B" * 5000), (3000, b"C" * 100), (4096 * 3 + 10_000, b"D" * 100)):
                        assert os.pwrite(fd, data, offset) == len(data)
                        expected[len(expected):] = bytes(max(0, offset - len(expected)))  # a hole reads as zeros
                        expected[offset:offset + len(data)] = data
                    assert os.fstat(reader).st_size == len(expected)
                    assert os.pread(reader, len(expected) + 10, 0) == expected
                    assert mapped[:] == expected[:len(mapped)]
                    os.fsync(fd)  # the branch holds the bytes now, the handle still open
                    assert staged_bytes(app, "f.bin") == expected
                finally:
                    os.close(fd)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)
            try:
                os.write(fd, b"tail")
                expected += b"tail"
            finally:
                os.close(fd)
            assert os.fstat(reader).st_size == len(expected)
            assert os.pread(reader, len(expected) + 10, 0) == expected
        finally:
            os.close(reader)
        with open(path, "rb") as f:
            assert f.read() == expected
        assert stat_counter(mountpoint, "direct_write_opens") == 3
        with open(path, "r+b") as f:  # read-write: cached as before
            f.write(b"E")
        expected[0:1] = b"E"
        assert stat_counter(mountpoint, "direct_write_opens") == 3
        with open(path, "rb") as f:
            assert f.read() == expected
    finally:
        stop(m)
    assert staged_bytes(app, "f.bin") == expected
