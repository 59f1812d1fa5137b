"""AWS Signature Version 4 for the S3 gateway: verify requests, then their bodies.

Authentication happens in two steps, so that it can sit under any HTTP framework,
synchronous or not:

1. :func:`authenticate` (or :func:`verify`) checks the signature of the request
   line and headers -- an ``Authorization`` header or a presigned query -- and
   returns an :class:`AuthResult`.  Signature V2 requests are handed to
   :mod:`lakemount.gateway.sigv2`.
2. ``AuthResult.body_decoder()`` returns a push-style :class:`BodyDecoder`: feed
   it the raw body as it arrives, write out the payload bytes it returns, and
   call ``finish()`` at the end.  It undoes ``aws-chunked`` framing, verifies
   every chunk signature *before* releasing the chunk's bytes, checks the
   payload against ``x-amz-content-sha256``, ``Content-MD5``, and
   ``x-amz-checksum-*`` headers or trailers, and raises ``S3Error`` on the first
   mismatch.  A writer that aborts on exception therefore never keeps
   unauthenticated bytes.

The canonical request follows AWS's rules for S3: the path is percent-encoded
once (never normalised: ``//`` and ``.`` segments are part of S3 keys), query
parameters are encoded and sorted, header names lower-cased and values trimmed
with inner whitespace collapsed.  Clients disagree on the finer points of
encoding (``+`` in a query, characters they leave unencoded in a path), so the
verifier also tries the request exactly as sent; every candidate commits to the
same bytes on the wire, so accepting any of them admits no other request.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from enum import Enum
from types import MappingProxyType
from urllib.parse import quote, unquote_to_bytes

import crc32c

from lakemount import errors as lm
from lakemount.gateway.errors import S3Error, s3_error

ALGORITHM = "AWS4-HMAC-SHA256"
ECDSA_ALGORITHM = "AWS4-ECDSA-P256-SHA256"  # SigV4a: recognised, not supported
TERMINATOR = "aws4_request"
SERVICE = "s3"

UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
STREAMING_SIGNED = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
STREAMING_SIGNED_TRAILER = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
STREAMING_UNSIGNED_TRAILER = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()

MAX_SKEW = timedelta(minutes=15)
MAX_PRESIGN_EXPIRES = 7 * 24 * 3600
# A signed chunk is held until its signature is checked; SDKs send 8-128 KiB.
MAX_SIGNED_CHUNK = 16 * 1024 * 1024
_MAX_CHUNK_LINE = 4096
_MAX_TRAILER_BYTES = 16 * 1024

_AMZ_DATE_FORMAT = "%Y%m%dT%H%M%SZ"
_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
_HEX64_LOWER = re.compile(r"[0-9a-f]{64}")

SecretLookup = Callable[[str], str]
"""``lookup(access_key_id) -> secret``; raises ``NotFound`` (or ``KeyError``) for
an unknown key, which the verifier answers with ``InvalidAccessKeyId``."""


# --- the request ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """What the verifiers need of an HTTP request, independent of any framework.

    ``path`` and ``query`` are exactly as sent on the request line (still
    percent-encoded, ``query`` without its ``?``); ``headers`` are the received
    (name, value) pairs, repeated names included.  ``body`` is consulted only
    when a SigV4 request has no ``x-amz-content-sha256`` header (as non-S3 SigV4
    clients do): then the payload hash must come from the body itself.
    """

    method: str
    path: str
    query: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    body: Callable[[], bytes] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_target(
        cls,
        method: str,
        target: str,
        headers: Iterable[tuple[str, str]],
        body: Callable[[], bytes] | None = None,
    ) -> HttpRequest:
        """Build from a raw request target (``/bucket/key?query``)."""
        path, _, query = target.partition("?")
        return cls(method, path, query, tuple(headers), body)

    def header_map(self) -> dict[str, list[str]]:
        """Lower-cased header names to their values, in received order."""
        out: dict[str, list[str]] = {}
        for name, value in self.headers:
            out.setdefault(name.lower(), []).append(value)
        return out

    def query_pairs(self) -> list[tuple[str, str]]:
        """The query decoded to (name, value) pairs; ``+`` stays a plus sign."""
        return [(_decode(k), _decode(v)) for k, v in _raw_query_pairs(self.query)]


def _raw_query_pairs(query: str) -> list[tuple[str, str]]:
    pairs = []
    for part in query.split("&"):
        if part:
            name, _, value = part.partition("=")
            pairs.append((name, value))
    return pairs


def _decode(text: str) -> str:
    return unquote_to_bytes(text).decode("utf-8", "surrogateescape")


def first(headers: Mapping[str, list[str]], name: str) -> str | None:
    """The first value of header ``name`` (lower-case) or ``None``."""
    values = headers.get(name)
    return values[0] if values else None


# --- results ---------------------------------------------------------------------


class AuthScheme(Enum):
    """Which signature scheme authenticated a request."""

    SIGV4_HEADER = "sigv4-header"
    SIGV4_QUERY = "sigv4-query"
    SIGV2_HEADER = "sigv2-header"
    SIGV2_QUERY = "sigv2-query"


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


@dataclass(frozen=True, slots=True)
class AuthResult:
    """An authenticated request: who signed it, and how to read its body."""

    access_key_id: str
    scheme: AuthScheme
    body: BodyPlan
    region: str | None = None  # from the credential scope (SigV4 only)

    def body_decoder(self) -> BodyDecoder:
        """A fresh decoder for this request's body (see :class:`BodyDecoder`)."""
        return BodyDecoder(self.body)

    def decode_body(self, raw: Iterable[bytes]) -> Iterator[bytes]:
        """Decode an iterable of raw body pieces; raises ``S3Error`` while iterating."""
        decoder = self.body_decoder()
        for piece in raw:
            out = decoder.feed(piece)
            if out:
                yield out
        decoder.finish()


