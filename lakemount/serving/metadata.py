"""An object's metadata as HTTP headers: the one mapping of the S3 gateway and the REST API.

User metadata is the entry's metadata under its lower-cased name (the same
pairs the mount shows as ``user.*`` xattrs); each front end carries it in
headers of its own prefix (``x-amz-meta-`` for S3, ``x-lakefs-meta-`` for the
API, as lakeFS).  The standard headers S3 stores with an object
(:data:`STORED_HEADERS`: Cache-Control, Content-Disposition, Content-Encoding,
Content-Language, Expires) are kept as metadata too, under ``s3:<header>``
(``STORED_PREFIX`` of ``catalog/model.py``): a colon cannot occur in an HTTP
header name, so they never collide with user metadata, and a mount user can
set one as the xattr ``user.s3:cache-control``.  An upload through either front
end stores both kinds from its request headers, and a read through either
sends both back, so an object looks the same whichever way it came in.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from lakemount.catalog.model import STORED_PREFIX
from lakemount.errors import MetadataTooLarge
from lakemount.serving.http import Request

STORED_HEADERS: Final = ("cache-control", "content-disposition", "content-encoding", "content-language", "expires")
MAX_USER_METADATA_BYTES: Final = 2048  # S3's limit: names and values of the user metadata together


def header_text(value: str) -> str:
    """A header value as text: its bytes as UTF-8 when they are, else as Latin-1.

    The server hands header values over as UTF-8 with undecodable bytes
    surrogate-escaped; Python's HTTP clients (the lakeFS SDKs among them) send
    a non-ASCII ``str`` value as Latin-1, which HTTP reads its high bytes as.
    Stored as they arrive, the escapes could not be encoded (a 500); read as
    Latin-1 they round-trip, since responses send such values as Latin-1.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogateescape").decode("latin-1")
    return value


def strip_aws_chunked(content_encoding: str | None) -> str | None:
    """The Content-Encoding to store: the header minus the ``aws-chunked`` transport coding."""
    if content_encoding is None:
        return None
    kept = [c.strip() for c in content_encoding.split(",") if c.strip() and c.strip().lower() != "aws-chunked"]
    return ", ".join(kept) or None


def metadata_from_headers(req: Request, user_prefix: str) -> list[tuple[str, str]]:
    """The metadata an upload request gives its object, sorted: user metadata (headers named
    ``user_prefix`` + name; the first of a repeated name counts) and the stored standard headers.

    Raises ``MetadataTooLarge`` when the user metadata's names and values pass
    ``MAX_USER_METADATA_BYTES``.
    """
    out: list[tuple[str, str]] = []
    user_bytes = 0
    seen: set[str] = set()
    for name, value in req.headers:
        if name.startswith(user_prefix):
            meta = name[len(user_prefix) :]
            if meta in seen:
                continue
            seen.add(meta)
            text = header_text(value)
            user_bytes += len(meta) + len(text)
            out.append((meta, text))
    if user_bytes > MAX_USER_METADATA_BYTES:
        raise MetadataTooLarge(user_bytes, MAX_USER_METADATA_BYTES)
    for h in STORED_HEADERS:
        stored = req.header(h)
        if h == "content-encoding":
            stored = strip_aws_chunked(stored)
        if stored:
            out.append((STORED_PREFIX + h, header_text(stored)))
    return sorted(out)


def user_metadata(metadata: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The user metadata of an object's metadata (the stored standard headers left out)."""
    return [(k, v) for k, v in metadata if not k.startswith(STORED_PREFIX)]


def metadata_headers(metadata: Iterable[tuple[str, str]], user_prefix: str) -> list[tuple[str, str]]:
    """The headers that show an object's metadata: the stored standard headers under their own
    names, the user metadata under ``user_prefix``."""
    headers: list[tuple[str, str]] = []
    for name, value in metadata:
        if name.startswith(STORED_PREFIX):
            h = name[len(STORED_PREFIX) :]
            if h in STORED_HEADERS:
                headers.append((h.title(), value))
        else:
            headers.append((user_prefix + name, value))
    return headers
