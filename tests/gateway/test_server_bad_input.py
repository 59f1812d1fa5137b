"""Bad input gets S3's XML errors, and never leaves a partial object or anything staged."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import socket
import threading
import time
import urllib.error
import urllib.request
import zlib
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from lakemount.serving import metrics
from lakemount.serving.asgi import BODY_IDLE_TIMEOUT

from .server_fixture import Gateway, code, signed_headers

MiB = 1024 * 1024


def leftovers(gw: Gateway) -> list[str]:
    """Landing files of uploads that are not in progress any more."""
    return [str(p) for p in gw.home.rglob(".tmp-gw-*")]


def nothing_there(gw: Gateway, bucket: str, path: str) -> None:
    """Neither an entry nor a leftover landing file."""
    cat = gw.app().catalog
    assert cat.get_optional(bucket, "main", path) is None
    assert leftovers(gw) == []


def raw_put(gw: Gateway, path: str, headers: dict[str, str], body: bytes) -> tuple[int, bytes]:
    url = f"{gw.url}{path}"
    req = urllib.request.Request(url, data=body, headers=headers, method="PUT")
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_wrong_content_md5(gw: Gateway, s3: Any, bucket: str) -> None:
    wrong = base64.b64encode(hashlib.md5(b"other").digest()).decode()
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="main/md5", Body=b"payload", ContentMD5=wrong)
    assert code(e) == "BadDigest"
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="main/md5", Body=b"payload", ContentMD5="not-base64!")
    assert code(e) == "InvalidDigest"
    nothing_there(gw, bucket, "md5")
    right = base64.b64encode(hashlib.md5(b"payload").digest()).decode()
    s3.put_object(Bucket=bucket, Key="main/md5", Body=b"payload", ContentMD5=right)


def test_wrong_checksum_and_payload_hash(gw: Gateway, bucket: str) -> None:
    url = f"{gw.url}/{bucket}/main/sum"
    h = signed_headers("PUT", url, {"x-amz-checksum-crc32": "AAAAAA=="}, "UNSIGNED-PAYLOAD")
    status, body = raw_put(gw, f"/{bucket}/main/sum", h, b"data")
    assert status == 400 and b"<Code>BadDigest</Code>" in body
    h = signed_headers("PUT", url, {}, hashlib.sha256(b"something else").hexdigest())
    status, body = raw_put(gw, f"/{bucket}/main/sum", h, b"data")
    assert status == 400 and b"XAmzContentSHA256Mismatch" in body
    nothing_there(gw, bucket, "sum")


def test_aws_chunked_length_mismatch(gw: Gateway, bucket: str) -> None:
    url = f"{gw.url}/{bucket}/main/chunky"
    crc = base64.b64encode(zlib.crc32(b"hello").to_bytes(4, "big")).decode()
    body = f"5\r\nhello\r\n0\r\nx-amz-checksum-crc32:{crc}\r\n\r\n".encode()
    for declared in ("3", "9"):
        extra = {"content-encoding": "aws-chunked", "x-amz-decoded-content-length": declared, "x-amz-trailer": "x-amz-checksum-crc32"}
        h = signed_headers("PUT", url, extra, "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
        status, resp = raw_put(gw, f"/{bucket}/main/chunky", h, body)
        assert status == 400 and b"IncompleteBody" in resp, resp
    nothing_there(gw, bucket, "chunky")
    extra = {"content-encoding": "aws-chunked", "x-amz-decoded-content-length": "5", "x-amz-trailer": "x-amz-checksum-crc32"}
    h = signed_headers("PUT", url, extra, "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
    assert raw_put(gw, f"/{bucket}/main/chunky", h, body)[0] == 200
    assert gw.client().get_object(Bucket=bucket, Key="main/chunky")["Body"].read() == b"hello"


def test_malformed_xml(gw: Gateway, s3: Any, bucket: str) -> None:
    url = f"{gw.url}/{bucket}?delete="
    body = b"<Delete><Object><Key>unclosed</Object>"
    h = signed_headers("POST", url, {}, hashlib.sha256(body).hexdigest())
    with pytest.raises(urllib.error.HTTPError) as he:
        urllib.request.urlopen(urllib.request.Request(url, data=body, headers=h, method="POST"))
    assert he.value.code == 400 and b"<Code>MalformedXML</Code>" in he.value.read()
    up = s3.create_multipart_upload(Bucket=bucket, Key="main/m")
    with pytest.raises(ClientError) as e:
        s3.complete_multipart_upload(Bucket=bucket, Key="main/m", UploadId=up["UploadId"], MultipartUpload={"Parts": []})
    assert code(e) == "MalformedXML"


def test_request_errors_are_s3_xml(gw: Gateway, s3: Any, bucket: str) -> None:
    with pytest.raises(ClientError) as e:
        s3.list_objects(Bucket=bucket, MaxKeys=-1)
    assert code(e) == "InvalidArgument"
    with pytest.raises(ClientError) as e:
        s3.get_bucket_policy(Bucket=bucket)
    assert code(e) == "NotImplemented"
    url = f"{gw.url}/{bucket}/main/%FF%FE"
    h = signed_headers("GET", url, {}, "UNSIGNED-PAYLOAD")
    with pytest.raises(urllib.error.HTTPError) as he:
        urllib.request.urlopen(urllib.request.Request(url, headers=h))
    assert he.value.code == 400 and b"<Code>InvalidURI</Code>" in he.value.read()
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="main/none")
    meta = e.value.response["ResponseMetadata"]
    assert meta["RequestId"] and meta["HTTPHeaders"]["x-amz-request-id"] == meta["RequestId"]


def _send_partial(gw: Gateway, path: str, declared: int, sent: int) -> None:
    headers = signed_headers("PUT", f"{gw.url}{path}", {"content-length": str(declared)}, "UNSIGNED-PAYLOAD")
    lines = [f"PUT {path} HTTP/1.1"] + [f"{k}: {v}" for k, v in headers.items()]
    sock = socket.create_connection(("127.0.0.1", gw.port))
    try:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        chunk = os.urandom(64 * 1024)
        left = sent
        while left > 0:
            n = min(left, len(chunk))
            sock.sendall(chunk[:n])
            left -= n
        time.sleep(0.3)
    finally:
        sock.close()


def s3_endings(gw: Gateway, op: str) -> tuple[dict[int, int], int]:
    """The gateway workers' published counts: ``op`` requests ended, by status; body bytes received by all.
    Read from the snapshot files (they only grow), not from ``/metrics``, which adds the serving worker's
    live counts to the others' published ones."""
    ended: dict[int, int] = {}
    received = 0
    for path in Path(metrics.directory(str(gw.home))).glob("s3-*.json"):
        with contextlib.suppress(FileNotFoundError):  # a worker's snapshot is replaced by a rename
            snap = json.loads(path.read_text())
            for name, status, n in snap["requests"]:
                if name == op:
                    ended[status] = ended.get(status, 0) + n
            received += snap["received"]
    return ended, received


