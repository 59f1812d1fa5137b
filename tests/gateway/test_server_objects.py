"""Object operations through a real gateway with boto3: put, get, head, copy, delete, ranges, conditions.

Buckets are repositories and keys are ``<ref>/<path>`` (the default mode).
"""

from __future__ import annotations

import hashlib
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from .server_fixture import Gateway, code, signed_headers

ODD_KEYS = [
    "plain.txt",
    "with space/and  two spaces.txt",
    "unicode/ünïcödé/日本語.parquet",
    "percent/100%/%41%2F",
    "plus/a+b+c",
    "double//slash//x",
    "tilde~/star*/quote'\"/paren()/bang!",
    "semi;colon=eq&amp?hash#",
    "emoji/🦆.json",
    "trailing-dot.",
]


def status(exc: pytest.ExceptionInfo[ClientError]) -> int:
    return int(exc.value.response["ResponseMetadata"]["HTTPStatusCode"])


def test_put_get_head_round_trip_with_metadata(s3: Any, bucket: str) -> None:
    body = b"hello, lake\n" * 100
    put = s3.put_object(
        Bucket=bucket, Key="main/a/b.csv", Body=body, ContentType="text/csv", Metadata={"Owner": "ana", "x": "1"},
        CacheControl="max-age=60", ContentDisposition="attachment", ContentEncoding="identity", ContentLanguage="en",
    )
    assert put["ETag"] == f'"{hashlib.md5(body).hexdigest()}"'
    got = s3.get_object(Bucket=bucket, Key="main/a/b.csv")
    assert got["Body"].read() == body
    assert got["ContentType"] == "text/csv"
    assert got["Metadata"] == {"owner": "ana", "x": "1"}
    assert got["ETag"] == put["ETag"]
    assert got["CacheControl"] == "max-age=60"
    assert got["ContentDisposition"] == "attachment"
    assert got["ContentLanguage"] == "en"
    head = s3.head_object(Bucket=bucket, Key="main/a/b.csv")
    assert head["ContentLength"] == len(body) and head["ETag"] == put["ETag"]
    assert abs(head["LastModified"] - datetime.now(UTC)) < timedelta(minutes=1)


def test_overwrite_replaces_metadata(s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/k", Body=b"1", Metadata={"a": "b"})
    s3.put_object(Bucket=bucket, Key="main/k", Body=b"2")
    got = s3.get_object(Bucket=bucket, Key="main/k")
    assert got["Body"].read() == b"2" and got["Metadata"] == {}


@pytest.mark.parametrize("key", ODD_KEYS)
def test_odd_keys_round_trip_and_list(s3: Any, bucket: str, key: str) -> None:
    data = key.encode()
    s3.put_object(Bucket=bucket, Key="main/" + key, Body=data)
    assert s3.get_object(Bucket=bucket, Key="main/" + key)["Body"].read() == data
    listed = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="main/")["Contents"]]
    assert listed == ["main/" + key]
    listed_v1 = [o["Key"] for o in s3.list_objects(Bucket=bucket, Prefix="main/")["Contents"]]
    assert listed_v1 == ["main/" + key]
    s3.delete_object(Bucket=bucket, Key="main/" + key)
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket, Prefix="main/")


def test_odd_keys_with_sigv2(gw: Gateway, bucket: str) -> None:
    v2 = gw.client(signature="s3")
    for key in ODD_KEYS:
        v2.put_object(Bucket=bucket, Key="main/" + key, Body=b"x")
        assert v2.get_object(Bucket=bucket, Key="main/" + key)["Body"].read() == b"x"


def test_empty_object_and_directory_marker(gw: Gateway, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/empty", Body=b"")
    assert s3.get_object(Bucket=bucket, Key="main/empty")["Body"].read() == b""
    s3.put_object(Bucket=bucket, Key="main/dir/", Body=b"")
    entry = gw.app().catalog.stat(bucket, "main", "dir/")
    assert entry.is_dir
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="main/")["Contents"]]
    assert keys == ["main/dir/", "main/empty"]


