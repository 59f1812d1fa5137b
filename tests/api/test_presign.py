"""Presigned URLs against a live ``lakemount serve`` whose block store is S3 (a moto server): the SDKs' flows, and bad input.

The ``lakefs`` SDK's ``ObjectWriter`` with ``pre_sign=True`` asks for an
address (getPhysicalAddress), PUTs the bytes straight to S3 and links the
address (linkPhysicalAddress); its ``ObjectReader`` follows getObject's 302
to a presigned GET URL, ranges included.  lakefs-spec does the same through
them.  A link of anything but an address handed out for that repository,
branch and path, still valid, with the bytes uploaded as stated, is a 4xx
JSON error and stages nothing.  On the local block store presigning is
refused with a 400 and the storage config says so.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import lakefs
import lakefs_sdk
import pytest
import requests
from lakefs.exceptions import ForbiddenException

from lakemount.catalog.uploads import LINK_SECONDS, LINKS_PREFIX
from tests.api.conftest import Served, running
from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET
from tests.moto_server import CREDENTIALS, moto_s3

AUTH = (ADMIN_KEY, ADMIN_SECRET)
BUCKET = "presign-test"
S3_CREDS = CREDENTIALS


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    with moto_s3(BUCKET) as endpoint:
        yield endpoint


@pytest.fixture(scope="module")
def s3(moto_endpoint: str) -> Any:
    return boto3.client("s3", endpoint_url=moto_endpoint, **S3_CREDS)


@pytest.fixture(scope="module")
def s3_served(tmp_path_factory: pytest.TempPathFactory, moto_endpoint: str) -> Iterator[Served]:
    env = {
        "LAKEMOUNT_BLOCKSTORE_TYPE": "s3",
        "LAKEMOUNT_BLOCKSTORE_DEFAULT_NAMESPACE_PREFIX": f"s3://{BUCKET}/system",
        "LAKEMOUNT_BLOCKSTORE_S3_ENDPOINT": moto_endpoint,
        "LAKEMOUNT_BLOCKSTORE_S3_REGION": "us-east-1",
        "LAKEMOUNT_BLOCKSTORE_S3_ACCESS_KEY_ID": "testing",
        "LAKEMOUNT_BLOCKSTORE_S3_SECRET_ACCESS_KEY": "testing",
    }
    with running(tmp_path_factory.mktemp("api-s3"), env=env) as s:
        yield s
        log = s.gateway.log()
    assert "unexpected error serving" not in log, log[-5000:]


def s3_repo(served: Served, prefix: str = "p") -> Any:
    name = served.repo_name(prefix)
    return lakefs.Repository(name, client=served.client()).create(storage_namespace=f"s3://{BUCKET}/{name}")


def api(served: Served, path: str) -> str:
    return f"{served.api}/api/v1{path}"


def expect_error(resp: requests.Response, status: int) -> str:
    assert resp.status_code == status, (resp.status_code, resp.text)
    assert resp.headers["Content-Type"] == "application/json"
    message = resp.json()["message"]
    assert isinstance(message, str) and message
    return message


def backing(served: Served, repo: str, path: str, branch: str = "main") -> str:
    return api(served, f"/repositories/{repo}/branches/{branch}/staging/backing?path={path}")


def get_address(served: Served, repo: str, path: str, *, presign: bool = True, branch: str = "main") -> dict[str, Any]:
    r = requests.get(backing(served, repo, path, branch) + f"&presign={str(presign).lower()}", auth=AUTH, timeout=30)
    assert r.status_code == 200, r.text
    return dict(r.json())


def put_presigned(location: dict[str, Any], data: bytes) -> str:
    r = requests.put(location["presigned_url"], data=data, timeout=30)
    assert r.status_code == 200, r.text
    return r.headers["ETag"].strip('"')


def link(served: Served, repo: str, path: str, location: dict[str, Any], size: int, checksum: str,
         headers: dict[str, str] | None = None, **extra: Any) -> requests.Response:
    body = {"staging": location, "size_bytes": size, "checksum": checksum, **extra}
    return requests.put(backing(served, repo, path), json=body, auth=AUTH, headers=headers or {}, timeout=30)


def staged(served: Served, repo: str, path: str) -> bool:
    r = requests.get(api(served, f"/repositories/{repo}/refs/main/objects/stat?path={path}"), auth=AUTH, timeout=30)
    assert r.status_code in (200, 404), r.text
    return r.status_code == 200


# --- the SDKs ---------------------------------------------------------------------------------------


def test_storage_config_says_presign_on_s3_and_not_on_local(s3_served: Served, served: Served) -> None:
    assert s3_served.client().storage_config.pre_sign_support is True
    assert s3_served.client().storage_config.pre_sign_support_ui is False
    assert served.client().storage_config.pre_sign_support is False


def test_sdk_presigned_upload_and_read_round_trip(s3_served: Served, s3: Any) -> None:
    repo = s3_repo(s3_served)
    main = repo.branch("main")
    data = bytes(range(256)) * 4096 + b"tail"  # 1 MiB and a bit
    obj = main.object("dir/blob.bin")
    with obj.writer(mode="wb", pre_sign=True, content_type="application/x-test", metadata={"k": "v"}) as w:
        w.write(data)
    # The bytes went straight to S3, at an address in the repository's namespace.
    stats = main.object("dir/blob.bin").stat()
    prefix = f"s3://{BUCKET}/{repo.id}/data/"
    assert stats.physical_address.startswith(prefix), stats.physical_address
    key = stats.physical_address[len(f"s3://{BUCKET}/") :]
    head = s3.head_object(Bucket=BUCKET, Key=key)
    assert head["ContentLength"] == len(data)
    assert stats.size_bytes == len(data) and stats.checksum == hashlib.md5(data).hexdigest()
    assert stats.content_type == "application/x-test" and stats.metadata == {"k": "v"}
    # Presigned reads: whole, ranges, seeks.
    with main.object("dir/blob.bin").reader(mode="rb", pre_sign=True) as r:
        assert r.read() == data
        r.seek(1000)
        assert r.read(500) == data[1000:1500]
        r.seek(-4, 2)
        assert r.read() == b"tail"
    # The same data through the API itself, and presigned stat's URL and expiry.
    with main.object("dir/blob.bin").reader(mode="rb", pre_sign=False) as r:
        assert r.read() == data
    presigned = main.object("dir/blob.bin").stat(pre_sign=True)
    assert presigned.physical_address.startswith("http") and presigned.physical_address_expiry > time.time()
    assert requests.get(presigned.physical_address, headers={"Range": "bytes=0-9"}, timeout=30).content == data[:10]
    # Committed, listed (presigned addresses too), and read back at the commit.
    ref = main.commit("presigned upload")
    assert ref.object("dir/blob.bin").reader(pre_sign=True).read() == data
    listing = requests.get(api(s3_served, f"/repositories/{repo.id}/refs/main/objects/ls?presign=true"), auth=AUTH, timeout=30)
    assert listing.status_code == 200
    (item,) = listing.json()["results"]
    assert item["physical_address"].startswith("http") and item["physical_address_expiry"] > time.time()
    # A non-presigned upload on the same repository reads back presigned, and the other way round.
    main.object("plain").upload(b"through the API", pre_sign=False)
    assert main.object("plain").reader(pre_sign=True).read() == b"through the API"
    main.object("empty").upload(b"", pre_sign=True)
    assert main.object("empty").reader(pre_sign=True).read() == b""


def test_sdk_default_follows_storage_config_and_exclusive_mode(s3_served: Served) -> None:
    repo = s3_repo(s3_served)
    main = repo.branch("main")
    main.object("x").upload(b"first")  # pre_sign from the storage config: true
    assert main.object("x").reader().read() == b"first"
    with pytest.raises(lakefs.exceptions.ObjectExistsException):
        main.object("x").upload(b"second", mode="xb", pre_sign=True)
    assert main.object("x").reader().read() == b"first"


def test_lakefs_spec_reads_and_writes_presigned(s3_served: Served) -> None:
    from lakefs_spec import LakeFSFileSystem

    repo = s3_repo(s3_served)
    fs = LakeFSFileSystem(host=s3_served.api, username=ADMIN_KEY, password=ADMIN_SECRET)
    with fs.open(f"lakefs://{repo.id}/main/spec/a.txt", "wb", pre_sign=True) as f:
        f.write(b"hello from lakefs-spec")
    with fs.open(f"lakefs://{repo.id}/main/spec/a.txt", "rb", pre_sign=True) as f:
        assert f.read() == b"hello from lakefs-spec"
    # Presigning by default (the storage config), then a ranged read.
    fs_default = LakeFSFileSystem(host=s3_served.api, username=ADMIN_KEY, password=ADMIN_SECRET)
    fs_default.pipe(f"lakefs://{repo.id}/main/spec/b.bin", b"0123456789")
    with fs_default.open(f"lakefs://{repo.id}/main/spec/b.bin", "rb") as f:
        f.seek(3)
        assert f.read(4) == b"3456"
    assert repo.branch("main").object("spec/b.bin").stat().physical_address.startswith(f"s3://{BUCKET}/{repo.id}/data/")


# --- bad input --------------------------------------------------------------------------------------


def test_forged_foreign_and_unsigned_addresses_are_refused(s3_served: Served) -> None:
    repo = s3_repo(s3_served).id
    other = s3_repo(s3_served).id
    loc = get_address(s3_served, repo, "a")
    etag = put_presigned(loc, b"0123456789")
    url, _, suffix = loc["physical_address"].rpartition(",")
    forged = {**loc, "physical_address": f"{url},{suffix[:-2]}{'AA' if not suffix.endswith('AA') else 'BB'}"}
    assert "signature" in expect_error(link(s3_served, repo, "a", forged, 10, etag), 400)
    later = {**loc, "physical_address": f"{url},{int(suffix.split('.')[0]) + 3600}.{suffix.split('.')[1]}"}
    assert "signature" in expect_error(link(s3_served, repo, "a", later, 10, etag), 400)
    assert "not signed" in expect_error(link(s3_served, repo, "a", {"physical_address": url}, 10, etag), 400)
    # Another repository's address, another path, another branch.
    assert "storage namespace" in expect_error(link(s3_served, other, "a", loc, 10, etag), 400)
    assert "signature" in expect_error(link(s3_served, repo, "b", loc, 10, etag), 400)
    requests.post(api(s3_served, f"/repositories/{repo}/branches"), json={"name": "dev", "source": "main"},
                  auth=AUTH, timeout=30).raise_for_status()
    body = {"staging": loc, "size_bytes": 10, "checksum": etag}
    r = requests.put(backing(s3_served, repo, "a", "dev"), json=body, auth=AUTH, timeout=30)
    assert "signature" in expect_error(r, 400)
    # An address outside the namespace (lakeFS would link it as external data; lakemount does not).
    outside = {"physical_address": f"s3://{BUCKET}/elsewhere/data/x,1.{'A' * 43}"}
    assert "storage namespace" in expect_error(link(s3_served, repo, "a", outside, 10, etag), 400)
    assert not staged(s3_served, repo, "a") and not staged(s3_served, repo, "b")
    assert not staged(s3_served, other, "a")
    # The genuine address still links.
    r = link(s3_served, repo, "a", loc, 10, etag)
    assert r.status_code == 200, r.text
    assert r.json()["physical_address"] == url and r.json()["size_bytes"] == 10
    assert staged(s3_served, repo, "a")


def test_expired_address_is_refused(s3_served: Served) -> None:
    repo = s3_repo(s3_served).id
    app = s3_served.gateway.app()
    past = time.time() - LINK_SECONDS - 60
    expired = app.catalog.issue_link_address(repo, "main", "old", presigned=True, now=past)
    loc = {"physical_address": expired.physical_address, "presigned_url": expired.presigned_url}
    etag = put_presigned(loc, b"late bytes")
    assert "expired" in expect_error(link(s3_served, repo, "old", loc, 10, etag), 400)
    assert not staged(s3_served, repo, "old")


def test_missing_object_wrong_size_or_checksum_stage_nothing(s3_served: Served) -> None:
    repo = s3_repo(s3_served).id
    loc = get_address(s3_served, repo, "f")
    assert "nothing was uploaded" in expect_error(link(s3_served, repo, "f", loc, 3, "abc"), 404)
    etag = put_presigned(loc, b"12345")
    assert "6" in expect_error(link(s3_served, repo, "f", loc, 6, etag), 400)
    assert "checksum" in expect_error(link(s3_served, repo, "f", loc, 5, "0" * 32), 400)
    assert "checksum" in expect_error(link(s3_served, repo, "f", loc, 5, ""), 400)
    assert "size_bytes" in expect_error(link(s3_served, repo, "f", loc, -1, etag), 400)
    r = requests.put(backing(s3_served, repo, "f"), json={"staging": loc, "size_bytes": 5}, auth=AUTH, timeout=30)
    assert "checksum" in expect_error(r, 400)
    r = requests.put(backing(s3_served, repo, "f"), json={"staging": loc, "size_bytes": 5, "checksum": etag, "x": 1},
                     auth=AUTH, timeout=30)
    assert "unknown field" in expect_error(r, 400)
    assert not staged(s3_served, repo, "f")
    # If-None-Match: * on an existing object; quoted ETags are accepted as the SDK sends them.
    assert link(s3_served, repo, "f", loc, 5, f'"{etag}"').status_code == 200
    expect_error(link(s3_served, repo, "f", loc, 5, etag, headers={"If-None-Match": "*"}), 412)
    expect_error(link(s3_served, repo, "f", loc, 5, etag, headers={"If-Match": '"nope"'}), 412)
    assert link(s3_served, repo, "f", loc, 5, etag, headers={"If-Match": f'"{etag}"'}).status_code == 200
    # The client's mtime is taken, as lakeFS does; one out of range is refused.
    assert "mtime" in expect_error(link(s3_served, repo, "g", loc, 5, etag, mtime=-1), 400)
    assert not staged(s3_served, repo, "g")
    r = link(s3_served, repo, "f", loc, 5, etag, mtime=1_600_000_000)
    assert r.status_code == 200 and r.json()["mtime"] == 1_600_000_000


def test_protected_branch_and_read_only_user_are_refused(s3_served: Served) -> None:
    repo = s3_repo(s3_served)
    loc = get_address(s3_served, repo.id, "p")
    etag = put_presigned(loc, b"protected")
    app = s3_served.gateway.app()
    app.catalog.set_protection_rules(repo.id, ["main"])
    expect_error(requests.get(backing(s3_served, repo.id, "q") + "&presign=true", auth=AUTH, timeout=30), 403)
    expect_error(link(s3_served, repo.id, "p", loc, 9, etag), 403)
    with pytest.raises((ForbiddenException, lakefs_sdk.exceptions.ForbiddenException)):  # the SDK's presigned path raises the latter
        repo.branch("main").object("r").upload(b"x", pre_sign=True)
    assert not staged(s3_served, repo.id, "p")
    app.catalog.set_protection_rules(repo.id, [])
    app.auth.create_user("analyst1")
    app.auth.attach_policy("analyst1", "Analyst")
    app.auth.create_credentials("analyst1", "AKIAANALYST1PRESIGN", "analyst-secret-presign")
    analyst = ("AKIAANALYST1PRESIGN", "analyst-secret-presign")
    expect_error(requests.get(backing(s3_served, repo.id, "q") + "&presign=true", auth=analyst, timeout=30), 403)
    r = requests.put(backing(s3_served, repo.id, "p"), json={"staging": loc, "size_bytes": 9, "checksum": etag},
                     auth=analyst, timeout=30)
    expect_error(r, 403)
    assert not staged(s3_served, repo.id, "p")


def test_disable_pre_signed_turns_presigning_off(tmp_path: Path, moto_endpoint: str) -> None:
    env = {
        "LAKEMOUNT_BLOCKSTORE_TYPE": "s3",
        "LAKEMOUNT_BLOCKSTORE_DEFAULT_NAMESPACE_PREFIX": f"s3://{BUCKET}/system-off",
        "LAKEMOUNT_BLOCKSTORE_S3_ENDPOINT": moto_endpoint,
        "LAKEMOUNT_BLOCKSTORE_S3_REGION": "us-east-1",
        "LAKEMOUNT_BLOCKSTORE_S3_ACCESS_KEY_ID": "testing",
        "LAKEMOUNT_BLOCKSTORE_S3_SECRET_ACCESS_KEY": "testing",
        "LAKEMOUNT_BLOCKSTORE_S3_DISABLE_PRE_SIGNED": "true",
    }
    with running(tmp_path, env=env) as off:
        assert off.client().storage_config.pre_sign_support is False
        repo = s3_repo(off, "off")
        repo.branch("main").object("a").upload(b"via the API")  # the SDK follows the storage config
        r = requests.get(api(off, f"/repositories/{repo.id}/refs/main/objects?path=a&presign=true"), auth=AUTH, timeout=30)
        assert "presigned URLs are not supported" in expect_error(r, 400)


def test_local_block_store_refuses_presign_clearly(served: Served) -> None:
    repo = served.repo(prefix="lp")
    main = repo.branch("main")
    main.object("a").upload(b"local bytes")
    for path in (f"/repositories/{repo.id}/refs/main/objects?path=a&presign=true",
                 f"/repositories/{repo.id}/refs/main/objects/stat?path=a&presign=true",
                 f"/repositories/{repo.id}/refs/main/objects/ls?presign=true"):
        r = requests.get(api(served, path), auth=AUTH, timeout=30)
        assert "local:// block store does not hand them out" in expect_error(r, 400)
    r = requests.get(backing(served, repo.id, "b") + "&presign=true", auth=AUTH, timeout=30)
    assert "presigned URLs are not supported" in expect_error(r, 400)
    # Without presign the address is handed out: a client on this host writes the file itself, then links it.
    loc = get_address(served, repo.id, "b", presign=False)
    assert loc["presigned_url"] is None
    path = Path(loc["physical_address"].rpartition(",")[0].removeprefix("local://"))
    assert path.is_relative_to(served.home / "data" / "ns" / repo.id / "data")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"written directly")
    r = link(served, repo.id, "b", loc, 16, hashlib.md5(b"written directly").hexdigest())
    assert r.status_code == 200, r.text
    assert main.object("b").reader().read() == b"written directly"
    # Handing it out left the marker that keeps the upload from garbage collection until it may no longer be linked.
    markers = list((served.home / "data" / "ns" / repo.id / LINKS_PREFIX).iterdir())
    assert [m.name.split(".")[0] for m in markers] == [path.name]
