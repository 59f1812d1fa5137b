"""Objects as S3 shows them: entry <-> headers, conditions, copy ranges, and bodies in.

Shared by the object operations.  User metadata travels as ``x-amz-meta-*``
headers; it and the standard headers S3 stores with an object map to an
entry's metadata as ``lakemount/serving/metadata.py`` says, the one mapping
the REST API uses too.  Bodies out (memory-mapped local reads) and plain
HTTP ranges are shared with the REST API in ``lakemount/serving``.

Uploads go through the catalog's object writer (``catalog/writer.py``) while
the protocol layer's ``BodyDecoder`` verifies framing, chunk signatures,
length, Content-MD5 and checksums; only a body that passed every check is
stored (content-addressed) and only then is an entry staged.  A client that
goes away mid-upload leaves nothing: the writer's landing file is removed.
"""

from __future__ import annotations

import email.utils
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final

from lakemount.catalog.catalog import Catalog
from lakemount.catalog.model import Entry, Repository, object_view
from lakemount.gateway.errors import S3Error, s3_error
from lakemount.gateway.sig.chunked import BodyDecoder
from lakemount.gateway.sig.payload import PayloadMode, body_plan
from lakemount.gateway.sig.request import HttpRequest
from lakemount.gateway.sig.result import AuthResult
from lakemount.serving import ranges
from lakemount.serving.http import Request, Response
from lakemount.serving.metadata import metadata_headers
from lakemount.serving.ranges import http_date, http_seconds

META_PREFIX: Final = "x-amz-meta-"
MAX_PUT_SIZE: Final = 5 * 1024**3
DEFAULT_CONTENT_TYPE: Final = "binary/octet-stream"


# --- metadata -----------------------------------------------------------------------


def content_type_of(req: Request) -> str:
    """The request's Content-Type, or '' when it has none."""
    return req.header("content-type") or ""


def last_modified(entry: Entry) -> datetime:
    """The object's LastModified in XML: the whole second ``Last-Modified`` says (:func:`http_seconds`).

    Tools compare a listed time with HEAD's, or with the file time they set from
    it (``aws s3 sync --exact-timestamps`` sets whole seconds): a fraction would
    make every object look changed.
    """
    return datetime.fromtimestamp(http_seconds(entry.mtime_ns), UTC)


def quoted(etag: str) -> str:
    """``etag`` in double quotes, as S3 sends it in ETag headers and XML."""
    return f'"{etag}"'


def object_headers(entry: Entry) -> list[tuple[str, str]]:
    """Headers describing an object (without Content-Length), as ``object_view`` shows it."""
    view = object_view(entry)
    headers = [
        ("Last-Modified", http_date(entry.mtime_ns)),
        ("ETag", quoted(view.etag)),
        ("Content-Type", view.content_type or DEFAULT_CONTENT_TYPE),
        ("Accept-Ranges", "bytes"),
    ]
    return headers + metadata_headers(view.metadata, META_PREFIX)


def is_object(entry: Entry) -> bool:
    """Whether S3 shows this entry as an object (regular files and directory markers)."""
    return stat.S_ISREG(entry.mode) or entry.is_dir or entry.is_symlink


# --- conditions ---------------------------------------------------------------------


