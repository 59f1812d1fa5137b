"""Authentication and roles through a real gateway, and the ``lakemount auth`` verbs that manage them."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta

import pytest
from botocore.exceptions import ClientError

from .server_fixture import ADMIN_KEY, Gateway, code, signed_headers

# Policy decisions are cached per gateway process for a few seconds.
CACHE_TTL = 5.5


@pytest.fixture(scope="module")
def users(gw: Gateway) -> dict[str, tuple[str, str]]:
    out = {name: gw.user(name, role) for name, role in (("dev", "Developer"), ("ana", "Analyst"))}
    out["nobody"] = gw.user("nobody")
    return out


@pytest.mark.slow
def test_auth_cli_verbs(gw: Gateway) -> None:
    created = gw.cli_json("auth", "users", "create", "--id", "carol")
    assert created["id"] == "carol"
    assert "carol" in [u["id"] for u in gw.cli_json("auth", "users", "list")]
    creds = gw.cli_json("auth", "users", "credentials", "create", "--id", "carol")
    assert creds["access_key_id"].startswith("AKIA") and len(creds["secret_access_key"]) == 40
    listed = gw.cli_json("auth", "users", "credentials", "list", "--id", "carol")
    assert [c["access_key_id"] for c in listed] == [creds["access_key_id"]]
    assert "secret_access_key" not in listed[0]
    gw.cli("auth", "users", "policies", "attach", "--id", "carol", "--policy", "Analyst")
    assert gw.cli_json("auth", "users", "policies", "list", "--id", "carol") == [{"id": "Analyst"}]
    gw.cli("auth", "users", "policies", "detach", "--id", "carol", "--policy", "Analyst")
    assert gw.cli_json("auth", "users", "policies", "list", "--id", "carol") == []
    failed = gw.cli("auth", "users", "policies", "attach", "--id", "carol", "--policy", "NoSuchPolicy", check=False)
    assert failed.returncode != 0 and "policy not found" in failed.stderr
    gw.cli("auth", "users", "credentials", "delete", "--id", "carol", "--access-key-id", creds["access_key_id"])
    gw.cli("auth", "users", "delete", "--id", "carol")
    assert "carol" not in [u["id"] for u in gw.cli_json("auth", "users", "list")]
    # The secret is stored encrypted, never in clear.
    db = (gw.home / "lakemount.db").read_bytes()
    assert creds["secret_access_key"].encode() not in db


def test_roles_are_enforced_per_repository(gw: Gateway, users: dict[str, tuple[str, str]]) -> None:
    admin = gw.client()
    bucket = gw.bucket(admin)
    admin.put_object(Bucket=bucket, Key="main/data.csv", Body=b"1,2,3")
    dev = gw.client(*users["dev"])
    ana = gw.client(*users["ana"])
    nobody = gw.client(*users["nobody"])

    dev.put_object(Bucket=bucket, Key="main/by-dev.csv", Body=b"dev")
    assert dev.get_object(Bucket=bucket, Key="main/data.csv")["Body"].read() == b"1,2,3"
    dev_bucket = gw.bucket(dev, prefix="dev")  # Developer has CreateRepo
    dev.delete_bucket(Bucket=dev_bucket)

    assert ana.get_object(Bucket=bucket, Key="main/by-dev.csv")["Body"].read() == b"dev"
    assert bucket in [b["Name"] for b in ana.list_buckets()["Buckets"]]
    for call in (
        lambda: ana.put_object(Bucket=bucket, Key="main/x", Body=b"x"),
        lambda: ana.delete_object(Bucket=bucket, Key="main/data.csv"),
        lambda: ana.create_multipart_upload(Bucket=bucket, Key="main/y"),
        lambda: ana.create_bucket(Bucket="analyst-cannot-create"),
        lambda: ana.delete_bucket(Bucket=bucket),
        lambda: ana.copy_object(Bucket=bucket, Key="main/z", CopySource={"Bucket": bucket, "Key": "main/data.csv"}),
    ):
        with pytest.raises(ClientError) as e:
            call()
        assert code(e) == "AccessDenied"

    assert nobody.list_buckets()["Buckets"] == []
    with pytest.raises(ClientError) as e:
        nobody.get_object(Bucket=bucket, Key="main/data.csv")
    assert code(e) == "AccessDenied"
    assert admin.get_object(Bucket=bucket, Key="main/data.csv")["Body"].read() == b"1,2,3"


def test_creator_without_a_role_on_it_owns_the_new_bucket(gw: Gateway) -> None:
    policy = gw.home / "creator.json"
    policy.write_text('[{"effect": "Allow", "actions": ["CreateRepo"], "resource": "*"}]')
    gw.cli("auth", "policies", "create", "--id", "Creator", "--statement-document", str(policy))
    owner = gw.client(*gw.user("owner", "Creator"))
    other = gw.client(*gw.user("other", "Creator"))
    mine = gw.bucket(owner, prefix="own")
    owner.put_object(Bucket=mine, Key="main/k", Body=b"mine")
    assert owner.get_object(Bucket=mine, Key="main/k")["Body"].read() == b"mine"
    with pytest.raises(ClientError) as e:
        other.get_object(Bucket=mine, Key="main/k")
    assert code(e) == "AccessDenied"
    with pytest.raises(ClientError) as e:
        other.create_bucket(Bucket=mine)
    assert code(e) == "BucketAlreadyExists"


def test_policy_changes_take_effect_within_the_cache_ttl(gw: Gateway) -> None:
    admin = gw.client()
    bucket = gw.bucket(admin)
    admin.put_object(Bucket=bucket, Key="main/k", Body=b"x")
    key = gw.user("late")
    late = gw.client(*key)
    with pytest.raises(ClientError):
        late.get_object(Bucket=bucket, Key="main/k")
    gw.cli("auth", "users", "policies", "attach", "--id", "late", "--policy", "Analyst")
    deadline = time.monotonic() + CACHE_TTL * 2
    while True:
        try:
            assert late.get_object(Bucket=bucket, Key="main/k")["Body"].read() == b"x"
            break
        except ClientError:
            assert time.monotonic() < deadline, "the new policy never took effect"
            time.sleep(0.5)


def test_bad_credentials(gw: Gateway) -> None:
    bucket = gw.bucket()
    with pytest.raises(ClientError) as e:
        gw.client(ADMIN_KEY, "wrong-secret-wrong-secret-wrong-secret00").list_objects_v2(Bucket=bucket)
    assert code(e) == "SignatureDoesNotMatch"
    with pytest.raises(ClientError) as e:
        gw.client("AKIANOSUCHKEY0000000", "x" * 40).list_objects_v2(Bucket=bucket)
    assert code(e) == "InvalidAccessKeyId"
    with pytest.raises(ClientError) as e:
        gw.client(ADMIN_KEY, "wrong-secret-wrong-secret-wrong-secret00", signature="s3").list_objects(Bucket=bucket)
    assert code(e) == "SignatureDoesNotMatch"


def test_skewed_clock(gw: Gateway) -> None:
    bucket = gw.bucket()
    url = f"{gw.url}/{bucket}"
    empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    for skew in (timedelta(hours=-1), timedelta(hours=1)):
        headers = signed_headers("GET", url, {}, empty, when=datetime.now(UTC) + skew)
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(urllib.request.Request(url, headers=headers))
        assert e.value.code == 403 and b"RequestTimeTooSkewed" in e.value.read()
    with urllib.request.urlopen(urllib.request.Request(url, headers=signed_headers("GET", url, {}, empty))) as r:
        assert r.status == 200


def test_presigned_url_expiry(gw: Gateway) -> None:
    s3 = gw.client()
    bucket = gw.bucket(s3)
    s3.put_object(Bucket=bucket, Key="main/k", Body=b"x")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "main/k"}, ExpiresIn=1)
    time.sleep(2.1)
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(url)
    body = e.value.read()
    assert e.value.code == 403 and b"AccessDenied" in body and b"expired" in body
    tampered = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "main/k"}).replace("main/k", "main/K")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(tampered)
    assert e.value.code == 403 and b"SignatureDoesNotMatch" in e.value.read()


@pytest.mark.parametrize("authorization", [None, "", "   "], ids=["absent", "empty", "blank"])
def test_anonymous_requests_are_refused(gw: Gateway, authorization: str | None) -> None:
    """No signature is anonymous, and so is an empty ``Authorization`` header (S3's AccessDenied, not InvalidArgument)."""
    bucket = gw.bucket()
    headers = {} if authorization is None else {"Authorization": authorization}
    for url, method in ((f"{gw.url}/", "GET"), (f"{gw.url}/{bucket}", "GET"), (f"{gw.url}/{bucket}/main/k", "PUT")):
        req = urllib.request.Request(url, data=b"x" if method == "PUT" else None, method=method, headers=headers)
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req)
        assert e.value.code == 403 and b"<Code>AccessDenied</Code>" in e.value.read()


def test_public_read_write_bucket_admits_anonymous_requests(gw: Gateway) -> None:
    s3 = gw.client()
    s3.create_bucket(Bucket="public-bucket", ACL="public-read-write")
    req = urllib.request.Request(f"{gw.url}/public-bucket/main/anon.txt", data=b"anonymous", method="PUT")
    with urllib.request.urlopen(req) as r:
        assert r.status == 200
    with urllib.request.urlopen(f"{gw.url}/public-bucket/main/anon.txt") as r:
        assert r.read() == b"anonymous"
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(urllib.request.Request(f"{gw.url}/public-bucket", method="DELETE"))
    assert e.value.code == 403
