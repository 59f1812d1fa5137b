"""SigV2 verification against botocore's HmacV1 signers and AWS's documented examples."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
from botocore.config import Config

from lakemount.gateway.errors import S3Error
from lakemount.gateway.sig.auth import authenticate
from lakemount.gateway.sig.request import HttpRequest
from lakemount.gateway.sig.result import AuthScheme
from lakemount.gateway.sig.v2 import canonical_amz_headers, canonical_resource

from .helpers import AKID, SECRET, from_prepared, lookup, presign_v2, sign_v2, url_for
from .test_sigv4 import KEYS


@pytest.mark.parametrize("key", KEYS)
def test_botocore_header_signatures_verify(key: str) -> None:
    headers = {
        "Content-Type": "text/csv",
        "Content-MD5": "1B2M2Y8AsgTpgAmY7PhCfg==",
        "x-amz-meta-Owner": "  alice  ",
        "X-Amz-Storage-Class": "STANDARD",
    }
    req = sign_v2("PUT", url_for("repo", "main/" + key), headers)
    result = authenticate(req, lookup)
    assert result.scheme is AuthScheme.SIGV2_HEADER and result.access_key_id == AKID


@pytest.mark.parametrize(
    "query",
    [
        "uploads",
        "uploadId=a%2Fb%2Bc&partNumber=7",
        "acl",
        "versionId=3%2F4",
        "response-content-disposition=attachment%3B%20filename%3D%22a%20b%22&response-content-type=text%2Fplain",
        "list-type=2&prefix=a%20b&delimiter=%2F",  # not sub-resources: not signed, still fine
        "delete",
        "tagging&versionId=1",
    ],
)
def test_subresources(query: str) -> None:
    authenticate(sign_v2("POST", url_for("repo", "main/k", query)), lookup)


def test_virtual_hosted_style_signs_the_bucket() -> None:
    req = sign_v2("GET", "http://repo.s3.localhost:8000/main/a%20b", auth_path="/repo/main/a%20b")
    authenticate(req, lookup, virtual_host_bucket="repo")
    with pytest.raises(S3Error, match="SignatureDoesNotMatch"):
        authenticate(req, lookup)


def test_tampering() -> None:
    req = sign_v2("PUT", url_for("repo", "main/a", "uploadId=1&partNumber=1"), {"x-amz-meta-a": "1"})
    headers_changed = tuple((k, "2" if k == "x-amz-meta-a" else v) for k, v in req.headers)
    for bad in [
        dataclasses.replace(req, method="POST"),
        dataclasses.replace(req, path="/repo/main/b"),
        dataclasses.replace(req, query="uploadId=1&partNumber=2"),
        dataclasses.replace(req, headers=headers_changed),
        dataclasses.replace(req, headers=(*req.headers, ("x-amz-acl", "public-read"))),
    ]:
        with pytest.raises(S3Error) as exc:
            authenticate(bad, lookup)
        assert exc.value.code == "SignatureDoesNotMatch"
        assert SECRET not in str(exc.value.fields)


def test_skew_and_missing_date() -> None:
    req = sign_v2("GET", url_for("repo", "main/a"))
    authenticate(req, lookup, now=datetime.now(UTC) + timedelta(minutes=10))
    with pytest.raises(S3Error) as exc:
        authenticate(req, lookup, now=datetime.now(UTC) + timedelta(minutes=20))
    assert exc.value.code == "RequestTimeTooSkewed"
    no_date = dataclasses.replace(req, headers=tuple((k, v) for k, v in req.headers if k.lower() != "date"))
    with pytest.raises(S3Error) as exc:
        authenticate(no_date, lookup)
    assert exc.value.code == "AccessDenied"


def test_malformed_and_unknown_key() -> None:
    for auth in ("AWS nocolon", "AWS :sig", "AWS key:"):
        req = HttpRequest("GET", "/r", "", (("Authorization", auth), ("Date", "x")))
        with pytest.raises(S3Error) as exc:
            authenticate(req, lookup)
        assert exc.value.code == "AuthorizationHeaderMalformed"
    req = sign_v2("GET", url_for("repo", "main/a"))
    other = tuple((k, v.replace(AKID, "AKIAOTHER") if k == "Authorization" else v) for k, v in req.headers)
    with pytest.raises(S3Error) as exc:
        authenticate(dataclasses.replace(req, headers=other), lookup)
    assert exc.value.code == "InvalidAccessKeyId"


@pytest.mark.parametrize("key", KEYS[:6])
def test_presigned_query(key: str) -> None:
    req = presign_v2("GET", url_for("repo", "main/" + key, "response-content-type=text%2Fplain"), expires=60)
    assert authenticate(req, lookup).scheme is AuthScheme.SIGV2_QUERY


def test_presigned_query_with_amz_headers_in_query() -> None:
    req = presign_v2("PUT", url_for("repo", "main/a"), headers={"x-amz-acl": "private", "Content-Type": "text/plain"})
    assert "x-amz-acl=private" in req.query
    # The client sending the URL also sends the Content-Type it was signed for.
    req = dataclasses.replace(req, headers=(*req.headers, ("Content-Type", "text/plain")))
    authenticate(req, lookup)


def test_presigned_query_expiry_and_tampering() -> None:
    req = presign_v2("GET", url_for("repo", "main/a"), expires=60)
    with pytest.raises(S3Error) as exc:
        authenticate(req, lookup, now=datetime.now(UTC) + timedelta(seconds=120))
    assert exc.value.code == "AccessDenied" and exc.value.message == "Request has expired"
    with pytest.raises(S3Error, match="SignatureDoesNotMatch"):
        authenticate(dataclasses.replace(req, path="/repo/main/b"), lookup)
    longer = req.query.replace(f"Expires={int(time.time()) + 60}", f"Expires={int(time.time()) + 6000}")
    if longer != req.query:
        with pytest.raises(S3Error, match="SignatureDoesNotMatch"):
            authenticate(dataclasses.replace(req, query=longer), lookup)
    missing = HttpRequest("GET", "/r", "AWSAccessKeyId=x&Signature=y", ())
    with pytest.raises(S3Error, match="AuthorizationQueryParametersError"):
        authenticate(missing, lookup)


def test_boto3_with_signature_version_s3() -> None:
    client = boto3.client(
        "s3",
        endpoint_url="http://localhost:8000",
        aws_access_key_id=AKID,
        aws_secret_access_key=SECRET,
        region_name="us-east-1",
        config=Config(signature_version="s3", s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )
    seen = []

    class Sent(Exception):
        pass

    def capture(request: Any, **_kwargs: Any) -> None:
        seen.append(request)
        raise Sent

    client.meta.events.register("before-send.s3", capture)
    calls: list[Callable[[], object]] = [
        lambda: client.put_object(Bucket="repo", Key="main/ü b+c", Body=b"x", Metadata={"a": "b"}),
        lambda: client.list_objects(Bucket="repo", Prefix="main/ü"),
        lambda: client.complete_multipart_upload(
            Bucket="repo",
            Key="main/big",
            UploadId="abc",
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": '"e"'}]},
        ),
    ]
    for call in calls:
        with pytest.raises(Sent):
            call()
    for prepared in seen:
        result = authenticate(from_prepared(prepared), lookup)
        body = prepared.body
        raw = body if isinstance(body, bytes) else (body.read() if body is not None else b"")
        b"".join(result.decode_body([raw]))
    url = client.generate_presigned_url("get_object", Params={"Bucket": "repo", "Key": "main/a b"}, ExpiresIn=60)
    split = urlsplit(url)
    authenticate(HttpRequest("GET", split.path, split.query, (("Host", split.netloc),)), lookup)


# --- AWS documentation examples (RESTAuthentication, 2007 johnsmith requests) -----------


def _doc(method: str, path: str, query: str, headers: list[tuple[str, str]], sig: str) -> HttpRequest:
    return HttpRequest(method, path, query, (*headers, ("Authorization", f"AWS {AKID}:{sig}")))


@pytest.mark.parametrize(
    ("request_", "bucket", "now"),
    [
        (
            _doc(
                "GET",
                "/photos/puppy.jpg",
                "",
                [("Host", "johnsmith.s3.amazonaws.com"), ("Date", "Tue, 27 Mar 2007 19:36:42 +0000")],
                "bWq2s1WEIj+Ydj0vQ697zp+IXMU=",
            ),
            "johnsmith",
            datetime(2007, 3, 27, 19, 36, 42, tzinfo=UTC),
        ),
        (
            _doc(
                "PUT",
                "/photos/puppy.jpg",
                "",
                [
                    ("Host", "johnsmith.s3.amazonaws.com"),
                    ("Content-Type", "image/jpeg"),
                    ("Content-Length", "94328"),
                    ("Date", "Tue, 27 Mar 2007 21:15:45 +0000"),
                ],
                "MyyxeRY7whkBe+bq8fHCL/2kKUg=",
            ),
            "johnsmith",
            datetime(2007, 3, 27, 21, 15, 45, tzinfo=UTC),
        ),
        (
            _doc(
                "GET",
                "/",
                "prefix=photos&max-keys=50&marker=puppy",
                [
                    ("User-Agent", "Mozilla/5.0"),
                    ("Host", "johnsmith.s3.amazonaws.com"),
                    ("Date", "Tue, 27 Mar 2007 19:42:41 +0000"),
                ],
                "htDYFYduRNen8P9ZfE/s9SuKy0U=",
            ),
            "johnsmith",
            datetime(2007, 3, 27, 19, 42, 41, tzinfo=UTC),
        ),
        (
            _doc(
                "GET",
                "/",
                "acl",
                [("Host", "johnsmith.s3.amazonaws.com"), ("Date", "Tue, 27 Mar 2007 19:44:46 +0000")],
                "c2WLPFtWHVgbEmeEG93a4cG37dM=",
            ),
            "johnsmith",
            datetime(2007, 3, 27, 19, 44, 46, tzinfo=UTC),
        ),
        (
            _doc(
                "PUT",
                "/db-backup.dat.gz",
                "",
                [
                    ("User-Agent", "curl/7.15.5"),
                    ("Host", "static.johnsmith.net:8080"),
                    ("Date", "Tue, 27 Mar 2007 21:06:08 +0000"),
                    ("x-amz-acl", "public-read"),
                    ("content-type", "application/x-download"),
                    ("Content-MD5", "4gJE4saaMU4BqNR0kLY+lw=="),
                    ("X-Amz-Meta-ReviewedBy", "joe@johnsmith.net"),
                    ("X-Amz-Meta-ReviewedBy", "jane@johnsmith.net"),
                    ("X-Amz-Meta-FileChecksum", "0x02661779"),
                    ("X-Amz-Meta-ChecksumAlgorithm", "crc32"),
                    ("Content-Disposition", "attachment; filename=database.dat"),
                    ("Content-Encoding", "gzip"),
                    ("Content-Length", "5913339"),
                ],
                "ilyl83RwaSoYIEdixDQcA4OnAnc=",
            ),
            "static.johnsmith.net",
            datetime(2007, 3, 27, 21, 6, 8, tzinfo=UTC),
        ),
        (
            _doc(
                "GET",
                "/",
                "",
                [("Host", "s3.amazonaws.com"), ("Date", "Wed, 28 Mar 2007 01:29:59 +0000")],
                "qGdzdERIC03wnaRNKh6OqZehG9s=",
            ),
            None,
            datetime(2007, 3, 28, 1, 29, 59, tzinfo=UTC),
        ),
        (
            _doc(
                "GET",
                "/dictionary/fran%C3%A7ais/pr%c3%a9f%c3%a8re",
                "",
                [("Host", "s3.amazonaws.com"), ("Date", "Wed, 28 Mar 2007 01:49:49 +0000")],
                "DNEZGsoieTZ92F3bUfSPQcbGmlM=",
            ),
            None,
            datetime(2007, 3, 28, 1, 49, 49, tzinfo=UTC),
        ),
    ],
)
def test_aws_doc_examples(request_: HttpRequest, bucket: str | None, now: datetime) -> None:
    authenticate(request_, lookup, now=now, virtual_host_bucket=bucket)


def test_canonical_pieces() -> None:
    assert (
        canonical_resource("/b/k", "uploadId=x%2Fy&partNumber=2&foo=1&uploads")
        == "/b/k?partNumber=2&uploadId=x/y&uploads"
    )
    assert canonical_resource("/k", "uploads=", bucket="b") == "/b/k?uploads="
    assert (
        canonical_amz_headers([("X-Amz-B", " 2 "), ("x-amz-a", "1"), ("x-amz-b", "3"), ("Other", "x")])
        == "x-amz-a:1\nx-amz-b:2,3\n"
    )