def test_missing_key_bucket_and_ref(s3: Any, bucket: str) -> None:
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="main/nope")
    assert code(e) == "NoSuchKey" and status(e) == 404
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="no-such-branch/x")
    # The message says it is the ref that is missing (a mistyped branch), as for a PUT.
    assert code(e) == "NoSuchKey" and "'no-such-branch'" in e.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=bucket, Key="main/c", CopySource={"Bucket": bucket, "Key": "no-such-branch/x"})
    assert code(e) == "NoSuchKey" and "'no-such-branch'" in e.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as e:  # the branch's own marker (pyarrow's create_dir of its parents)
        s3.put_object(Bucket=bucket, Key="no-such-branch/", Body=b"")
    assert code(e) == "NoSuchKey" and "no branch 'no-such-branch'" in e.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket="no-such-bucket-here", Key="main/x")
    assert code(e) == "NoSuchBucket"
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="main/nope")
    assert status(e) == 404
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="no-such-branch/x", Body=b"1")
    assert code(e) == "NoSuchKey"


def test_ranges(s3: Any, bucket: str) -> None:
    data = bytes(range(256)) * 40
    s3.put_object(Bucket=bucket, Key="main/r", Body=data)
    cases = {"bytes=0-0": data[:1], "bytes=10-19": data[10:20], "bytes=100-": data[100:], "bytes=-7": data[-7:],
             "bytes=10000-99999": data[10000:], "bytes=-99999": data}
    for rng, want in cases.items():
        got = s3.get_object(Bucket=bucket, Key="main/r", Range=rng)
        assert got["Body"].read() == want, rng
        assert got["ResponseMetadata"]["HTTPStatusCode"] == 206
        assert got["ContentRange"].endswith(f"/{len(data)}")
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="main/r", Range=f"bytes={len(data)}-")
    assert code(e) == "InvalidRange" and status(e) == 416
    # Malformed or multiple ranges: the whole object, as S3 answers.
    assert s3.get_object(Bucket=bucket, Key="main/r", Range="bytes=5-1")["Body"].read() == data
    assert s3.get_object(Bucket=bucket, Key="main/r", Range="bytes=0-1,4-5")["Body"].read() == data


def test_large_object_streams_in_ranges(s3: Any, bucket: str) -> None:
    data = hashlib.sha256(b"seed").digest() * (3 * 1024 * 1024 // 32 + 7)
    s3.put_object(Bucket=bucket, Key="main/big", Body=data)
    assert s3.get_object(Bucket=bucket, Key="main/big")["Body"].read() == data
    got = s3.get_object(Bucket=bucket, Key="main/big", Range="bytes=1048570-2621440")["Body"].read()
    assert got == data[1048570:2621441]


def test_objects_larger_than_a_fault_window_stream_whole_and_in_ranges(s3: Any, bucket: str) -> None:
    # Local objects go out as views of a memory map, faulted in 8 MiB windows ahead of the socket.
    data = hashlib.sha256(b"window").digest() * (17 * 1024 * 1024 // 32) + b"tail!"
    s3.put_object(Bucket=bucket, Key="main/huge", Body=data)
    assert s3.get_object(Bucket=bucket, Key="main/huge")["Body"].read() == data
    for first, last in ((1, len(data) - 2), ((8 << 20) - 1, (8 << 20) + 1), ((8 << 20) + 4097, len(data) - 1)):
        got = s3.get_object(Bucket=bucket, Key="main/huge", Range=f"bytes={first}-{last}")["Body"].read()
        assert got == data[first : last + 1]


def test_conditional_get(s3: Any, bucket: str) -> None:
    etag = s3.put_object(Bucket=bucket, Key="main/c", Body=b"v1")["ETag"]
    assert s3.get_object(Bucket=bucket, Key="main/c", IfMatch=etag)["Body"].read() == b"v1"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="main/c", IfMatch='"0000"')
    assert status(e) == 412 and code(e) == "PreconditionFailed"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="main/c", IfNoneMatch=etag)
    assert status(e) == 304
    past = datetime.now(UTC) - timedelta(days=1)
    future = datetime.now(UTC) + timedelta(days=1)
    assert s3.get_object(Bucket=bucket, Key="main/c", IfModifiedSince=past)["Body"].read() == b"v1"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="main/c", IfModifiedSince=future)
    assert status(e) == 304
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="main/c", IfUnmodifiedSince=past)
    assert status(e) == 412
    # If-Match true wins over If-Unmodified-Since false (S3's precedence).
    assert s3.get_object(Bucket=bucket, Key="main/c", IfMatch=etag, IfUnmodifiedSince=past)["Body"].read() == b"v1"


def test_conditional_put(s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/once", Body=b"first", IfNoneMatch="*")
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="main/once", Body=b"second", IfNoneMatch="*")
    assert status(e) == 412
    assert s3.get_object(Bucket=bucket, Key="main/once")["Body"].read() == b"first"