def _parse_http_date(text: str) -> float | None:
    try:
        t = email.utils.parsedate_to_datetime(text.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return t.timestamp()


def etag_matches(header: str, etag: str) -> bool:
    """True when an If-Match/If-None-Match header value names ``etag`` (or is ``*``)."""
    for candidate in header.split(","):
        c = candidate.strip()
        if c == "*" or c.strip('"') == etag:
            return True
    return False


def check_conditions(req: Request, entry: Entry, *, prefix: str = "if-") -> Response | None:
    """Apply If-Match/If-None-Match/If-(Un)Modified-Since (or the copy-source forms).

    Returns a 304 response for GET/HEAD when the object is not modified; raises
    ``S3Error`` PreconditionFailed when a condition fails.  For the copy-source
    forms (``prefix="x-amz-copy-source-if-"``) every failure is a 412, as S3 does.
    """
    copy = prefix != "if-"
    etag = object_view(entry).etag
    mtime = http_seconds(entry.mtime_ns)
    if_match = req.header(prefix + "match")
    if_none = req.header(prefix + "none-match")
    ims = req.header(prefix + "modified-since")
    ius = req.header(prefix + "unmodified-since")
    if if_match is not None:
        if not etag_matches(if_match, etag):
            raise s3_error("PreconditionFailed", Condition="If-Match")
    elif ius is not None:
        t = _parse_http_date(ius)
        if t is not None and mtime > t:
            raise s3_error("PreconditionFailed", Condition="If-Unmodified-Since")
    not_modified = False
    if if_none is not None:
        not_modified = etag_matches(if_none, etag)
    elif ims is not None:
        t = _parse_http_date(ims)
        not_modified = t is not None and mtime <= t
    if not_modified:
        if copy:
            raise s3_error("PreconditionFailed", Condition="If-None-Match" if if_none is not None else "If-Modified-Since")
        return Response(304, [("ETag", quoted(etag)), ("Last-Modified", http_date(entry.mtime_ns))])
    return None


# --- ranges -------------------------------------------------------------------------

def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """(start, length) of a Range header, as :func:`lakemount.serving.ranges.parse_range`.

    Raises ``S3Error`` InvalidRange (416) when the range is unsatisfiable.
    """
    try:
        return ranges.parse_range(header, size)
    except ranges.RangeNotSatisfiable:
        raise _invalid_range(size) from None


def parse_copy_range(header: str, size: int) -> tuple[int, int]:
    """(start, length) of x-amz-copy-source-range; stricter than Range, as S3 is.

    Raises ``S3Error`` InvalidArgument for a malformed value and InvalidRange
    when it does not lie within the source.
    """
    m = ranges.RANGE.match(header.strip())
    if m is None or not m.group(1) or not m.group(2):
        raise s3_error(
            "InvalidArgument",
            "The x-amz-copy-source-range value must be of the form bytes=first-last where first and last "
            "are the zero-based offsets of the first and last bytes to copy",
            ArgumentName="x-amz-copy-source-range",
            ArgumentValue=header,
        )
    start, end = int(m.group(1)), int(m.group(2))
    if end < start:
        raise s3_error("InvalidArgument", "Range specified is not valid", ArgumentName="x-amz-copy-source-range")
    if end >= size:
        raise s3_error("InvalidRange", "The requested range is not satisfiable", ActualObjectSize=size)
    return start, end - start + 1


def _invalid_range(size: int) -> S3Error:
    return s3_error("InvalidRange", ActualObjectSize=size, RangeRequested="")


# --- bodies in ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Received:
    """A verified request body, stored (``address`` is '' when it was only checked); received with
    ``defer``, ``stored()`` waits until its bytes are (and raises what storing them raised)."""

    address: str
    size: int
    md5: str  # hex
    checksums: dict[str, str] = field(default_factory=dict)
    stored: Callable[[], None] = lambda: None


def declared_length(req: Request) -> int | None:
    """The payload length the client announced (decoded length for aws-chunked)."""
    for h in ("x-amz-decoded-content-length", "content-length"):
        v = req.header(h)
        if v is not None and v.strip().isdigit():
            return int(v.strip())
    return None


def decoder_for(req: Request, auth: object | None) -> BodyDecoder:
    """The body decoder of an authenticated request, or one built from headers (anonymous)."""
    if isinstance(auth, AuthResult):
        return auth.body_decoder()
    hmap = HttpRequest.of(req).header_map()
    sha = hmap.get("x-amz-content-sha256", [None])[0]
    return BodyDecoder(body_plan(hmap, sha, None))


def receive(
    req: Request,
    auth: object | None,
    catalog: Catalog,
    repo: Repository,
    *,
    max_size: int = MAX_PUT_SIZE,
    address: str | None = None,
    store: bool = True,
    defer: bool = False,
) -> Received:
    """Read, decode and verify the whole body, and store it with the catalog's writer.

    Stored content-addressed, or at the namespace-relative ``address``; with
    ``store`` False only checked; with ``defer`` a small body is stored on a thread
    meanwhile the caller stages it (hand ``stored`` to ``Catalog.stage_upload`` as ``ready``).  Raises ``S3Error`` (framing, signature,
    digest, length) or ``ClientDisconnected``; nothing is stored then.
    """
    te = (req.header("transfer-encoding") or "").lower()
    length = declared_length(req)
    if length is None and "chunked" not in te:
        raise s3_error("MissingContentLength")
    if length is not None and length > max_size:
        raise s3_error("EntityTooLarge", ProposedSize=length, MaxSizeAllowed=max_size)
    decoder = decoder_for(req, auth)
    plan = getattr(auth, "body", None)
    signed_sha = plan.sha256 if plan is not None and plan.mode is PayloadMode.SHA256 else None
    # The decoder computes the MD5 (and checks a signed SHA-256); the writer hashes only what is left.
    hash_sha256 = store and address is None and signed_sha is None
    with catalog.writer(repo, expected=length, address=address, hash_md5=False, hash_sha256=hash_sha256, defer=defer) as w:
        size = 0
        while True:
            raw = req.body.read()
            if not raw:
                break
            data = decoder.feed(raw)
            if data:
                size += len(data)
                if size > max_size:
                    raise s3_error("EntityTooLarge", MaxSizeAllowed=max_size)
                w.write(data)
        summary = decoder.finish()
        w.vouch(md5=summary.md5.hex(), sha256=signed_sha)
        if not store:
            w.cancel()
    return Received(w.info.address if store else "", summary.length, summary.md5.hex(), dict(summary.checksums), w.stored)