@dataclass(frozen=True, slots=True)
class BodySummary:
    """What ``BodyDecoder.finish`` verified about the payload."""

    length: int
    md5: bytes  # of the decoded payload: an object's ETag is its hex
    checksums: Mapping[str, str]  # algorithm -> base64, verified (headers or trailers)


# --- checksums -------------------------------------------------------------------


class _Crc:
    __slots__ = ("_fn", "_size", "_value")

    def __init__(self, fn: Callable[[bytes | bytearray, int], int], size: int) -> None:
        self._fn, self._size, self._value = fn, size, 0

    def update(self, data: bytes | bytearray) -> None:
        self._value = self._fn(data, self._value)

    def digest(self) -> bytes:
        return self._value.to_bytes(self._size, "big")


def _crc64_nvme_table() -> tuple[int, ...]:
    poly = 0x9A6C9329AC4BC9B5  # CRC-64/NVME, reflected
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ poly if crc & 1 else crc >> 1
        table.append(crc)
    return tuple(table)


_CRC64_TABLE = _crc64_nvme_table()
_MASK64 = 0xFFFFFFFFFFFFFFFF


def crc64_nvme(data: bytes | bytearray, value: int = 0) -> int:
    """CRC-64/NVME, chainable like ``zlib.crc32``.

    Pure Python (no wheel on PyPI ships it without also replacing botocore's
    signers): about 10 MB/s, acceptable for the rare client that picks it.
    """
    crc = value ^ _MASK64
    table = _CRC64_TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ _MASK64


def _crc32c(data: bytes | bytearray, value: int) -> int:
    return int(crc32c.crc32c(data, value))


CHECKSUM_ALGORITHMS: Mapping[str, Callable[[], _Crc | hashlib._Hash]] = MappingProxyType(
    {
        "crc32": lambda: _Crc(zlib.crc32, 4),
        "crc32c": lambda: _Crc(_crc32c, 4),
        "crc64nvme": lambda: _Crc(crc64_nvme, 8),
        "sha1": lambda: hashlib.sha1(usedforsecurity=False),
        "sha256": hashlib.sha256,
    }
)
_CHECKSUM_SIZES = {"crc32": 4, "crc32c": 4, "crc64nvme": 8, "sha1": 20, "sha256": 32}
CHECKSUM_HEADER_PREFIX = "x-amz-checksum-"


def _check_b64(value: str, size: int, what: str) -> bytes:
    try:
        raw = base64.b64decode(value, validate=True)
    except (ValueError, TypeError):
        raw = b""
    if len(raw) != size:
        raise s3_error("InvalidDigest", f"The {what} you specified is not valid.")
    return raw


# --- body plans and decoders -----------------------------------------------------


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
    if _HEX64.fullmatch(value):
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
    content_md5 = _check_b64(md5.strip(), 16, "Content-MD5") if md5 is not None else None

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
            _check_b64(values[0].strip(), _CHECKSUM_SIZES[algorithm], f"x-amz-checksum-{algorithm}")
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
        decoded_length = _parse_length(raw, "x-amz-decoded-content-length")
    else:
        raw = first(headers, "content-length")
        if raw is not None:
            content_length = _parse_length(raw, "Content-Length")
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


def _parse_length(raw: str, name: str) -> int:
    raw = raw.strip()
    if not raw.isdigit() or not raw.isascii():
        raise s3_error("InvalidArgument", f"{name} must be a non-negative integer", ArgumentName=name)
    return int(raw)


def _trailer_string_to_sign(signing: ChunkSigning, previous: str, canonical_trailers: bytes) -> str:
    return "\n".join(
        [
            "AWS4-HMAC-SHA256-TRAILER",
            signing.amz_date,
            signing.scope,
            previous,
            hashlib.sha256(canonical_trailers).hexdigest(),
        ]
    )


