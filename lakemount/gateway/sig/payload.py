"""How a request body is framed and authenticated, decided from its headers: ``body_plan``.

``x-amz-content-sha256`` picks the ``PayloadMode`` (a signed SHA-256, unsigned,
or one of the aws-chunked streaming forms); ``Content-MD5``, ``x-amz-checksum-*``
and the declared trailers add checks.  The resulting ``BodyPlan`` is what
:mod:`~lakemount.gateway.sig.chunked` decodes and verifies.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from lakemount.gateway.errors import s3_error
from lakemount.gateway.sig.checksums import CHECKSUM_ALGORITHMS, CHECKSUM_HEADER_PREFIX, CHECKSUM_SIZES, decode_digest
from lakemount.gateway.sig.request import first

UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
STREAMING_SIGNED = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
STREAMING_SIGNED_TRAILER = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
STREAMING_UNSIGNED_TRAILER = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
HEX64 = re.compile(r"[0-9a-fA-F]{64}")


class PayloadMode(Enum):
    """How the body is framed and authenticated (from ``x-amz-content-sha256``)."""

    SHA256 = "sha256"  # identity body whose SHA-256 was signed
    UNSIGNED = "unsigned"  # identity body, integrity only from optional checksums
    STREAMING_SIGNED = STREAMING_SIGNED
    STREAMING_SIGNED_TRAILER = STREAMING_SIGNED_TRAILER
    STREAMING_UNSIGNED_TRAILER = STREAMING_UNSIGNED_TRAILER

    @property
    def chunked(self) -> bool:
        """Whether the body is aws-chunked framed."""
        return self not in (PayloadMode.SHA256, PayloadMode.UNSIGNED)


@dataclass(frozen=True, slots=True)
class ChunkSigning:
    """What chunk and trailer signatures are computed from."""

    signing_key: bytes = field(repr=False)
    amz_date: str
    scope: str
    seed_signature: str


@dataclass(frozen=True, slots=True)
class BodyPlan:
    """How to decode and verify a request body; built from its headers."""

    mode: PayloadMode
    sha256: str | None = None  # lower-case hex, for PayloadMode.SHA256
    content_md5: bytes | None = None
    checksums: tuple[tuple[str, str], ...] = ()  # (algorithm, base64) from headers
    trailers: tuple[str, ...] = ()  # lower-case names declared in x-amz-trailer
    decoded_length: int | None = None  # x-amz-decoded-content-length (chunked)
    content_length: int | None = None  # Content-Length (identity bodies)
    chunk_signing: ChunkSigning | None = None


def body_plan(
    headers: Mapping[str, list[str]], content_sha256: str | None, chunk_signing: ChunkSigning | None
) -> BodyPlan:
    """The ``BodyPlan`` for a request whose signature has been checked.

    ``content_sha256`` is the payload hash the signature covered (or the header
    value for SigV2); ``chunk_signing`` is given only for SigV4 header auth.
    Raises ``S3Error`` (InvalidArgument, InvalidDigest, InvalidRequest,
    MissingContentLength, NotImplemented) for unusable headers.
    """
    value = content_sha256 or UNSIGNED_PAYLOAD
    if HEX64.fullmatch(value):
        mode, sha = PayloadMode.SHA256, value.lower()
    elif value == UNSIGNED_PAYLOAD:
        mode, sha = PayloadMode.UNSIGNED, None
    elif value in (STREAMING_SIGNED, STREAMING_SIGNED_TRAILER, STREAMING_UNSIGNED_TRAILER):
        mode, sha = PayloadMode(value), None
    elif value.startswith("STREAMING-AWS4-ECDSA"):
        raise s3_error("NotImplemented", f"x-amz-content-sha256 {value} (SigV4a) is not supported")
    else:
        raise s3_error(
            "InvalidArgument",
            "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
            "(-TRAILER), STREAMING-UNSIGNED-PAYLOAD-TRAILER, or a valid sha256 value.",
            ArgumentName="x-amz-content-sha256",
            ArgumentValue=value,
        )
    if mode in (PayloadMode.STREAMING_SIGNED, PayloadMode.STREAMING_SIGNED_TRAILER) and chunk_signing is None:
        raise s3_error("InvalidRequest", f"{value} requires a Signature Version 4 Authorization header")

    md5 = first(headers, "content-md5")
    content_md5 = decode_digest(md5.strip(), 16, "Content-MD5") if md5 is not None else None

    checksums = []
    for name, values in headers.items():
        if name.startswith(CHECKSUM_HEADER_PREFIX):
            algorithm = name[len(CHECKSUM_HEADER_PREFIX) :]
            # FULL_OBJECT|COMPOSITE, GetObject's ENABLED, and the algorithm a
            # CreateMultipartUpload names for its parts: none of them is a value.
            if algorithm in ("type", "mode", "algorithm"):
                continue
            if algorithm not in CHECKSUM_ALGORITHMS:
                raise s3_error("InvalidRequest", f"unsupported checksum algorithm {algorithm!r}")
            decode_digest(values[0].strip(), CHECKSUM_SIZES[algorithm], f"x-amz-checksum-{algorithm}")
            checksums.append((algorithm, values[0].strip()))

    trailers: tuple[str, ...] = ()
    declared = first(headers, "x-amz-trailer")
    if declared is not None:
        trailers = tuple(t.strip().lower() for t in declared.split(",") if t.strip())
        for t in trailers:
            if not t.startswith(CHECKSUM_HEADER_PREFIX) or t[len(CHECKSUM_HEADER_PREFIX) :] not in CHECKSUM_ALGORITHMS:
                raise s3_error("InvalidRequest", f"unsupported trailer {t!r}")
    if mode in (PayloadMode.STREAMING_SIGNED_TRAILER, PayloadMode.STREAMING_UNSIGNED_TRAILER) and not trailers:
        raise s3_error("InvalidRequest", f"{value} requires an x-amz-trailer header")

    decoded_length = content_length = None
    if mode.chunked:
        raw = first(headers, "x-amz-decoded-content-length")
        if raw is None:
            raise s3_error("MissingContentLength", "aws-chunked uploads need x-amz-decoded-content-length")
        decoded_length = parse_length(raw, "x-amz-decoded-content-length")
    else:
        raw = first(headers, "content-length")
        if raw is not None:
            content_length = parse_length(raw, "Content-Length")
    return BodyPlan(
        mode,
        sha,
        content_md5,
        tuple(checksums),
        trailers,
        decoded_length,
        content_length,
        chunk_signing if mode in (PayloadMode.STREAMING_SIGNED, PayloadMode.STREAMING_SIGNED_TRAILER) else None,
    )


def parse_length(raw: str, name: str) -> int:
    """A length header as an integer; raises ``S3Error`` InvalidArgument."""
    raw = raw.strip()
    if not raw.isdigit() or not raw.isascii():
        raise s3_error("InvalidArgument", f"{name} must be a non-negative integer", ArgumentName=name)
    return int(raw)
