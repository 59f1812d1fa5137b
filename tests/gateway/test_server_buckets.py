"""Buckets and listings: repository buckets with ``<ref>/`` keys, flat buckets, aliases, virtual hosts."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from .server_fixture import ADMIN_KEY, ADMIN_SECRET, Gateway, code, start_gateway


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    tmp = tmp_path_factory.mktemp("gw-buckets")
    config = tmp / "config.yaml"
    config.write_text(
        "gateways:\n  s3:\n    domain_name: s3.test\n    aliases:\n      aliased: aliasrepo/dev\n"
    )
    g = start_gateway(tmp, env={"LAKEMOUNT_CONFIG": str(config)})
    yield g
    g.stop()


def keys(resp: dict[str, Any]) -> list[str]:
    return [o["Key"] for o in resp.get("Contents", [])]


def prefixes(resp: dict[str, Any]) -> list[str]:
    return [p["Prefix"] for p in resp.get("CommonPrefixes", [])]


def test_branches_are_prefixes_at_the_bucket_root(gw: Gateway, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/a.txt", Body=b"1")
    g = gw.app().graveler
    g.commit(bucket, "main", "a")
    for b in ("dev", "a-b", "feature-x"):
        g.create_branch(bucket, b, "main")
    s3.put_object(Bucket=bucket, Key="dev/only-dev.txt", Body=b"2")
    root = s3.list_objects_v2(Bucket=bucket, Delimiter="/")
    assert prefixes(root) == ["a-b/", "dev/", "feature-x/", "main/"] and keys(root) == []
    assert prefixes(s3.list_objects(Bucket=bucket, Delimiter="/")) == ["a-b/", "dev/", "feature-x/", "main/"]
    assert prefixes(s3.list_objects_v2(Bucket=bucket, Delimiter="/", Prefix="f")) == ["feature-x/"]
    # Without a delimiter: every object of every branch, in key order.
    everything = keys(s3.list_objects_v2(Bucket=bucket))
    assert everything == ["a-b/a.txt", "dev/a.txt", "dev/only-dev.txt", "feature-x/a.txt", "main/a.txt"]
    page1 = s3.list_objects_v2(Bucket=bucket, MaxKeys=2)
    page2 = s3.list_objects_v2(Bucket=bucket, MaxKeys=10, ContinuationToken=page1["NextContinuationToken"])
    assert keys(page1) + keys(page2) == everything
    assert keys(s3.list_objects_v2(Bucket=bucket, Prefix="dev/")) == ["dev/a.txt", "dev/only-dev.txt"]


def test_delimiter_pagination_v1_and_v2(s3: Any, bucket: str) -> None:
    names = ["main/a", "main/b/1", "main/b/2", "main/c", "main/d/x/y", "main/e"]
    for k in names:
        s3.put_object(Bucket=bucket, Key=k, Body=b"")
    seen_keys, seen_prefixes, marker = [], [], ""
    while True:
        r = s3.list_objects(Bucket=bucket, Prefix="main/", Delimiter="/", MaxKeys=1, Marker=marker)
        seen_keys += keys(r)
        seen_prefixes += prefixes(r)
        if not r["IsTruncated"]:
            break
        marker = r["NextMarker"]
    assert seen_keys == ["main/a", "main/c", "main/e"] and seen_prefixes == ["main/b/", "main/d/"]
    got: list[str] = []
    token = None
    while True:
        kw = {"ContinuationToken": token} if token else {}
        r = s3.list_objects_v2(Bucket=bucket, Prefix="main/", Delimiter="/", MaxKeys=2, **kw)
        got += keys(r) + prefixes(r)
        assert r["KeyCount"] == len(keys(r)) + len(prefixes(r))
        if not r["IsTruncated"]:
            break
        token = r["NextContinuationToken"]
    assert sorted(got) == sorted(["main/a", "main/c", "main/e", "main/b/", "main/d/"])
    assert keys(s3.list_objects_v2(Bucket=bucket, Prefix="main/", StartAfter="main/c")) == ["main/d/x/y", "main/e"]
    enc = s3.list_objects_v2(Bucket=bucket, Prefix="main/", Delimiter="/", EncodingType="url")
    assert "main/b/" in prefixes(enc)


def test_list_object_versions_shows_current_versions(s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/v/1", Body=b"a")
    s3.put_object(Bucket=bucket, Key="main/v/2", Body=b"bb")
    r = s3.list_object_versions(Bucket=bucket, Prefix="main/v/")
    assert [(v["Key"], v["VersionId"], v["IsLatest"], v["Size"]) for v in r["Versions"]] == [
        ("main/v/1", "null", True, 1), ("main/v/2", "null", True, 2)]


def test_bucket_lifecycle(gw: Gateway, s3: Any) -> None:
    name = gw.bucket(s3)
    assert name in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    s3.head_bucket(Bucket=name)
    assert s3.get_bucket_location(Bucket=name).get("LocationConstraint") in (None, "")
    s3.create_bucket(Bucket=name)  # re-creating one's own bucket succeeds (us-east-1)
    s3.put_object(Bucket=name, Key="main/x", Body=b"x")
    with pytest.raises(ClientError) as e:
        s3.delete_bucket(Bucket=name)
    assert code(e) == "BucketNotEmpty"
    s3.delete_object(Bucket=name, Key="main/x")
    s3.delete_bucket(Bucket=name)
    with pytest.raises(ClientError) as e:
        s3.head_bucket(Bucket=name)
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    with pytest.raises(ClientError) as e:
        s3.create_bucket(Bucket="x")
    assert code(e) == "InvalidBucketName"


def test_delete_bucket_keeps_a_repository_whose_tags_hold_objects(gw: Gateway, s3: Any, bucket: str) -> None:
    # `aws s3 rb --force` empties every branch, then deletes the bucket: a tag's objects,
    # still readable as `<tag>/<path>`, must not go with it.
    s3.put_object(Bucket=bucket, Key="main/kept.txt", Body=b"tagged")
    gw.cli("commit", f"lakefs://{bucket}/main", "-m", "release")
    gw.cli("tag", "create", f"lakefs://{bucket}/v1", f"lakefs://{bucket}/main")
    s3.delete_object(Bucket=bucket, Key="main/kept.txt")
    with pytest.raises(ClientError) as e:
        s3.delete_bucket(Bucket=bucket)
    assert code(e) == "BucketNotEmpty" and "'v1'" in e.value.response["Error"]["Message"]
    assert s3.get_object(Bucket=bucket, Key="v1/kept.txt")["Body"].read() == b"tagged"
    gw.cli("tag", "delete", f"lakefs://{bucket}/v1", "--yes")
    s3.delete_bucket(Bucket=bucket)
    assert bucket not in [b["Name"] for b in s3.list_buckets()["Buckets"]]


def test_listed_last_modified_is_the_heads_whole_second(s3: Any, bucket: str) -> None:
    # S3 keeps whole seconds; tools compare a listing's LastModified with what they
    # set locally from it (aws s3 sync --exact-timestamps truncates to seconds) or with HEAD.
    names = [f"main/t{i}" for i in range(3)]
    for k in names:
        s3.put_object(Bucket=bucket, Key=k, Body=b"x")
    heads = [s3.head_object(Bucket=bucket, Key=k)["LastModified"] for k in names]
    assert all(h.microsecond == 0 for h in heads)
    listed = [o["LastModified"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="main/")["Contents"]]
    assert listed == heads
    assert [o["LastModified"] for o in s3.list_objects(Bucket=bucket, Prefix="main/")["Contents"]] == heads
    assert [v["LastModified"] for v in s3.list_object_versions(Bucket=bucket, Prefix="main/")["Versions"]] == heads
    copied = s3.copy_object(Bucket=bucket, Key="main/c", CopySource={"Bucket": bucket, "Key": "main/t0"})
    assert copied["CopyObjectResult"]["LastModified"] == s3.head_object(Bucket=bucket, Key="main/c")["LastModified"]


def test_bucket_with_a_dot_gets_a_derived_repository(gw: Gateway, s3: Any) -> None:
    s3.create_bucket(Bucket="my.dotted.bucket")
    s3.put_object(Bucket="my.dotted.bucket", Key="k", Body=b"flat")
    assert s3.get_object(Bucket="my.dotted.bucket", Key="k")["Body"].read() == b"flat"
    names = [b["Name"] for b in s3.list_buckets()["Buckets"]]
    assert "my.dotted.bucket" in names
    repos = [r.name for r in gw.app().graveler.list_repositories()]
    derived = [r for r in repos if r.startswith("my-dotted-bucket-")]
    assert len(derived) == 1 and derived[0] not in names
    s3.delete_object(Bucket="my.dotted.bucket", Key="k")
    s3.delete_bucket(Bucket="my.dotted.bucket")


def test_alias_bucket_is_one_ref(gw: Gateway, s3: Any) -> None:
    app = gw.app()
    app.catalog.create_repository("aliasrepo")
    app.graveler.create_branch("aliasrepo", "dev", "main")
    s3.put_object(Bucket="aliased", Key="path/in/dev.txt", Body=b"on dev")
    assert s3.get_object(Bucket="aliasrepo", Key="dev/path/in/dev.txt")["Body"].read() == b"on dev"
    assert keys(s3.list_objects_v2(Bucket="aliased")) == ["path/in/dev.txt"]
    assert prefixes(s3.list_objects_v2(Bucket="aliased", Delimiter="/")) == ["path/"]


def _send_virtual_host(gw: Gateway, method: str, bucket: str, key: str, body: bytes = b"") -> tuple[int, bytes]:
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    host = f"{bucket}.s3.test:{gw.port}"
    req = AWSRequest(method, f"http://{host}/{key}", data=body)
    S3SigV4Auth(Credentials(ADMIN_KEY, ADMIN_SECRET), "s3", "us-east-1").add_auth(req)
    p = req.prepare()
    conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=30)
    try:
        path = p.url.split(host, 1)[1]
        conn.request(method, path, body=body or None, headers={**dict(p.headers), "Host": host})
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def test_virtual_host_style(gw: Gateway, s3: Any, bucket: str) -> None:
    assert _send_virtual_host(gw, "PUT", bucket, "main/vh.txt", b"virtual")[0] == 200
    assert s3.get_object(Bucket=bucket, Key="main/vh.txt")["Body"].read() == b"virtual"
    status, body = _send_virtual_host(gw, "GET", bucket, "main/vh.txt")
    assert (status, body) == (200, b"virtual")
    status, body = _send_virtual_host(gw, "GET", bucket, "")
    assert status == 200 and b"<Key>main/vh.txt</Key>" in body


@pytest.fixture(scope="module")
def flat(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """One ``--flat`` gateway for the module's flat tests (a start is ~2 s of CPU); each uses its own bucket names."""
    g = start_gateway(tmp_path_factory.mktemp("gw-flat"), workers=1, extra_args=("--flat",))
    yield g
    g.stop()


