"""Shared by the gateway tests: credentials, botocore signing, request conversion."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from urllib.parse import quote, urlsplit

from botocore.auth import HmacV1Auth, HmacV1QueryAuth, S3SigV4Auth, S3SigV4QueryAuth
from botocore.awsrequest import AWSPreparedRequest, AWSRequest
from botocore.credentials import Credentials

from lakemount.auth.model import CredentialsNotFound
from lakemount.gateway.sig.chunked import chunk_signature, trailer_signature
from lakemount.gateway.sig.payload import ChunkSigning
from lakemount.gateway.sig.request import HttpRequest

AKID = "AKIAIOSFODNN7EXAMPLE"
SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
ENDPOINT = "http://localhost:8000"
CREDS = Credentials(AKID, SECRET)


def lookup(access_key_id: str) -> str:
    if access_key_id == AKID:
        return SECRET
    raise CredentialsNotFound(access_key_id)


def url_for(bucket: str, key: str = "", query: str = "", endpoint: str = ENDPOINT) -> str:
    """The URL botocore itself would build for a path-style request."""
    url = f"{endpoint}/{bucket}"
    if key:
        url += "/" + quote(key, safe="/~")
    return url + (f"?{query}" if query else "")


def from_prepared(prepared: AWSPreparedRequest, body: Callable[[], bytes] | None = None) -> HttpRequest:
    """What an HTTP server would see of a request botocore prepared."""
    split = urlsplit(prepared.url)
    headers = [(k, v if isinstance(v, str) else v.decode()) for k, v in prepared.headers.items()]
    if not any(k.lower() == "host" for k, _ in headers):
        headers.insert(0, ("Host", split.netloc))
    return HttpRequest(prepared.method, split.path, split.query, tuple(headers), body)


def _request(method: str, url: str, headers: dict[str, str] | None, body: bytes) -> AWSRequest:
    return AWSRequest(method=method, url=url, headers=dict(headers or {}), data=body)


def sign_v4(
    method: str, url: str, headers: dict[str, str] | None = None, body: bytes = b"", region: str = "us-east-1"
) -> HttpRequest:
    req = _request(method, url, headers, body)
    S3SigV4Auth(CREDS, "s3", region).add_auth(req)
    return from_prepared(req.prepare())


def presign_v4(method: str, url: str, expires: int = 3600, headers: dict[str, str] | None = None) -> HttpRequest:
    req = _request(method, url, headers, b"")
    S3SigV4QueryAuth(CREDS, "s3", "us-east-1", expires=expires).add_auth(req)
    return from_prepared(req.prepare())


def sign_v2(method: str, url: str, headers: dict[str, str] | None = None, auth_path: str | None = None) -> HttpRequest:
    req = _request(method, url, headers, b"")
    req.auth_path = auth_path
    HmacV1Auth(CREDS).add_auth(req)
    return from_prepared(req.prepare())


def presign_v2(method: str, url: str, expires: int = 3600, headers: dict[str, str] | None = None) -> HttpRequest:
    req = _request(method, url, headers, b"")
    HmacV1QueryAuth(CREDS, expires=expires).add_auth(req)
    prepared = req.prepare()
    # The presigned URL is all a browser or curl gets: no extra headers.
    split = urlsplit(prepared.url)
    return HttpRequest(method, split.path, split.query, (("Host", split.netloc),))


def encode_signed_chunks(
    signing: ChunkSigning, chunks: Sequence[bytes], trailers: Sequence[tuple[str, str]] = ()
) -> bytes:
    """An aws-chunked body signed as the AWS documentation describes."""
    out = bytearray()
    previous = signing.seed_signature
    for data in [*chunks, b""]:
        previous = chunk_signature(signing, previous, data)
        out += f"{len(data):x};chunk-signature={previous}\r\n".encode() + data + b"\r\n"
    if trailers:
        del out[-2:]  # the final chunk's CRLF is followed by the trailers
        for name, value in trailers:
            out += f"{name}:{value}\r\n".encode()
        out += f"x-amz-trailer-signature:{trailer_signature(signing, previous, trailers)}\r\n\r\n".encode()
    return bytes(out)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
