"""aws-chunked bodies: signed chunks, trailers, checksums, framing errors.

The AWS documentation example (sigv4-streaming and sigv4-streaming-trailers:
65 KiB of 'a' in a 64 KiB and a 1 KiB chunk, signed on 2013-05-24) is the
reference; streams of our own signer and of botocore cover the rest.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import random
import zlib
from datetime import UTC, datetime
from typing import Any

import boto3
import crc32c
import pytest
from botocore.config import Config

from lakemount.gateway.errors import S3Error
from lakemount.gateway.sig.auth import authenticate
from lakemount.gateway.sig.checksums import crc64_nvme
from lakemount.gateway.sig.chunked import BodyDecoder
from lakemount.gateway.sig.payload import STREAMING_SIGNED, BodyPlan, ChunkSigning, PayloadMode, body_plan
from lakemount.gateway.sig.request import HttpRequest
from lakemount.gateway.sig.result import AuthResult, AuthScheme
from lakemount.gateway.sig.v4 import signing_key, verify
from lakemount.serving.metadata import strip_aws_chunked

from .helpers import AKID, SECRET, encode_signed_chunks, from_prepared, lookup

DOC_TIME = datetime(2013, 5, 24, tzinfo=UTC)
DOC_SCOPE = "20130524/us-east-1/s3/aws4_request"
DOC_PAYLOAD = b"a" * 66560
SEED = "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"
DOC_BODY = (
    b"10000;chunk-signature=ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648\r\n"
    + b"a" * 65536
    + b"\r\n400;chunk-signature=0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497\r\n"
    + b"a" * 1024
    + b"\r\n0;chunk-signature=b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9\r\n\r\n"
)
TRAILER_SEED = "106e2a8a18243abcf37539882f36619c00e2dfc72633413f02d3b74544bfeb8e"
TRAILER_BODY = (
    b"10000;chunk-signature=b474d8862b1487a5145d686f57f013e54db672cee1c953b3010fb58501ef5aa2\r\n"
    + b"a" * 65536
    + b"\r\n400;chunk-signature=1c1344b170168f8e65b41376b44b20fe354e373826ccbbe2c1d40a8cae51e5c7\r\n"
    + b"a" * 1024
    + b"\r\n0;chunk-signature=2ca2aba2005185cf7159c6277faf83795951dd77a3a99e6e65d5c9f85863f992\r\n"
    + b"x-amz-checksum-crc32c:sOO8/Q==\r\n"
    + b"x-amz-trailer-signature:d81f82fc3505edab99d459891051a732e8730629a2e4a59689829ca17fe2e435\r\n\r\n"
)


def doc_request() -> HttpRequest:
    auth = (
        f"AWS4-HMAC-SHA256 Credential={AKID}/{DOC_SCOPE},SignedHeaders=content-encoding;content-length;host;"
        f"x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class,Signature={SEED}"
    )
    headers = (
        ("Host", "s3.amazonaws.com"),
        ("x-amz-date", "20130524T000000Z"),
        ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
        ("Authorization", auth),
        ("x-amz-content-sha256", STREAMING_SIGNED),
        ("Content-Encoding", "aws-chunked"),
        ("x-amz-decoded-content-length", "66560"),
        ("Content-Length", "66824"),
    )
    return HttpRequest("PUT", "/examplebucket/chunkObject.txt", "", headers)


def feed_in_pieces(decoder: BodyDecoder, body: bytes, sizes: list[int]) -> bytes:
    out = bytearray()
    pos, i = 0, 0
    while pos < len(body):
        n = sizes[i % len(sizes)]
        out += decoder.feed(body[pos : pos + n])
        pos, i = pos + n, i + 1
    return bytes(out)


def doc_signing(seed: str) -> ChunkSigning:
    return ChunkSigning(signing_key(SECRET, "20130524", "us-east-1"), "20130524T000000Z", DOC_SCOPE, seed)


@pytest.mark.parametrize("sizes", [[len(DOC_BODY)], [1], [7, 4096, 3], [65536 + 90, 1]])
def test_aws_doc_chunked_upload(sizes: list[int]) -> None:
    result = verify(doc_request(), lookup, now=DOC_TIME)
    assert result.body.mode is PayloadMode.STREAMING_SIGNED and result.body.decoded_length == 66560
    decoder = result.body_decoder()
    assert feed_in_pieces(decoder, DOC_BODY, sizes) == DOC_PAYLOAD
    summary = decoder.finish()
    assert summary.length == 66560 and summary.md5 == hashlib.md5(DOC_PAYLOAD).digest()


def test_signed_chunk_bytes_are_held_until_verified() -> None:
    result = verify(doc_request(), lookup, now=DOC_TIME)
    tampered = bytearray(DOC_BODY)
    tampered[100] = ord("b")  # inside the first chunk
    decoder = result.body_decoder()
    released = decoder.feed(bytes(tampered[:65000]))
    assert released == b""  # nothing of an unverified chunk escapes
    with pytest.raises(S3Error) as exc:
        decoder.feed(bytes(tampered[65000:]))
    assert exc.value.code == "SignatureDoesNotMatch"


def test_chunk_signature_chain_order_matters() -> None:
    # Swapping the two data chunks keeps each signature valid in isolation but
    # breaks the chain.
    signing = doc_signing(SEED)
    body = encode_signed_chunks(signing, [b"x" * 10, b"y" * 10])
    first = body.index(b"\r\n", body.index(b"x" * 10)) + 2
    second = body.index(b"\r\n", body.index(b"y" * 10)) + 2
    swapped = body[first:second] + body[:first] + body[second:]
    plan = BodyPlan(PayloadMode.STREAMING_SIGNED, decoded_length=20, chunk_signing=signing)
    decoder = BodyDecoder(plan)
    with pytest.raises(S3Error, match="SignatureDoesNotMatch"):
        decoder.feed(swapped)


def test_aws_doc_trailer_upload() -> None:
    plan = BodyPlan(
        PayloadMode.STREAMING_SIGNED_TRAILER,
        trailers=("x-amz-checksum-crc32c",),
        decoded_length=66560,
        chunk_signing=doc_signing(TRAILER_SEED),
    )
    decoder = BodyDecoder(plan)
    assert feed_in_pieces(decoder, TRAILER_BODY, [1000]) == DOC_PAYLOAD
    assert dict(decoder.finish().checksums) == {"crc32c": "sOO8/Q=="}
    # A changed trailer breaks its signature even with a matching checksum line.
    forged = TRAILER_BODY.replace(b"d81f82fc", b"d81f82fd")
    decoder = BodyDecoder(plan)
    decoder.feed(forged)
    with pytest.raises(S3Error, match="SignatureDoesNotMatch"):
        decoder.finish()


def test_aws_doc_trailer_seed_signature() -> None:
    # The documentation's trailer example signs these headers with the seed.
    auth = (
        f"AWS4-HMAC-SHA256 Credential={AKID}/{DOC_SCOPE},SignedHeaders=content-encoding;host;x-amz-content-sha256;"
        f"x-amz-date;x-amz-decoded-content-length;x-amz-storage-class;x-amz-trailer,Signature={TRAILER_SEED}"
    )
    headers = (
        ("Host", "s3.amazonaws.com"),
        ("x-amz-date", "20130524T000000Z"),
        ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
        ("Authorization", auth),
        ("x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"),
        ("Content-Encoding", "aws-chunked"),
        ("x-amz-decoded-content-length", "66560"),
        ("x-amz-trailer", "x-amz-checksum-crc32c"),
    )
    result = verify(HttpRequest("PUT", "/examplebucket/chunkObject.txt", "", headers), lookup, now=DOC_TIME)
    assert b"".join(result.decode_body([TRAILER_BODY])) == DOC_PAYLOAD


def test_own_signer_random_chunks_and_pieces() -> None:
    rng = random.Random(7)
    signing = doc_signing(SEED)
    for _ in range(20):
        chunks = [rng.randbytes(rng.randint(1, 3000)) for _ in range(rng.randint(0, 6))]
        payload = b"".join(chunks)
        crc = base64.b64encode(zlib.crc32(payload).to_bytes(4, "big")).decode()
        trailers = [("x-amz-checksum-crc32", crc)] if rng.random() < 0.5 else []
        body = encode_signed_chunks(signing, chunks, trailers)
        plan = BodyPlan(
            PayloadMode.STREAMING_SIGNED_TRAILER if trailers else PayloadMode.STREAMING_SIGNED,
            trailers=tuple(n for n, _ in trailers),
            decoded_length=len(payload),
            chunk_signing=signing,
        )
        decoder = BodyDecoder(plan)
        assert feed_in_pieces(decoder, body, [rng.randint(1, 500) for _ in range(5)]) == payload
        assert decoder.finish().length == len(payload)


@pytest.mark.parametrize(
    ("body", "decoded_length", "code"),
    [
        (b"5;chunk-signature=x\r\nhello\r\n", 5, "SignatureDoesNotMatch"),
        (b"zz\r\n", 0, "InvalidRequest"),
        (b"5\r\nhello\r\n", 5, "IncompleteBody"),  # no final chunk
        (b"5\r\nhelloXX0\r\n\r\n", 5, "InvalidRequest"),  # missing CRLF after data
        (b"5\r\nhello\r\n0\r\n\r\n", 6, "IncompleteBody"),
        (b"6\r\nhello!\r\n0\r\n\r\n", 5, "IncompleteBody"),
        (b"0\r\n\r\ngarbage", 0, "InvalidRequest"),
    ],
)
def test_framing_errors(body: bytes, decoded_length: int, code: str) -> None:
    signing = doc_signing(SEED) if b"chunk-signature" in body else None
    mode = PayloadMode.STREAMING_SIGNED if signing else PayloadMode.STREAMING_UNSIGNED_TRAILER
    plan = BodyPlan(mode, decoded_length=decoded_length, chunk_signing=signing)
    decoder = BodyDecoder(plan)
    with pytest.raises(S3Error) as exc:
        decoder.feed(body)
        decoder.finish()
    assert exc.value.code == code


@pytest.mark.parametrize(
    ("body", "code"),
    [
        # A signed chunk is held until its signature is checked: at most 16 MiB of it.
        (b"1000001;chunk-signature=" + b"a" * 64 + b"\r\n", "InvalidChunkSizeError"),
        (b"5" + b" " * 5000, "InvalidRequest"),  # a chunk line that never ends: 4 KiB
        (b"0\r\n" + b"x-amz-checksum-crc32: AAAAAA==\r\n" * 40, "MalformedTrailerError"),  # trailers: 32 lines, 16 KiB
    ],
)
def test_chunked_bodies_are_bounded(body: bytes, code: str) -> None:
    signing = doc_signing(SEED) if b"chunk-signature" in body else None
    mode = PayloadMode.STREAMING_SIGNED if signing else PayloadMode.STREAMING_UNSIGNED_TRAILER
    decoder = BodyDecoder(BodyPlan(mode, decoded_length=1 << 30, chunk_signing=signing))
    with pytest.raises(S3Error) as exc:
        decoder.feed(body)
    assert exc.value.code == code


def _https_client() -> Any:
    return boto3.client(
        "s3",
        endpoint_url="https://localhost:8443",
        aws_access_key_id=AKID,
        aws_secret_access_key=SECRET,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )


class _Sent(Exception):
    pass


@pytest.mark.parametrize("algorithm", ["CRC32", "SHA1", "SHA256"])
def test_botocore_unsigned_trailer_upload(algorithm: str) -> None:
    # Over HTTPS botocore streams aws-chunked with the checksum in a trailer.
    client = _https_client()
    seen = []

    def capture(request: Any, **_kwargs: Any) -> None:
        seen.append(request)
        raise _Sent

    client.meta.events.register("before-send.s3", capture)
    payload = random.Random(1).randbytes(200_000)
    with pytest.raises(_Sent):
        client.put_object(Bucket="repo", Key="main/blob", Body=payload, ChecksumAlgorithm=algorithm)
    prepared = seen[0]
    raw = prepared.body.read()
    result = authenticate(from_prepared(prepared), lookup)
    assert result.body.mode is PayloadMode.STREAMING_UNSIGNED_TRAILER
    decoder = result.body_decoder()
    assert feed_in_pieces(decoder, raw, [8191]) == payload
    assert list(decoder.finish().checksums) == [algorithm.lower()]
    # A flipped payload byte is caught by the trailing checksum.
    bad = bytearray(raw)
    bad[raw.index(b"\r\n") + 10] ^= 1
    decoder = result.body_decoder()
    decoder.feed(bytes(bad))
    with pytest.raises(S3Error) as exc:
        decoder.finish()
    assert exc.value.code == "BadDigest"


def test_header_checksums_and_content_md5() -> None:
    payload = b"hello world"
    good_md5 = base64.b64encode(hashlib.md5(payload).digest()).decode()
    good_crc32c = base64.b64encode(crc32c.crc32c(payload).to_bytes(4, "big")).decode()
    good_crc64 = base64.b64encode(crc64_nvme(payload).to_bytes(8, "big")).decode()
    headers = {
        "content-md5": [good_md5],
        "x-amz-checksum-crc32c": [good_crc32c],
        "x-amz-checksum-crc64nvme": [good_crc64],
        "content-length": [str(len(payload))],
    }
    plan = body_plan(headers, "UNSIGNED-PAYLOAD", None)
    summary = AuthResult("k", AuthScheme.SIGV2_HEADER, plan).body_decoder()
    summary.feed(payload)
    assert set(summary.finish().checksums) == {"crc32c", "crc64nvme"}
    for name, value, code in [
        ("content-md5", base64.b64encode(b"0" * 16).decode(), "BadDigest"),
        ("content-md5", "not-base64!", "InvalidDigest"),
        ("x-amz-checksum-crc32c", base64.b64encode(b"\0\0\0\0").decode(), "BadDigest"),
        ("x-amz-checksum-crc32", "AAAA", "InvalidDigest"),
    ]:
        with pytest.raises(S3Error) as exc:
            decoder = BodyDecoder(body_plan({**headers, name: [value]}, "UNSIGNED-PAYLOAD", None))
            decoder.feed(payload)
            decoder.finish()
        assert exc.value.code == code, (name, value)


def test_short_identity_body() -> None:
    decoder = BodyDecoder(body_plan({"content-length": ["10"]}, None, None))
    decoder.feed(b"12345")
    with pytest.raises(S3Error, match="IncompleteBody"):
        decoder.finish()


def test_plan_errors() -> None:
    with pytest.raises(S3Error, match="InvalidRequest"):
        body_plan({}, STREAMING_SIGNED, None)  # signed chunks need a seed signature
    with pytest.raises(S3Error, match="MissingContentLength"):
        body_plan({"x-amz-trailer": ["x-amz-checksum-crc32"]}, "STREAMING-UNSIGNED-PAYLOAD-TRAILER", None)
    with pytest.raises(S3Error, match="InvalidRequest"):
        body_plan({"x-amz-decoded-content-length": ["1"]}, "STREAMING-UNSIGNED-PAYLOAD-TRAILER", None)
    with pytest.raises(S3Error, match="InvalidRequest"):
        body_plan({"x-amz-trailer": ["x-amz-checksum-md7"]}, "STREAMING-UNSIGNED-PAYLOAD-TRAILER", None)
    with pytest.raises(S3Error, match="NotImplemented"):
        body_plan({}, "STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD", None)


def test_undeclared_or_missing_trailer() -> None:
    plan = BodyPlan(PayloadMode.STREAMING_UNSIGNED_TRAILER, trailers=("x-amz-checksum-crc32",), decoded_length=0)
    for body in (b"0\r\nx-amz-checksum-sha256:AAAA\r\n\r\n", b"0\r\n\r\n"):
        decoder = BodyDecoder(plan)
        decoder.feed(body)
        with pytest.raises(S3Error, match="MalformedTrailerError"):
            decoder.finish()


def test_crc64_nvme_check_value() -> None:
    assert crc64_nvme(b"123456789") == 0xAE8B14860A799888
    assert crc64_nvme(b"6789", crc64_nvme(b"12345")) == 0xAE8B14860A799888


def test_strip_aws_chunked() -> None:
    assert strip_aws_chunked("aws-chunked") is None
    assert strip_aws_chunked("aws-chunked, gzip") == "gzip"
    assert strip_aws_chunked("gzip") == "gzip"
    assert strip_aws_chunked(None) is None


def test_decoder_is_single_use() -> None:
    decoder = BodyDecoder(dataclasses.replace(body_plan({}, None, None)))
    decoder.finish()
    with pytest.raises(S3Error):
        decoder.feed(b"x")