def test_flat_mode(flat: Gateway) -> None:
    g = flat
    s3 = g.client()
    s3.create_bucket(Bucket="flatbucket")
    s3.put_object(Bucket="flatbucket", Key="dir/file.txt", Body=b"on the default branch")
    assert keys(s3.list_objects_v2(Bucket="flatbucket")) == ["dir/file.txt"]
    cat = g.app().catalog
    entry = cat.stat("flatbucket", "main", "dir/file.txt")
    assert cat.read(cat.repository("flatbucket"), entry) == b"on the default branch"
    g.app().graveler.commit("flatbucket", "main", "from flat mode")
    s3.delete_object(Bucket="flatbucket", Key="dir/file.txt")
    with pytest.raises(ClientError):
        s3.get_object(Bucket="flatbucket", Key="dir/file.txt")
    s3.delete_bucket(Bucket="flatbucket")


def test_item23_2_flat_create_bucket_refuses_a_namespace_around_another(flat: Gateway) -> None:
    # Issue 23 item 2: CreateBucket makes a repository in the default namespace <root>/<bucket>; one that
    # would contain another repository's namespace is refused like any other creation, in one line.
    g = flat
    cat = g.app().catalog
    cat.create_repository("keeper", f"{cat.namespace_root}/holder/keeper")
    s3 = g.client()
    with pytest.raises(ClientError) as info:
        s3.create_bucket(Bucket="holder")
    assert code(info) == "InvalidArgument"
    message = info.value.response["Error"]["Message"]
    assert message == "storage namespace (the default one for holder) contains another repository's storage namespace"
    assert "holder" not in [r.name for r in g.app().catalog.list_repositories()]
    s3.create_bucket(Bucket="holder2")  # a sibling is fine