def chunk_string_to_sign(signing: ChunkSigning, previous: str, data: bytes) -> str:
    """The string signed for one chunk of ``STREAMING-AWS4-HMAC-SHA256-PAYLOAD``."""
    return "\n".join(
        [
            "AWS4-HMAC-SHA256-PAYLOAD",
            signing.amz_date,
            signing.scope,
            previous,
            EMPTY_SHA256,
            hashlib.sha256(data).hexdigest(),
        ]
    )


def chunk_signature(signing: ChunkSigning, previous: str, data: bytes) -> str:
    """Signature of chunk ``data`` following signature ``previous``."""
    return hmac.new(
        signing.signing_key, chunk_string_to_sign(signing, previous, data).encode(), hashlib.sha256
    ).hexdigest()


def trailer_signature(signing: ChunkSigning, previous: str, trailers: Sequence[tuple[str, str]]) -> str:
    """Signature of the trailing headers following the final chunk's signature."""
    canonical = "".join(f"{name.lower()}:{value.strip()}\n" for name, value in trailers).encode()
    sts = _trailer_string_to_sign(signing, previous, canonical)
    return hmac.new(signing.signing_key, sts.encode(), hashlib.sha256).hexdigest()


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode("utf-8", "surrogateescape"), b.encode("utf-8", "surrogateescape"))


