"""Decoding and verifying a request body as it arrives: ``BodyDecoder``.

It undoes ``aws-chunked`` framing, verifies every chunk signature *before*
releasing the chunk's bytes, checks the payload against
``x-amz-content-sha256``, ``Content-MD5`` and ``x-amz-checksum-*`` headers or
trailers, and raises ``S3Error`` on the first mismatch, so a writer that aborts
on exception never keeps unauthenticated bytes.  The chunk and trailer
signatures are computed here too (``chunk_signature``, ``trailer_signature``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from lakemount.gateway.errors import s3_error
from lakemount.gateway.sig.checksums import CHECKSUM_ALGORITHMS, CHECKSUM_HEADER_PREFIX, CHECKSUM_SIZES, decode_digest
from lakemount.gateway.sig.payload import EMPTY_SHA256, BodyPlan, ChunkSigning, PayloadMode
from lakemount.gateway.sig.request import signatures_equal

# A signed chunk is held until its signature is checked; SDKs send 8-128 KiB.
MAX_SIGNED_CHUNK = 16 * 1024 * 1024
_MAX_CHUNK_LINE = 4096
_MAX_TRAILER_BYTES = 16 * 1024
_HEX64_LOWER = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class BodySummary:
    """What ``BodyDecoder.finish`` verified about the payload."""

    length: int
    md5: bytes  # of the decoded payload: an object's ETag is its hex
    checksums: Mapping[str, str]  # algorithm -> base64, verified (headers or trailers)


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
        if not signatures_equal(expected, self._chunk_sig):
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
            decode_digest(value, CHECKSUM_SIZES[algorithm], name)
            values[algorithm] = value
        missing = [t for t in plan.trailers if t[len(CHECKSUM_HEADER_PREFIX) :] not in values]
        if missing:
            raise s3_error("MalformedTrailerError", f"declared trailer {missing[0]} is missing")
        if plan.mode is PayloadMode.STREAMING_SIGNED_TRAILER:
            assert plan.chunk_signing is not None  # body_plan guarantees it
            expected = trailer_signature(plan.chunk_signing, self._previous, signed)
            if signature is None or not signatures_equal(expected, signature):
                raise s3_error(
                    "SignatureDoesNotMatch",
                    "The trailer signature we calculated does not match the signature you provided.",
                )
        return values