def test_put_of_what_a_key_holds_is_no_change(gw: Gateway, s3: Any, bucket: str) -> None:
    cat = gw.app().catalog
    s3.put_object(Bucket=bucket, Key="main/same", Body=b"v1", ContentType="text/plain", Metadata={"m": "1"})
    cat.commit(bucket, "main", "v1")
    held = cat.stat(bucket, "main", "same")
    # The same bytes, type and metadata again (a retried upload, a sync): the held object stays, time included.
    s3.put_object(Bucket=bucket, Key="main/same", Body=b"v1", ContentType="text/plain", Metadata={"m": "1"})
    assert cat.stat(bucket, "main", "same") == held
    assert list(cat.diff_uncommitted(bucket, "main")) == []
    # Anything a reader sees differently is a change: here the metadata.
    s3.put_object(Bucket=bucket, Key="main/same", Body=b"v1", ContentType="text/plain", Metadata={"m": "2"})
    assert [d.key for d in cat.diff_uncommitted(bucket, "main")] == [b"same"]


def test_response_overrides(s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/o", Body=b"x", ContentType="text/plain")
    got = s3.get_object(Bucket=bucket, Key="main/o", ResponseContentType="application/json", ResponseCacheControl="no-cache",
                        ResponseContentDisposition="inline")
    assert got["ContentType"] == "application/json" and got["CacheControl"] == "no-cache"
    assert got["ContentDisposition"] == "inline"


def test_copy_object_copies_no_data(gw: Gateway, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/src", Body=b"payload", Metadata={"m": "1"}, ContentType="text/x")
    res = s3.copy_object(Bucket=bucket, Key="main/dst", CopySource={"Bucket": bucket, "Key": "main/src"})
    assert res["CopyObjectResult"]["ETag"] == f'"{hashlib.md5(b"payload").hexdigest()}"'
    got = s3.get_object(Bucket=bucket, Key="main/dst")
    assert got["Body"].read() == b"payload" and got["Metadata"] == {"m": "1"} and got["ContentType"] == "text/x"
    cat = gw.app().catalog
    assert cat.stat(bucket, "main", "dst").address == cat.stat(bucket, "main", "src").address
    s3.copy_object(Bucket=bucket, Key="main/dst2", CopySource=f"{bucket}/main/src", MetadataDirective="REPLACE",
                   Metadata={"n": "2"}, ContentType="text/y")
    got = s3.get_object(Bucket=bucket, Key="main/dst2")
    assert got["Metadata"] == {"n": "2"} and got["ContentType"] == "text/y"
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=bucket, Key="main/src", CopySource={"Bucket": bucket, "Key": "main/src"})
    assert code(e) == "InvalidRequest"
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=bucket, Key="main/x", CopySource={"Bucket": bucket, "Key": "main/missing"})
    assert code(e) == "NoSuchKey"


def test_copy_between_branches_and_buckets(gw: Gateway, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/f", Body=b"data")
    gw.app().graveler.commit(bucket, "main", "f")
    gw.app().graveler.create_branch(bucket, "dev", "main")
    s3.copy_object(Bucket=bucket, Key="dev/g", CopySource={"Bucket": bucket, "Key": "main/f"})
    assert s3.get_object(Bucket=bucket, Key="dev/g")["Body"].read() == b"data"
    other = gw.bucket(s3)
    s3.copy_object(Bucket=other, Key="main/h", CopySource={"Bucket": bucket, "Key": "main/f"})
    assert s3.get_object(Bucket=other, Key="main/h")["Body"].read() == b"data"


def test_copy_conditions(s3: Any, bucket: str) -> None:
    etag = s3.put_object(Bucket=bucket, Key="main/s", Body=b"1")["ETag"]
    s3.copy_object(Bucket=bucket, Key="main/t", CopySource={"Bucket": bucket, "Key": "main/s"}, CopySourceIfMatch=etag)
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=bucket, Key="main/t", CopySource={"Bucket": bucket, "Key": "main/s"}, CopySourceIfNoneMatch=etag)
    assert status(e) == 412


def test_delete_object_and_objects(s3: Any, bucket: str) -> None:
    for i in range(5):
        s3.put_object(Bucket=bucket, Key=f"main/d/{i}", Body=b"x")
    s3.delete_object(Bucket=bucket, Key="main/d/0")
    s3.delete_object(Bucket=bucket, Key="main/d/never-existed")
    res = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": f"main/d/{i}"} for i in (1, 2, 9)]})
    assert sorted(d["Key"] for d in res["Deleted"]) == ["main/d/1", "main/d/2", "main/d/9"]
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="main/d/")["Contents"]]
    assert keys == ["main/d/3", "main/d/4"]
    res = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "main/d/3"}], "Quiet": True})
    assert "Deleted" not in res
    # The branch root, which Hadoop deletes as a parent "directory": nothing to do, no error.
    res = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "main/"}]})
    assert [d["Key"] for d in res["Deleted"]] == ["main/"] and "Errors" not in res
    s3.delete_object(Bucket=bucket, Key="main/")
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="main/d/")["Contents"]] == ["main/d/4"]