class BodyDecoder:
    """Decodes and verifies one request body, fed in pieces of any size.

    ``feed(raw)`` returns the payload bytes that are ready (possibly empty);
    ``finish()`` checks lengths, hashes and checksums and returns a
    :class:`BodySummary`.  Every method raises ``S3Error``: SignatureDoesNotMatch
    (a chunk or the trailer), XAmzContentSHA256Mismatch, BadDigest, IncompleteBody,
    InvalidRequest or MalformedTrailerError (framing), InvalidChunkSizeError.
    After an error the decoder must be dropped.
    """

    def __init__(self, plan: BodyPlan) -> None:
        self._plan = plan
        self._md5 = hashlib.md5(usedforsecurity=False)
        self._sha256 = hashlib.sha256() if plan.mode is PayloadMode.SHA256 else None
        wanted = {a for a, _ in plan.checksums} | {t[len(CHECKSUM_HEADER_PREFIX) :] for t in plan.trailers}
        self._sums = {a: CHECKSUM_ALGORITHMS[a]() for a in sorted(wanted)}
        self._length = 0
        # aws-chunked state
        self._buf = bytearray()
        self._state = "size" if plan.mode.chunked else "identity"
        self._remaining = 0  # bytes of the current chunk still to read
        self._chunk = bytearray()  # a signed chunk held until verified
        self._chunk_sig = ""
        self._previous = plan.chunk_signing.seed_signature if plan.chunk_signing else ""
        self._trailer_lines: list[tuple[str, str]] = []
        self._trailer_bytes = 0
        self._finished = False

    # The payload, whatever the framing, goes through here exactly once.
    def _account(self, data: bytes | bytearray) -> None:
        self._length += len(data)
        limit = self._plan.decoded_length if self._plan.mode.chunked else self._plan.content_length
        if limit is not None and self._length > limit:
            raise s3_error("IncompleteBody", "the body is longer than its declared length")
        self._md5.update(data)
        if self._sha256 is not None:
            self._sha256.update(data)
        for h in self._sums.values():
            h.update(data)

    def _emit(self, data: bytes | bytearray, out: bytearray) -> None:
        if data:
            self._account(data)
            out += data

    def feed(self, data: bytes) -> bytes:
        """Consume raw body bytes; return the payload bytes now verified."""
        if self._finished:
            raise s3_error("InvalidRequest", "body data after the end of the body")
        if self._state == "identity":
            self._account(data)
            return data  # no framing: hand the caller's buffer straight back
        out = bytearray()
        self._buf += data
        while self._step(out):
            pass
        return bytes(out)

    def _take_line(self) -> bytes | None:
        end = self._buf.find(b"\n")
        if end < 0:
            if len(self._buf) > _MAX_CHUNK_LINE:
                raise s3_error("InvalidRequest", "malformed aws-chunked body: chunk header too long")
            return None
        line = bytes(self._buf[:end])
        del self._buf[: end + 1]
        return line[:-1] if line.endswith(b"\r") else line

    def _step(self, out: bytearray) -> bool:
        """Advance the aws-chunked state machine once; False when input is short."""
        if self._state == "size":
            line = self._take_line()
            if line is None:
                return False
            self._start_chunk(line)
            return True
        if self._state == "data":
            if not self._buf:
                return False
            take = min(self._remaining, len(self._buf))
            piece = self._buf[:take]
            del self._buf[:take]
            self._remaining -= take
            if self._plan.chunk_signing is None:
                self._emit(piece, out)
            else:
                self._chunk += piece
            if self._remaining == 0:
                self._end_chunk(out)
                self._state = "crlf"
            return True
        if self._state == "crlf":
            if len(self._buf) < 2:
                return False
            if self._buf[:2] != b"\r\n":
                raise s3_error("InvalidRequest", "malformed aws-chunked body: chunk data not followed by CRLF")
            del self._buf[:2]
            self._state = "size"
            return True
        if self._state == "trailer":
            line = self._take_line()
            if line is None:
                if len(self._buf) + self._trailer_bytes > _MAX_TRAILER_BYTES:
                    raise s3_error("MalformedTrailerError")
                return False
            self._trailer_line(line)
            return True
        # "done": tolerate stray line ends, nothing else.
        if self._buf.strip(b"\r\n"):
            raise s3_error("InvalidRequest", "malformed aws-chunked body: data after the final chunk")
        self._buf.clear()
        return False

    def _start_chunk(self, line: bytes) -> None:
        size_text, *extensions = line.split(b";")
        try:
            size = int(size_text.strip(), 16)
        except ValueError:
            raise s3_error("InvalidRequest", "malformed aws-chunked body: bad chunk size") from None
        if size < 0:
            raise s3_error("InvalidRequest", "malformed aws-chunked body: bad chunk size")
        if self._plan.chunk_signing is not None:
            sig = b""
            for ext in extensions:
                name, _, value = ext.partition(b"=")
                if name.strip() == b"chunk-signature":
                    sig = value.strip()
            if not _HEX64_LOWER.fullmatch(sig.decode("latin-1")):
                raise s3_error("SignatureDoesNotMatch", "a chunk of the body has no valid chunk-signature")
            if size > MAX_SIGNED_CHUNK:
                raise s3_error("InvalidChunkSizeError", f"signed chunks may be at most {MAX_SIGNED_CHUNK} bytes")
            self._chunk_sig = sig.decode("ascii")
        self._remaining = size
        if size == 0:
            self._verify_chunk(b"")
            self._state = "trailer"
        else:
            self._state = "data"

    def _verify_chunk(self, data: bytes) -> None:
        signing = self._plan.chunk_signing
        if signing is None:
            return
        expected = chunk_signature(signing, self._previous, data)
        if not _same(expected, self._chunk_sig):
            raise s3_error(
                "SignatureDoesNotMatch",
                "The chunk signature we calculated does not match the signature you provided.",
                StringToSign=chunk_string_to_sign(signing, self._previous, data),
                SignatureProvided=self._chunk_sig,
            )
        self._previous = expected

    def _end_chunk(self, out: bytearray) -> None:
        if self._plan.chunk_signing is not None:
            data = bytes(self._chunk)
            self._chunk.clear()
            self._verify_chunk(data)
            self._emit(data, out)

    def _trailer_line(self, line: bytes) -> None:
        self._trailer_bytes += len(line) + 2
        if self._trailer_bytes > _MAX_TRAILER_BYTES or len(self._trailer_lines) > 32:
            raise s3_error("MalformedTrailerError")
        if not line.strip():
            # A blank line ends the trailer section -- unless the client put one
            # between the final chunk and the trailers, which some do.
            if self._trailer_lines or not self._plan.trailers:
                self._state = "done"
            return
        name, sep, value = line.decode("latin-1").partition(":")
        if not sep:
            raise s3_error("MalformedTrailerError")
        self._trailer_lines.append((name.strip().lower(), value.strip()))

    def finish(self) -> BodySummary:
        """Check the whole payload; return what was verified."""
        if self._finished:
            raise s3_error("InvalidRequest", "body already finished")
        self._finished = True
        plan = self._plan
        if plan.mode.chunked:
            if self._state == "trailer" and self._buf:
                # A last trailer line without its line end: accept it.
                line = bytes(self._buf)
                self._buf.clear()
                self._trailer_line(line[:-1] if line.endswith(b"\r") else line)
            if self._state not in ("trailer", "done"):
                raise s3_error("IncompleteBody", "the aws-chunked body ended before its final chunk")
            if self._length != plan.decoded_length:
                raise s3_error(
                    "IncompleteBody",
                    f"x-amz-decoded-content-length is {plan.decoded_length} but the body carried {self._length} bytes",
                )
        elif plan.content_length is not None and self._length != plan.content_length:
            raise s3_error("IncompleteBody")

        verified: dict[str, str] = {}
        trailer_values = self._check_trailers() if plan.mode.chunked else {}
        if self._sha256 is not None and self._sha256.hexdigest() != plan.sha256:
            raise s3_error(
                "XAmzContentSHA256Mismatch",
                ClientComputedContentSHA256=plan.sha256,
                S3ComputedContentSHA256=self._sha256.hexdigest(),
            )
        md5 = self._md5.digest()
        if plan.content_md5 is not None and not hmac.compare_digest(md5, plan.content_md5):
            raise s3_error("BadDigest", "The Content-MD5 you specified did not match what we received.")
        expected = dict(plan.checksums)
        expected.update(trailer_values)
        for algorithm, value in expected.items():
            actual = base64.b64encode(self._sums[algorithm].digest()).decode()
            if actual != value:
                raise s3_error(
                    "BadDigest", f"The {algorithm.upper()} you specified did not match the calculated checksum."
                )
            verified[algorithm] = actual
        return BodySummary(self._length, md5, MappingProxyType(verified))

    def _check_trailers(self) -> dict[str, str]:
        plan = self._plan
        values: dict[str, str] = {}
        signature = None
        signed: list[tuple[str, str]] = []
        for name, value in self._trailer_lines:
            if name == "x-amz-trailer-signature":
                signature = value
                continue
            if name not in plan.trailers:
                raise s3_error("MalformedTrailerError", f"trailer {name} was not declared in x-amz-trailer")
            signed.append((name, value))
            algorithm = name[len(CHECKSUM_HEADER_PREFIX) :]
            _check_b64(value, _CHECKSUM_SIZES[algorithm], name)
            values[algorithm] = value
        missing = [t for t in plan.trailers if t[len(CHECKSUM_HEADER_PREFIX) :] not in values]
        if missing:
            raise s3_error("MalformedTrailerError", f"declared trailer {missing[0]} is missing")
        if plan.mode is PayloadMode.STREAMING_SIGNED_TRAILER:
            assert plan.chunk_signing is not None  # body_plan guarantees it
            expected = trailer_signature(plan.chunk_signing, self._previous, signed)
            if signature is None or not _same(expected, signature):
                raise s3_error(
                    "SignatureDoesNotMatch",
                    "The trailer signature we calculated does not match the signature you provided.",
                )
        return values


