"""SigV4 verification against botocore's signers and AWS's documented examples."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config

from lakemount.gateway.errors import S3Error
from lakemount.gateway.sig.auth import authenticate
from lakemount.gateway.sig.canonical import canonical_query, uri_encode_path
from lakemount.gateway.sig.payload import EMPTY_SHA256, PayloadMode
from lakemount.gateway.sig.request import HttpRequest
from lakemount.gateway.sig.result import AuthScheme
from lakemount.gateway.sig.v4 import verify

from .helpers import AKID, CREDS, ENDPOINT, SECRET, from_prepared, lookup, presign_v4, sha256_hex, sign_v4, url_for

AWS_DOC_TIME = datetime(2013, 5, 24, tzinfo=UTC)

KEYS = [
    "plain.txt",
    "dir/sub/file.csv",
    "with space/and  two",
    "unicode/ünïcödé/日本語.parquet",
    "percent/100%/%41",
    "plus/a+b+c",
    "double//slash//",
    "/leading-slash",
    "dots/./and/../segments",
    "tilde~/star*/quote'\"/paren()/bang!",
    "semi;colon=eq&amp?hash#",
    "emoji/🦆.json",
]


def code_of(exc: pytest.ExceptionInfo[S3Error]) -> str:
    return exc.value.code


@pytest.mark.parametrize("key", KEYS)
def test_botocore_header_signatures_verify(key: str) -> None:
    req = sign_v4("PUT", url_for("repo", "main/" + key), {"x-amz-meta-owner": "  lots   of   space  "}, b"data")
    result = verify(req, lookup)
    assert result.access_key_id == AKID and result.scheme is AuthScheme.SIGV4_HEADER
    assert result.body.mode is PayloadMode.SHA256 and result.body.sha256 == sha256_hex(b"data")
    assert b"".join(result.decode_body([b"da", b"ta"])) == b"data"


@pytest.mark.parametrize(
    "query",
    [
        "list-type=2&prefix=main%2Fa%20b%2B%C3%A9&delimiter=%2F",
        "uploads",
        "uploadId=abc%2Fdef&partNumber=3",
        "prefix=&max-keys=10&encoding-type=url",
        "response-content-disposition=attachment%3B%20filename%3D%22x%20y.csv%22",
    ],
)
def test_botocore_query_strings_verify(query: str) -> None:
    assert verify(sign_v4("GET", url_for("repo", "", query)), lookup).access_key_id == AKID


@pytest.mark.parametrize("key", KEYS)
def test_botocore_presigned_urls_verify(key: str) -> None:
    req = presign_v4("GET", url_for("repo", "main/" + key, "response-content-type=text%2Fplain"), expires=300)
    result = authenticate(req, lookup)
    assert result.scheme is AuthScheme.SIGV4_QUERY and result.body.mode is PayloadMode.UNSIGNED


def test_presigned_url_expires() -> None:
    req = presign_v4("GET", url_for("repo", "main/a"), expires=60)
    authenticate(req, lookup, now=datetime.now(UTC) + timedelta(seconds=30))
    with pytest.raises(S3Error) as exc:
        authenticate(req, lookup, now=datetime.now(UTC) + timedelta(seconds=120))
    assert exc.value.code == "AccessDenied" and exc.value.message == "Request has expired"
    assert exc.value.http_status == 403 and exc.value.fields["X-Amz-Expires"] == 60
    with pytest.raises(S3Error, match="not valid yet"):
        authenticate(req, lookup, now=datetime.now(UTC) - timedelta(hours=1))


def test_presign_longer_than_a_week_is_refused() -> None:
    req = presign_v4("GET", url_for("repo", "main/a"), expires=604801)
    with pytest.raises(S3Error) as exc:
        authenticate(req, lookup)
    assert exc.value.code == "AuthorizationQueryParametersError"


def test_clock_skew() -> None:
    req = sign_v4("GET", url_for("repo", "main/a"))
    verify(req, lookup, now=datetime.now(UTC) + timedelta(minutes=14))
    for delta in (timedelta(minutes=16), timedelta(minutes=-16)):
        with pytest.raises(S3Error) as exc:
            verify(req, lookup, now=datetime.now(UTC) + delta)
        assert exc.value.code == "RequestTimeTooSkewed" and exc.value.http_status == 403


def _replace_header(req: HttpRequest, name: str, value: str) -> HttpRequest:
    headers = tuple((k, value if k.lower() == name else v) for k, v in req.headers)
    return dataclasses.replace(req, headers=headers)


def test_tampering_is_detected() -> None:
    req = sign_v4("PUT", url_for("repo", "main/a b"), {"x-amz-meta-a": "1"}, b"x")
    tampered = [
        dataclasses.replace(req, method="DELETE"),
        dataclasses.replace(req, path=req.path.replace("a%20b", "a%20c")),
        dataclasses.replace(req, query="acl"),
        _replace_header(req, "x-amz-meta-a", "2"),
        _replace_header(req, "host", "evil:8000"),
        _replace_header(req, "x-amz-content-sha256", sha256_hex(b"y")),
        _replace_header(req, "authorization", req.header_map()["authorization"][0][:-4] + "0000"),
    ]
    for bad in tampered:
        with pytest.raises(S3Error) as exc:
            verify(bad, lookup)
        assert exc.value.code == "SignatureDoesNotMatch", bad
        assert "CanonicalRequest" in exc.value.fields
        assert SECRET not in str(exc.value.fields)
    presigned = presign_v4("GET", url_for("repo", "main/a"))
    with pytest.raises(S3Error, match="SignatureDoesNotMatch"):
        authenticate(dataclasses.replace(presigned, path="/repo/main/b"), lookup)
    with pytest.raises(S3Error, match="SignatureDoesNotMatch"):
        authenticate(dataclasses.replace(presigned, query=presigned.query + "&versionId=1"), lookup)


def test_unsigned_amz_headers_are_refused() -> None:
    req = sign_v4("PUT", url_for("repo", "main/a"), body=b"x")
    added = dataclasses.replace(req, headers=(*req.headers, ("x-amz-copy-source", "/repo/main/secret")))
    with pytest.raises(S3Error) as exc:
        verify(added, lookup)
    assert exc.value.code == "AccessDenied" and exc.value.fields["HeadersNotSigned"] == "x-amz-copy-source"


def test_unknown_access_key() -> None:
    req = sign_v4("GET", url_for("repo", "main/a"))
    bad = _replace_header(req, "authorization", req.header_map()["authorization"][0].replace(AKID, "AKIANOBODY"))
    with pytest.raises(S3Error) as exc:
        verify(bad, lookup)
    assert exc.value.code == "InvalidAccessKeyId" and exc.value.fields["AWSAccessKeyId"] == "AKIANOBODY"


def test_region_enforced_only_when_configured() -> None:
    req = sign_v4("GET", url_for("repo", "main/a"), region="eu-west-3")
    assert verify(req, lookup).region == "eu-west-3"
    verify(req, lookup, region="eu-west-3")
    with pytest.raises(S3Error) as exc:
        verify(req, lookup, region="us-east-1")
    assert exc.value.code == "AuthorizationHeaderMalformed" and exc.value.fields["Region"] == "us-east-1"


_CRED = "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/"


@pytest.mark.parametrize(
    "authorization",
    [
        _CRED + "20130524/us-east-1/s3/aws4_request",
        _CRED + "2013/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=00",
        _CRED + "20130524/us-east-1/ec2/aws4_request, SignedHeaders=host, Signature=00",
        _CRED + "20130524/us-east-1/s3/aws5_request, SignedHeaders=host, Signature=00",
        _CRED + "20130524/us-east-1/s3/aws4_request, SignedHeaders=range, Signature=00",
    ],
)
def test_malformed_authorization(authorization: str) -> None:
    req = HttpRequest(
        "GET",
        "/test.txt",
        "",
        (("Host", "h"), ("x-amz-date", "20130524T000000Z"), ("Authorization", authorization)),
    )
    with pytest.raises(S3Error) as exc:
        authenticate(req, lookup, now=AWS_DOC_TIME)
    assert exc.value.code == "AuthorizationHeaderMalformed" and exc.value.http_status == 400


def test_dispatch_errors() -> None:
    with pytest.raises(S3Error) as exc:
        authenticate(HttpRequest("GET", "/repo"), lookup)
    assert exc.value.code == "AccessDenied"
    with pytest.raises(S3Error) as exc:
        authenticate(HttpRequest("GET", "/repo", "", (("Authorization", "Bearer x"),)), lookup)
    assert exc.value.code == "InvalidArgument"
    with pytest.raises(S3Error) as exc:
        authenticate(HttpRequest("GET", "/repo", "", (("Authorization", "AWS4-ECDSA-P256-SHA256 x"),)), lookup)
    assert exc.value.code == "NotImplemented"
    presigned = presign_v4("GET", url_for("repo", "main/a"))
    both = dataclasses.replace(presigned, headers=(*presigned.headers, ("Authorization", "AWS a:b")))
    with pytest.raises(S3Error) as exc:
        authenticate(both, lookup)
    assert exc.value.code == "InvalidArgument"
    missing = HttpRequest("GET", "/repo", "X-Amz-Algorithm=AWS4-HMAC-SHA256", (("Host", "h"),))
    with pytest.raises(S3Error) as exc:
        authenticate(missing, lookup)
    assert exc.value.code == "AuthorizationQueryParametersError"


def test_missing_date() -> None:
    req = sign_v4("GET", url_for("repo", "main/a"))
    no_date = dataclasses.replace(req, headers=tuple((k, v) for k, v in req.headers if k.lower() != "x-amz-date"))
    with pytest.raises(S3Error) as exc:
        verify(no_date, lookup)
    assert exc.value.code == "AccessDenied"


def test_bad_content_sha256_value() -> None:
    # The generic signer signs whatever x-amz-content-sha256 it is given.
    aws = AWSRequest(method="PUT", url=url_for("repo", "main/a"), data=b"x", headers={"X-Amz-Content-SHA256": "nope"})
    SigV4Auth(CREDS, "s3", "us-east-1").add_auth(aws)
    req = from_prepared(aws.prepare())
    with pytest.raises(S3Error) as exc:
        verify(req, lookup)
    assert exc.value.code == "InvalidArgument"


def test_payload_hash_mismatch_in_body() -> None:
    req = sign_v4("PUT", url_for("repo", "main/a"), body=b"expected")
    decoder = verify(req, lookup).body_decoder()
    decoder.feed(b"tampered")
    with pytest.raises(S3Error) as exc:
        decoder.finish()
    assert exc.value.code == "XAmzContentSHA256Mismatch"


def test_payload_hash_from_body_when_header_absent() -> None:
    # A generic (non-S3) SigV4 client hashes the body but sends no header.
    req = AWSRequest(method="POST", url=url_for("repo", "", "delete"), data=b"<Delete/>")
    SigV4Auth(CREDS, "s3", "us-east-1").add_auth(req)
    http = from_prepared(req.prepare(), body=lambda: b"<Delete/>")
    assert verify(http, lookup).body.sha256 == sha256_hex(b"<Delete/>")


# --- AWS documentation examples (sig-v4-header-based-auth, sigv4-query-string-auth) ----------


def _doc_request(
    method: str, path: str, query: str, headers: list[tuple[str, str]], signed: str, sig: str
) -> HttpRequest:
    auth = (
        f"AWS4-HMAC-SHA256 Credential={AKID}/20130524/us-east-1/s3/aws4_request,SignedHeaders={signed},Signature={sig}"
    )
    base = [("Host", "examplebucket.s3.amazonaws.com"), ("x-amz-date", "20130524T000000Z")]
    return HttpRequest(method, path, query, tuple(base + headers + [("Authorization", auth)]))


def test_aws_doc_get_object() -> None:
    req = _doc_request(
        "GET",
        "/test.txt",
        "",
        [("Range", "bytes=0-9"), ("x-amz-content-sha256", EMPTY_SHA256)],
        "host;range;x-amz-content-sha256;x-amz-date",
        "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
    )
    verify(req, lookup, now=AWS_DOC_TIME)


def test_aws_doc_put_object() -> None:
    body = b"Welcome to Amazon S3."
    req = _doc_request(
        "PUT",
        "/test%24file.text",
        "",
        [
            ("Date", "Fri, 24 May 2013 00:00:00 GMT"),
            ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
            ("x-amz-content-sha256", sha256_hex(body)),
        ],
        "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class",
        "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd",
    )
    result = verify(req, lookup, now=AWS_DOC_TIME)
    assert b"".join(result.decode_body([body])) == body
    # The same request with '$' left unencoded on the wire verifies too.
    verify(dataclasses.replace(req, path="/test$file.text"), lookup, now=AWS_DOC_TIME)


def test_aws_doc_get_bucket_lifecycle_and_list() -> None:
    empty = [("x-amz-content-sha256", EMPTY_SHA256)]
    signed = "host;x-amz-content-sha256;x-amz-date"
    verify(
        _doc_request(
            "GET", "/", "lifecycle", empty, signed, "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"
        ),
        lookup,
        now=AWS_DOC_TIME,
    )
    verify(
        _doc_request(
            "GET",
            "/",
            "max-keys=2&prefix=J",
            empty,
            signed,
            "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7",
        ),
        lookup,
        now=AWS_DOC_TIME,
    )


def test_aws_doc_presigned_url() -> None:
    query = (
        "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2F"
        "aws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
        "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
    )
    req = HttpRequest("GET", "/test.txt", query, (("Host", "examplebucket.s3.amazonaws.com"),))
    authenticate(req, lookup, now=AWS_DOC_TIME + timedelta(hours=23))
    with pytest.raises(S3Error, match="expired"):
        authenticate(req, lookup, now=AWS_DOC_TIME + timedelta(hours=25))


def test_canonical_encoding_rules() -> None:
    assert uri_encode_path("/b/a b/ü+%2B//x~") == "/b/a%20b/%C3%BC%2B%2B//x~"
    assert uri_encode_path("") == "/"
    assert canonical_query("b=2&a=1&a=0&c") == "a=0&a=1&b=2&c="
    assert canonical_query("prefix=a+b") == "prefix=a%2Bb"
    assert canonical_query("prefix=a+b", plus_is_space=True) == "prefix=a%20b"
    assert canonical_query("X-Amz-Signature=x&a=%7e", exclude="X-Amz-Signature") == "a=~"


# --- real boto3 clients, captured before they reach the network ----------------------


class _Sent(Exception):
    pass


def _capture(client: Any) -> list[Any]:
    seen = []

    def handler(request: Any, **_kwargs: Any) -> None:
        seen.append(request)
        raise _Sent

    client.meta.events.register("before-send.s3", handler)
    return seen


def _client(endpoint: str = ENDPOINT, **config: Any) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=AKID,
        aws_secret_access_key=SECRET,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, **config),
    )


def test_boto3_operations_verify() -> None:
    client = _client()
    seen = _capture(client)
    calls: list[Callable[[], object]] = [
        lambda: client.put_object(
            Bucket="repo",
            Key="main/dir/ü b+c.csv",
            Body=b"a,b\n1,2\n",
            Metadata={"Owner": "Zoe  Smith"},
            ContentType="text/csv",
        ),
        lambda: client.list_objects_v2(Bucket="repo", Prefix="main/dir/ü b+", Delimiter="/"),
        lambda: client.list_objects(Bucket="repo", Prefix="main/", Marker="main/a b"),
        lambda: client.delete_objects(Bucket="repo", Delete={"Objects": [{"Key": "main/a"}, {"Key": "main/b c"}]}),
        lambda: client.create_multipart_upload(Bucket="repo", Key="main/big file"),
        lambda: client.upload_part(Bucket="repo", Key="main/big file", UploadId="u/1+2", PartNumber=2, Body=b"x" * 100),
        lambda: client.copy_object(Bucket="repo", Key="main/copy", CopySource={"Bucket": "repo", "Key": "main/ü b"}),
        lambda: client.head_object(Bucket="repo", Key="main//double", IfMatch='"abc"'),
        lambda: client.get_object(
            Bucket="repo", Key="main/x", Range="bytes=0-9", ResponseContentDisposition='attachment; filename="x y"'
        ),
    ]
    for call in calls:
        with pytest.raises(_Sent):
            call()
    assert len(seen) == len(calls)
    for prepared in seen:
        body = prepared.body
        raw = body if isinstance(body, bytes) else (body.read() if body is not None else b"")
        result = authenticate(from_prepared(prepared), lookup)
        decoded = b"".join(result.decode_body([raw]))
        assert result.access_key_id == AKID
        if prepared.method == "PUT" and "uploadId" not in prepared.url:
            assert decoded == b"a,b\n1,2\n" or prepared.headers.get("x-amz-copy-source")


def test_boto3_presigned_urls_verify() -> None:
    client = _client(signature_version="s3v4")
    url = client.generate_presigned_url(
        "get_object",
        Params={"Bucket": "repo", "Key": "main/ä b+c.txt", "ResponseContentType": "text/plain; charset=utf-8"},
        ExpiresIn=600,
    )
    from urllib.parse import urlsplit

    split = urlsplit(url)
    req = HttpRequest("GET", split.path, split.query, (("Host", split.netloc),))
    assert authenticate(req, lookup).scheme is AuthScheme.SIGV4_QUERY
    put_url = client.generate_presigned_url("put_object", Params={"Bucket": "repo", "Key": "main/up"}, ExpiresIn=60)
    split = urlsplit(put_url)
    req = HttpRequest("PUT", split.path, split.query, (("Host", split.netloc), ("Content-Length", "3")))
    result = authenticate(req, lookup)
    assert b"".join(result.decode_body([b"abc"])) == b"abc"