def test_presigned_get_and_put(gw: Gateway, s3: Any, bucket: str) -> None:
    put_url = s3.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": "main/p"}, ExpiresIn=60)
    req = urllib.request.Request(put_url, data=b"presigned body", method="PUT")
    with urllib.request.urlopen(req) as r:
        assert r.status == 200
    get_url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "main/p"}, ExpiresIn=60)
    with urllib.request.urlopen(get_url) as r:
        assert r.read() == b"presigned body"
    v2_url = gw.client(signature="s3").generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "main/p"})
    with urllib.request.urlopen(v2_url) as r:
        assert r.read() == b"presigned body"


def test_unsigned_payload_and_streaming_signed_chunks(gw: Gateway, bucket: str) -> None:
    """UNSIGNED-PAYLOAD and STREAMING-AWS4-HMAC-SHA256-PAYLOAD bodies (what SDKs send over HTTPS)."""
    from lakemount.gateway.sig.payload import ChunkSigning
    from lakemount.gateway.sig.v4 import signing_key

    from .helpers import encode_signed_chunks
    from .server_fixture import ADMIN_SECRET

    url = f"{gw.url}/{bucket}/main/unsigned"
    hdrs = signed_headers("PUT", url, {}, "UNSIGNED-PAYLOAD")
    with urllib.request.urlopen(urllib.request.Request(url, data=b"not hashed", headers=hdrs, method="PUT")) as r:
        assert r.status == 200
    s3 = gw.client()
    assert s3.get_object(Bucket=bucket, Key="main/unsigned")["Body"].read() == b"not hashed"

    chunks = [b"a" * 70000, b"b" * 1000]
    url = f"{gw.url}/{bucket}/main/chunked"
    extra = {"content-encoding": "aws-chunked", "x-amz-decoded-content-length": str(sum(map(len, chunks)))}
    hdrs = signed_headers("PUT", url, extra, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
    amz_date = hdrs["x-amz-date"]
    seed = hdrs["authorization"].rsplit("Signature=", 1)[1]
    signing = ChunkSigning(
        signing_key(ADMIN_SECRET, amz_date[:8], "us-east-1"), amz_date, f"{amz_date[:8]}/us-east-1/s3/aws4_request", seed
    )
    body = encode_signed_chunks(signing, chunks)
    with urllib.request.urlopen(urllib.request.Request(url, data=body, headers=hdrs, method="PUT")) as r:
        assert r.status == 200
    got = s3.get_object(Bucket=bucket, Key="main/chunked")
    assert got["Body"].read() == b"".join(chunks)
    assert "ContentEncoding" not in got
    # A tampered chunk is refused and stores nothing.
    hdrs = signed_headers("PUT", url + "2", extra, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
    seed = hdrs["authorization"].rsplit("Signature=", 1)[1]
    signing = ChunkSigning(signing.signing_key, hdrs["x-amz-date"], signing.scope, seed)
    tampered = bytearray(encode_signed_chunks(signing, chunks))
    tampered[200] ^= 1
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(urllib.request.Request(url + "2", data=bytes(tampered), headers=hdrs, method="PUT"))
    assert e.value.code == 403 and b"SignatureDoesNotMatch" in e.value.read()
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="main/chunked2")


def test_tags_and_commits_are_read_only_but_readable(gw: Gateway, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/t.txt", Body=b"v1")
    g = gw.app().graveler
    commit = g.commit(bucket, "main", "one").commit.id
    g.create_tag(bucket, "v1", "main")
    s3.put_object(Bucket=bucket, Key="main/t.txt", Body=b"v2")
    assert s3.get_object(Bucket=bucket, Key="v1/t.txt")["Body"].read() == b"v1"
    assert s3.get_object(Bucket=bucket, Key="main@/t.txt")["Body"].read() == b"v1"
    assert s3.get_object(Bucket=bucket, Key="main/t.txt")["Body"].read() == b"v2"
    assert s3.get_object(Bucket=bucket, Key=f"{commit[:12]}/t.txt")["Body"].read() == b"v1"
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="v1/t.txt", Body=b"no")
    assert code(e) == "AccessDenied"


def test_visible_at_once_to_the_catalog_and_back(gw: Gateway, s3: Any, bucket: str, tmp_path: Path) -> None:
    """The mount and the CLI read through the catalog: gateway writes are there at once, and theirs here."""
    s3.put_object(Bucket=bucket, Key="main/from-s3.txt", Body=b"via gateway")
    out = gw.cli("fs", "cat", f"lakefs://{bucket}/main/from-s3.txt").stdout
    assert out == "via gateway"
    src = tmp_path / "local.txt"
    src.write_bytes(b"via cli")
    gw.cli("fs", "upload", f"lakefs://{bucket}/main/from-cli.txt", "--source", str(src))
    assert s3.get_object(Bucket=bucket, Key="main/from-cli.txt")["Body"].read() == b"via cli"
    gw.app().catalog.put(bucket, "main", "from-catalog.txt", b"as the mount writes on close")
    assert s3.get_object(Bucket=bucket, Key="main/from-catalog.txt")["Body"].read() == b"as the mount writes on close"


def test_object_tags_read_as_an_empty_set_and_cannot_be_written(s3: Any, bucket: str) -> None:
    # The AWS CLI v2 reads the source's tags before a multipart copy (tests/gateway/test_clients_awscli.py).
    s3.put_object(Bucket=bucket, Key="main/tagged", Body=b"x")
    assert s3.get_object_tagging(Bucket=bucket, Key="main/tagged")["TagSet"] == []
    with pytest.raises(ClientError) as e:
        s3.get_object_tagging(Bucket=bucket, Key="main/absent")
    assert code(e) == "NoSuchKey"
    with pytest.raises(ClientError) as e:
        s3.put_object_tagging(Bucket=bucket, Key="main/tagged", Tagging={"TagSet": [{"Key": "k", "Value": "v"}]})
    assert code(e) == "NotImplemented"
    with pytest.raises(ClientError) as e:
        s3.delete_object_tagging(Bucket=bucket, Key="main/tagged")
    assert code(e) == "NotImplemented"
    with pytest.raises(ClientError) as e:
        s3.get_bucket_tagging(Bucket=bucket)
    assert code(e) == "NotImplemented"
    assert s3.get_object(Bucket=bucket, Key="main/tagged")["Body"].read() == b"x"


def test_control_characters_never_reach_response_headers(gw: Gateway, s3: Any, bucket: str) -> None:
    """A response-* override or stored metadata holding CR/LF neither splits the response nor makes it a 500."""
    from lakemount.catalog.model import Entry

    s3.put_object(Bucket=bucket, Key="main/o", Body=b"data")
    got = s3.get_object(Bucket=bucket, Key="main/o", ResponseContentDisposition="attachment\r\nSet-Cookie: pwned=1",
                        ResponseContentType="text/plain\r\n\r\n<script>")
    headers = got["ResponseMetadata"]["HTTPHeaders"]
    assert got["Body"].read() == b"data"
    assert "set-cookie" not in headers and headers["content-disposition"] == "attachment  Set-Cookie: pwned=1"
    assert headers["content-type"] == "text/plain    <script>"
    # Metadata stored before writers refused it (or by a writer that does not check) goes out cleaned.
    cat = gw.app().catalog
    old = cat.stat(bucket, "main", "o")
    cat.put_entry(bucket, "main", "legacy", Entry(old.address, old.size, old.etag, old.mtime_ns, "text/x\r\nX-Evil: 1",
                                                  (("bad name", "v"), ("ok", "a\r\nX-Evil: 2")), old.mode))
    got = s3.get_object(Bucket=bucket, Key="main/legacy")
    headers = got["ResponseMetadata"]["HTTPHeaders"]
    assert got["Body"].read() == b"data" and "x-evil" not in headers
    assert headers["content-type"] == "text/x  X-Evil: 1" and got["Metadata"] == {"ok": "a  X-Evil: 2"}


def test_writes_refuse_metadata_that_cannot_be_a_header(gw: Gateway, bucket: str) -> None:
    from lakemount.catalog.model import upload_entry
    from lakemount.errors import InvalidArgument

    for ctype, meta in (("text/plain\r\nX-Evil: 1", []), ("text/plain", [("a b", "v")]), ("text/plain", [("k", "v\x00")])):
        with pytest.raises(InvalidArgument):
            upload_entry("addr", 1, "etag", "p", ctype, meta)
    upload_entry("addr", 1, "etag", "p", "text/plain; charset=utf-8", [("s3:content-disposition", "inline"), ("k", "v\tw")])