# --- canonical request -----------------------------------------------------------


def uri_encode_path(raw_path: str) -> str:
    """The canonical URI of a raw S3 path: decoded once, encoded AWS's way.

    Unreserved characters and ``/`` stay, everything else becomes ``%XX``
    (upper-case); ``//`` and dot segments are kept because they are key bytes.
    """
    return quote(unquote_to_bytes(raw_path or "/"), safe="/~") or "/"


def _encode_component(raw: str, plus_is_space: bool) -> str:
    if plus_is_space:
        raw = raw.replace("+", "%20")
    return quote(unquote_to_bytes(raw), safe="-_.~")


def canonical_query(raw_query: str, *, exclude: str | None = None, plus_is_space: bool = False) -> str:
    """AWS's canonical query string of a raw query (minus parameter ``exclude``)."""
    pairs = sorted(
        (_encode_component(k, plus_is_space), _encode_component(v, plus_is_space))
        for k, v in _raw_query_pairs(raw_query)
        if exclude is None or _decode(k) != exclude
    )
    return "&".join(f"{k}={v}" for k, v in pairs)


def _raw_sorted_query(raw_query: str, exclude: str | None) -> str:
    # The query exactly as sent, only sorted: what botocore signs.
    pairs = sorted((k, v) for k, v in _raw_query_pairs(raw_query) if exclude is None or _decode(k) != exclude)
    return "&".join(f"{k}={v}" for k, v in pairs)


def canonical_headers(headers: Mapping[str, list[str]], signed: Sequence[str]) -> str:
    """``name:value\\n`` for each signed header; repeated values joined by ``,``."""
    return "".join(f"{name}:{','.join(' '.join(v.split()) for v in headers.get(name, ()))}\n" for name in signed)


def canonical_request(
    method: str, uri: str, query: str, headers: Mapping[str, list[str]], signed: Sequence[str], payload: str
) -> str:
    """The SigV4 canonical request (the header block keeps its trailing blank line)."""
    return "\n".join([method, uri, query, canonical_headers(headers, signed), ";".join(signed), payload])


def string_to_sign(amz_date: str, scope: str, canonical: str) -> str:
    """The SigV4 string to sign for a canonical request."""
    return "\n".join(
        [ALGORITHM, amz_date, scope, hashlib.sha256(canonical.encode("utf-8", "surrogateescape")).hexdigest()]
    )


def signing_key(secret: str, date: str, region: str, service: str = SERVICE) -> bytes:
    """The SigV4 key for one day, region and service."""
    key = hmac.new(f"AWS4{secret}".encode(), date.encode(), hashlib.sha256).digest()
    for part in (region, service, TERMINATOR):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def sign(key: bytes, sts: str) -> str:
    return hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()


# --- verification ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Scope:
    access_key_id: str
    date: str
    region: str
    service: str

    @property
    def text(self) -> str:
        return f"{self.date}/{self.region}/{self.service}/{TERMINATOR}"