def _dropped(gw: Gateway, op: str, path: str, declared: int, sent: int) -> dict[int, int]:
    """Send ``sent`` of ``declared`` body bytes to ``path`` and drop the connection; wait until the gateway has
    ended that request (its handler returned, so the upload's landing file is gone or never will be); returns
    the statuses it ended ``op`` requests with since.  A wait for the landing file to go passed at once when
    the server had not made it yet."""
    ended_before, received_before = s3_endings(gw, op)
    _send_partial(gw, path, declared=declared, sent=sent)
    deadline = time.monotonic() + BODY_IDLE_TIMEOUT + 60  # a failure's bound: a missed drop ends at the idle timeout
    while True:
        ended, received = s3_endings(gw, op)
        new = {status: n - ended_before.get(status, 0) for status, n in ended.items() if n != ended_before.get(status, 0)}
        if (new and received - received_before >= sent // 2) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert new and received - received_before >= sent // 2, (
        f"the gateway never ended the dropped {op} of {path}: ended since {new} (status: count), body bytes received "
        f"{received - received_before} of {sent} sent; landing files {leftovers(gw)}; log: {gw.log()[-3000:]}"
    )
    assert 408 not in new, f"the gateway missed the drop of {path} and gave the body up at its idle timeout: {new}"
    return new