def _parse_credential(credential: str, error: str, region: str | None) -> _Scope:
    parts = credential.rsplit("/", 4)
    if len(parts) != 5 or not parts[0] or not re.fullmatch(r"\d{8}", parts[1]):
        raise s3_error(
            error,
            'Error parsing the Credential; expecting "<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request".',
        )
    akid, date, req_region, service, terminator = parts
    if terminator != TERMINATOR:
        raise s3_error(error, f"Incorrect terminal '{terminator}'. This endpoint uses '{TERMINATOR}'.")
    if service != SERVICE:
        raise s3_error(error, f"Incorrect service '{service}'. This endpoint belongs to '{SERVICE}'.")
    if region is not None and req_region != region:
        raise s3_error(error, f"The region '{req_region}' is wrong; expecting '{region}'", Region=region)
    return _Scope(akid, date, req_region, service)


def _parse_amz_date(value: str) -> datetime | None:
    try:
        return datetime.strptime(value.strip(), _AMZ_DATE_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None


def request_time(headers: Mapping[str, list[str]]) -> tuple[datetime, str] | None:
    """The signing time of a request and its ``YYYYMMDDTHHMMSSZ`` form.

    From ``x-amz-date`` if present, else from ``Date`` (RFC 7231 or ISO basic).
    """
    amz = first(headers, "x-amz-date")
    if amz is not None:
        t = _parse_amz_date(amz)
        if t is None:
            # S3 also takes x-amz-date in RFC 1123 form (SigV2 clients send it so).
            try:
                t = parsedate_to_datetime(amz.strip())
            except (TypeError, ValueError, IndexError):
                return None
            t = t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
            if t.year < 1970:
                return None  # S3 refuses such dates as unusable, not as skewed
        return t, t.strftime(_AMZ_DATE_FORMAT)
    date = first(headers, "date")
    if date is None:
        return None
    t = _parse_amz_date(date)
    if t is None:
        try:
            t = parsedate_to_datetime(date)
        except (TypeError, ValueError):
            return None
        t = t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
    return t, t.strftime(_AMZ_DATE_FORMAT)


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _lookup(lookup: SecretLookup, access_key_id: str) -> str:
    try:
        return lookup(access_key_id)
    except (lm.NotFound, KeyError):
        raise s3_error("InvalidAccessKeyId", AWSAccessKeyId=access_key_id) from None


def _check_signature(
    *,
    request: HttpRequest,
    headers: Mapping[str, list[str]],
    scope: _Scope,
    amz_date: str,
    signed: Sequence[str],
    payload: str,
    provided: str,
    key: bytes,
    exclude_param: str | None,
) -> None:
    uris = [uri_encode_path(request.path)]
    if request.path and request.path not in uris:
        uris.append(request.path)
    queries = [canonical_query(request.query, exclude=exclude_param)]
    for alt in (
        canonical_query(request.query, exclude=exclude_param, plus_is_space=True),
        _raw_sorted_query(request.query, exclude_param),
    ):
        if alt not in queries:
            queries.append(alt)
    first_candidate: tuple[str, str] | None = None
    for uri in uris:
        for query in queries:
            creq = canonical_request(request.method, uri, query, headers, signed, payload)
            sts = string_to_sign(amz_date, scope.text, creq)
            if _same(sign(key, sts), provided):
                return
            if first_candidate is None:
                first_candidate = (creq, sts)
    assert first_candidate is not None
    creq, sts = first_candidate
    raise s3_error(
        "SignatureDoesNotMatch",
        AWSAccessKeyId=scope.access_key_id,
        StringToSign=sts,
        SignatureProvided=provided,
        CanonicalRequest=creq,
    )


def _signed_header_list(text: str, error: str) -> list[str]:
    names = [n.strip().lower() for n in text.split(";")]
    if not names or any(not n for n in names):
        raise s3_error(error, "SignedHeaders is malformed.")
    if "host" not in names:
        raise s3_error(error, "SignedHeaders must include host.")
    return names


def _now(now: datetime | None) -> datetime:
    return datetime.now(UTC) if now is None else now.astimezone(UTC)


def verify_header(
    request: HttpRequest,
    lookup: SecretLookup,
    *,
    now: datetime | None = None,
    region: str | None = None,
) -> AuthResult:
    """Verify a request signed with an ``Authorization: AWS4-HMAC-SHA256 ...`` header.

    ``region``, when given, is the only region accepted in the credential scope.
    Raises ``S3Error``: AuthorizationHeaderMalformed, AccessDenied (no usable
    date, or x-amz-* headers left unsigned), RequestTimeTooSkewed,
    InvalidAccessKeyId, SignatureDoesNotMatch, InvalidArgument, NotImplemented.
    """
    headers = request.header_map()
    auth = (first(headers, "authorization") or "").strip()
    algorithm, _, rest = auth.partition(" ")
    if algorithm == ECDSA_ALGORITHM:
        raise s3_error("NotImplemented", "Signature Version 4A is not supported")
    if algorithm != ALGORITHM:
        raise s3_error("AuthorizationHeaderMalformed", f"Unsupported algorithm {algorithm!r}")
    fields: dict[str, str] = {}
    for part in rest.split(","):
        name, sep, value = part.strip().partition("=")
        if sep:
            fields[name.strip()] = value.strip()
    missing = [k for k in ("Credential", "SignedHeaders", "Signature") if k not in fields]
    if missing:
        raise s3_error("AuthorizationHeaderMalformed", f"The authorization header is malformed; missing {missing[0]}.")
    scope = _parse_credential(fields["Credential"], "AuthorizationHeaderMalformed", region)
    signed = _signed_header_list(fields["SignedHeaders"], "AuthorizationHeaderMalformed")

    when = request_time(headers)
    if when is None:
        raise s3_error("AccessDenied", "AWS authentication requires a valid Date or x-amz-date header")
    t, amz_date = when
    if amz_date[:8] != scope.date:
        raise s3_error("AuthorizationHeaderMalformed", "Invalid credential date. Date is not the same as X-Amz-Date.")
    server = _now(now)
    if abs(server - t) > MAX_SKEW:
        raise s3_error(
            "RequestTimeTooSkewed",
            RequestTime=_iso(t),
            ServerTime=_iso(server),
            MaxAllowedSkewMilliseconds=int(MAX_SKEW.total_seconds() * 1000),
        )
    unsigned = sorted(n for n in headers if n.startswith("x-amz-") and n not in signed)
    if unsigned:
        raise s3_error(
            "AccessDenied",
            "There were headers present in the request which were not signed",
            HeadersNotSigned=", ".join(unsigned),
        )

    payload = first(headers, "x-amz-content-sha256")
    if payload is None:
        # Not S3-style: the payload hash is the body's (empty if none).
        payload = hashlib.sha256(request.body()).hexdigest() if request.body is not None else EMPTY_SHA256
    else:
        payload = payload.strip()
    secret = _lookup(lookup, scope.access_key_id)
    key = signing_key(secret, scope.date, scope.region, scope.service)
    provided = fields["Signature"]
    _check_signature(
        request=request,
        headers=headers,
        scope=scope,
        amz_date=amz_date,
        signed=signed,
        payload=payload,
        provided=provided,
        key=key,
        exclude_param=None,
    )
    signing = ChunkSigning(key, amz_date, scope.text, provided.lower())
    return AuthResult(scope.access_key_id, AuthScheme.SIGV4_HEADER, body_plan(headers, payload, signing), scope.region)


_PRESIGN_PARAMS = (
    "X-Amz-Algorithm",
    "X-Amz-Credential",
    "X-Amz-Date",
    "X-Amz-Expires",
    "X-Amz-SignedHeaders",
    "X-Amz-Signature",
)


def verify_query(
    request: HttpRequest,
    lookup: SecretLookup,
    *,
    now: datetime | None = None,
    region: str | None = None,
) -> AuthResult:
    """Verify a presigned URL (``X-Amz-Algorithm=AWS4-HMAC-SHA256&...``).

    Raises ``S3Error``: AuthorizationQueryParametersError, AccessDenied
    ("Request has expired", "Request is not valid yet"), InvalidAccessKeyId,
    SignatureDoesNotMatch, NotImplemented.
    """
    headers = request.header_map()
    params: dict[str, str] = {}
    for name, value in request.query_pairs():
        params.setdefault(name, value)
    if params.get("X-Amz-Algorithm") == ECDSA_ALGORITHM:
        raise s3_error("NotImplemented", "Signature Version 4A is not supported")
    if any(p not in params for p in _PRESIGN_PARAMS):
        raise s3_error(
            "AuthorizationQueryParametersError",
            "Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, "
            "X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters.",
        )
    if params["X-Amz-Algorithm"] != ALGORITHM:
        raise s3_error("AuthorizationQueryParametersError", 'X-Amz-Algorithm only supports "AWS4-HMAC-SHA256"')
    scope = _parse_credential(params["X-Amz-Credential"], "AuthorizationQueryParametersError", region)
    signed = _signed_header_list(params["X-Amz-SignedHeaders"], "AuthorizationQueryParametersError")
    t = _parse_amz_date(params["X-Amz-Date"])
    if t is None:
        raise s3_error(
            "AuthorizationQueryParametersError",
            "X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"",
        )
    amz_date = t.strftime(_AMZ_DATE_FORMAT)
    if amz_date[:8] != scope.date:
        raise s3_error(
            "AuthorizationQueryParametersError", "Invalid credential date. Date is not the same as X-Amz-Date."
        )
    expires_text = params["X-Amz-Expires"]
    if not expires_text.isdigit() or not expires_text.isascii():
        raise s3_error("AuthorizationQueryParametersError", "X-Amz-Expires should be a number")
    expires = int(expires_text)
    if expires > MAX_PRESIGN_EXPIRES:
        raise s3_error(
            "AuthorizationQueryParametersError", "X-Amz-Expires must be less than a week (in seconds) that is 604800"
        )
    server = _now(now)
    if t - server > MAX_SKEW:
        raise s3_error("AccessDenied", "Request is not valid yet", RequestTime=_iso(t), ServerTime=_iso(server))
    if server > t + timedelta(seconds=expires):
        raise s3_error(
            "AccessDenied",
            "Request has expired",
            **{
                "X-Amz-Expires": expires,
                "Expires": _iso(t + timedelta(seconds=expires)),
                "ServerTime": _iso(server),
            },
        )

    payload = params.get("X-Amz-Content-Sha256") or first(headers, "x-amz-content-sha256") or UNSIGNED_PAYLOAD
    payload = payload.strip()
    secret = _lookup(lookup, scope.access_key_id)
    key = signing_key(secret, scope.date, scope.region, scope.service)
    _check_signature(
        request=request,
        headers=headers,
        scope=scope,
        amz_date=amz_date,
        signed=signed,
        payload=payload,
        provided=params["X-Amz-Signature"],
        key=key,
        exclude_param="X-Amz-Signature",
    )
    # No chunk signing: a presigned URL cannot carry a seed signature.
    return AuthResult(scope.access_key_id, AuthScheme.SIGV4_QUERY, body_plan(headers, payload, None), scope.region)


def verify(
    request: HttpRequest,
    lookup: SecretLookup,
    *,
    now: datetime | None = None,
    region: str | None = None,
) -> AuthResult:
    """Verify a SigV4 request, by header or by presigned query (see those)."""
    has_header = any(n.lower() == "authorization" for n, _ in request.headers)
    return (verify_header if has_header else verify_query)(request, lookup, now=now, region=region)


def authenticate(
    request: HttpRequest,
    lookup: SecretLookup,
    *,
    now: datetime | None = None,
    region: str | None = None,
    virtual_host_bucket: str | None = None,
) -> AuthResult:
    """Authenticate an S3 request signed any way the gateway accepts.

    SigV4 header or presigned query, or SigV2 header or query.  A request with
    no signature at all is refused with ``AccessDenied`` (the gateway has no
    public buckets).  ``virtual_host_bucket`` is the bucket taken from the Host
    header of a virtual-hosted-style request: SigV2 signs it as part of the path.
    ``region``, if given, is enforced on SigV4 credential scopes.  Raises
    ``S3Error`` only; errors of ``lookup`` other than "not found" propagate.
    """
    headers = request.header_map()
    auth = first(headers, "authorization")
    params = {name for name, _ in request.query_pairs()}
    presigned_v4 = "X-Amz-Algorithm" in params or "X-Amz-Credential" in params
    presigned_v2 = "AWSAccessKeyId" in params and "Signature" in params
    if auth is not None and (presigned_v4 or presigned_v2):
        raise s3_error(
            "InvalidArgument",
            "Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query "
            "string parameter or the Authorization header should be specified",
            ArgumentName="Authorization",
        )
    # Imported here, not at the top: sigv2 builds on this module's request type.
    from lakemount.gateway import sigv2

    if auth is not None:
        scheme = auth.strip().split(" ", 1)[0]
        if scheme in (ALGORITHM, ECDSA_ALGORITHM):
            return verify_header(request, lookup, now=now, region=region)
        if scheme == "AWS":
            return sigv2.verify_header(request, lookup, now=now, bucket=virtual_host_bucket)
        raise s3_error("InvalidArgument", "Unsupported Authorization Type", ArgumentName="Authorization")
    if presigned_v4:
        return verify_query(request, lookup, now=now, region=region)
    if presigned_v2:
        return sigv2.verify_query(request, lookup, now=now, bucket=virtual_host_bucket)
    raise s3_error("AccessDenied", "Anonymous access is not allowed: sign the request with an access key")


def strip_aws_chunked(content_encoding: str | None) -> str | None:
    """The Content-Encoding to store: the header minus the ``aws-chunked`` transport coding."""
    if content_encoding is None:
        return None
    kept = [c.strip() for c in content_encoding.split(",") if c.strip() and c.strip().lower() != "aws-chunked"]
    return ", ".join(kept) or None


__all__ = [
    "ALGORITHM",
    "EMPTY_SHA256",
    "STREAMING_SIGNED",
    "STREAMING_SIGNED_TRAILER",
    "STREAMING_UNSIGNED_TRAILER",
    "UNSIGNED_PAYLOAD",
    "AuthResult",
    "AuthScheme",
    "BodyDecoder",
    "BodyPlan",
    "BodySummary",
    "ChunkSigning",
    "HttpRequest",
    "PayloadMode",
    "S3Error",
    "SecretLookup",
    "authenticate",
    "body_plan",
    "canonical_query",
    "canonical_request",
    "chunk_signature",
    "crc64_nvme",
    "signing_key",
    "strip_aws_chunked",
    "trailer_signature",
    "uri_encode_path",
    "verify",
    "verify_header",
    "verify_query",
]