def test_client_dropping_mid_upload_leaves_nothing(gw: Gateway, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/kept", Body=b"old")
    _dropped(gw, "PutObject", f"/{bucket}/main/dropped", declared=8 * MiB, sent=3 * MiB)
    _dropped(gw, "PutObject", f"/{bucket}/main/kept", declared=8 * MiB, sent=5 * MiB)
    nothing_there(gw, bucket, "dropped")
    assert s3.get_object(Bucket=bucket, Key="main/kept")["Body"].read() == b"old"
    # Multipart parts too: a dropped part upload records no part.
    up = s3.create_multipart_upload(Bucket=bucket, Key="main/mp")
    _dropped(gw, "UploadPart", f"/{bucket}/main/mp?partNumber=1&uploadId={up['UploadId']}", declared=6 * MiB, sent=MiB)
    assert "Parts" not in s3.list_parts(Bucket=bucket, Key="main/mp", UploadId=up["UploadId"])
    assert leftovers(gw) == []


def test_readers_never_see_a_partial_object(gw: Gateway, s3: Any, bucket: str) -> None:
    versions = [bytes([i]) * (4 * MiB) for i in range(3)]
    s3.put_object(Bucket=bucket, Key="main/atomic", Body=versions[0])
    reader = gw.client()
    bad: list[int] = []
    reads: list[tuple[float, float]] = []  # (start, end) of every whole read
    errors: list[BaseException] = []  # a reader that crashed (a truncated body) must fail the test, not end it quietly
    stop = threading.Event()

    def read() -> None:
        try:
            while not stop.is_set():
                t = time.monotonic()
                data = reader.get_object(Bucket=bucket, Key="main/atomic")["Body"].read()
                reads.append((t, time.monotonic()))
                if data not in versions:
                    bad.append(len(data))
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=read)
    t.start()
    overlapped = i = 0  # writes that a read overlapped
    deadline = time.monotonic() + 60
    try:
        # keep writing until reads have overlapped writes a few times (or the reader died)
        while i < 4 or (overlapped < 3 and time.monotonic() < deadline and not errors and t.is_alive()):
            k, t0 = len(reads), time.monotonic()
            s3.put_object(Bucket=bucket, Key="main/atomic", Body=versions[1 + i % 2])
            t1 = time.monotonic()
            overlapped += any(r0 < t1 and t0 < r1 for r0, r1 in reads[k:])  # reads are appended as they end
            i += 1
    finally:
        stop.set()
        t.join()
    if errors:
        raise errors[0]
    assert bad == []
    assert overlapped >= 3, f"only {overlapped} of {i} writes overlapped a read"


def test_more_body_than_content_length_gets_an_s3_answer(gw: Gateway, bucket: str) -> None:
    # s3-tests test_object_create_bad_contentlength_mismatch_below_aws2: "bar" sent with
    # Content-Length 2 and the MD5 of "bar".  The request is answered (BadDigest), then the
    # connection is closed instead of parsing the stray byte as a new request.
    import base64
    import hashlib

    path = f"/{bucket}/main/short"
    md5 = base64.b64encode(hashlib.md5(b"bar").digest()).decode()
    headers = signed_headers("PUT", f"{gw.url}{path}", {"content-length": "2", "content-md5": md5}, "UNSIGNED-PAYLOAD")
    lines = [f"PUT {path} HTTP/1.1"] + [f"{k}: {v}" for k, v in headers.items()]
    with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + b"bar")
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 400"), reply[:200]
    assert b"<Code>BadDigest</Code>" in reply
    assert reply.count(b"HTTP/1.1 ") == 1  # nothing else, and the server closed the connection
    nothing_there(gw, bucket, "short")
