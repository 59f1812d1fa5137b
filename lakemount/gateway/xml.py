"""S3 XML: rendering responses and safely parsing request bodies.

Rendering is plain string building over small frozen records (no DOM); the
object listings, the hot path of every S3A job, are rendered straight from
entries by ``listing_xml.py``.  Text is escaped for XML 1.0; keys may hold
control characters, which are written as character references as S3 does
(clients that cannot take them ask for ``encoding-type=url``, which the
listing renderers apply to the fields S3 documents).

Parsing uses expat directly with DTDs, entity declarations and external
entities refused, a size limit, a depth limit and an element limit, so a hostile
body costs at most a bounded parse; anything unexpected raises ``S3Error``
``MalformedXML``.
"""

from __future__ import annotations

import xml.parsers.expat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import quote

from lakemount.catalog.paths import printable_bytes
from lakemount.gateway.errors import CODES, S3Error, s3_error

S3_NAMESPACE = "http://s3.amazonaws.com/doc/2006-03-01/"
_DECL = '<?xml version="1.0" encoding="UTF-8"?>\n'

MAX_BODY_BYTES = 4 * 1024 * 1024  # 10,000 parts or 1,000 keys of 1 KiB fit
MAX_DELETE_OBJECTS = 1000
MAX_PARTS = 10000
_MAX_DEPTH = 8


# --- escaping --------------------------------------------------------------------

_ESCAPE = {ord("&"): "&amp;", ord("<"): "&lt;", ord(">"): "&gt;", ord('"'): "&quot;", ord("'"): "&apos;"}
# \r would be normalised to \n by any parser; the other C0 controls are not
# plain XML 1.0 characters.
_ESCAPE.update({c: f"&#x{c:X};" for c in range(0x20) if c not in (0x09, 0x0A)})


def escape(text: str) -> str:
    """``text`` safe as XML element content or attribute value."""
    return text.translate(_ESCAPE)


def url_encode(text: str) -> str:
    """The ``encoding-type=url`` form of a key, as S3 writes it (a space is ``%20``)."""
    return quote(text, safe="/", errors="surrogateescape")


def timestamp(t: datetime) -> str:
    """S3's ISO 8601 form with milliseconds: ``2009-10-12T17:50:30.000Z``."""
    t = t.astimezone(UTC) if t.tzinfo is not None else t
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def quote_etag(etag: str) -> str:
    """An ETag with its double quotes, as S3 sends it."""
    return etag if etag.startswith('"') else f'"{etag}"'


# --- records rendered ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Owner:
    """An S3 owner (ID and display name), shown in listings."""

    id: str
    display_name: str = ""


@dataclass(frozen=True, slots=True)
class BucketRecord:
    """One bucket of ListBuckets."""

    name: str
    created: datetime


@dataclass(frozen=True, slots=True)
class VersionRecord:
    """One ``<Version>`` (or ``<DeleteMarker>``) entry of ListObjectVersions."""

    key: str
    version_id: str
    is_latest: bool
    last_modified: datetime
    etag: str = ""
    size: int = 0
    storage_class: str = "STANDARD"
    owner: Owner | None = None
    delete_marker: bool = False


@dataclass(frozen=True, slots=True)
class PartRecord:
    """One uploaded part of ListParts."""

    part_number: int
    last_modified: datetime
    etag: str
    size: int
    checksums: tuple[tuple[str, str], ...] = ()  # ("CRC32", base64), ...


@dataclass(frozen=True, slots=True)
class UploadRecord:
    """One in-progress upload of ListMultipartUploads."""

    key: str
    upload_id: str
    initiated: datetime
    storage_class: str = "STANDARD"
    owner: Owner | None = None


@dataclass(frozen=True, slots=True)
class DeletedRecord:
    """One ``<Deleted>`` entry of DeleteObjects."""

    key: str
    version_id: str | None = None
    delete_marker: bool = False
    delete_marker_version_id: str | None = None


@dataclass(frozen=True, slots=True)
class DeleteErrorRecord:
    """One ``<Error>`` entry of DeleteObjects."""

    key: str
    code: str
    message: str
    version_id: str | None = None


# --- rendering -------------------------------------------------------------------


def _el(out: list[str], tag: str, value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, datetime):
        text = timestamp(value)
    else:
        text = escape(str(value))
    out.append(f"<{tag}>{text}</{tag}>")


def _open(tag: str) -> list[str]:
    return [_DECL, f'<{tag} xmlns="{S3_NAMESPACE}">']


def _done(out: list[str], tag: str) -> bytes:
    out.append(f"</{tag}>")
    return printable_bytes("".join(out))


def _owner(out: list[str], owner: Owner | None, tag: str = "Owner") -> None:
    if owner is not None:
        out.append(f"<{tag}>")
        _el(out, "ID", owner.id)
        _el(out, "DisplayName", owner.display_name)
        out.append(f"</{tag}>")


def _enc(text: str | None, encode: bool) -> str | None:
    return url_encode(text) if encode and text is not None else text


def _common_prefixes(out: list[str], prefixes: Iterable[str], encode: bool) -> None:
    for p in prefixes:
        out.append(f"<CommonPrefixes><Prefix>{escape(_enc(p, encode) or '')}</Prefix></CommonPrefixes>")


def _encoding_flag(encoding_type: str | None) -> bool:
    if encoding_type is None:
        return False
    if encoding_type != "url":
        raise s3_error("InvalidArgument", "Invalid Encoding Method specified in Request", ArgumentName="encoding-type")
    return True


def render_list_buckets(buckets: Iterable[BucketRecord], owner: Owner) -> bytes:
    """``ListAllMyBucketsResult``."""
    out = _open("ListAllMyBucketsResult")
    _owner(out, owner)
    out.append("<Buckets>")
    for b in buckets:
        out.append("<Bucket>")
        _el(out, "Name", b.name)
        _el(out, "CreationDate", b.created)
        out.append("</Bucket>")
    out.append("</Buckets>")
    return _done(out, "ListAllMyBucketsResult")


def render_list_versions(
    *,
    bucket: str,
    prefix: str,
    key_marker: str,
    version_id_marker: str,
    max_keys: int,
    delimiter: str | None,
    is_truncated: bool,
    versions: Sequence[VersionRecord],
    common_prefixes: Sequence[str],
    next_key_marker: str | None = None,
    next_version_id_marker: str | None = None,
    encoding_type: str | None = None,
) -> bytes:
    """``ListVersionsResult``: versions and delete markers in the given order."""
    enc = _encoding_flag(encoding_type)
    out = _open("ListVersionsResult")
    _el(out, "Name", bucket)
    _el(out, "Prefix", _enc(prefix, enc))
    _el(out, "KeyMarker", _enc(key_marker, enc))
    _el(out, "VersionIdMarker", version_id_marker)
    if is_truncated:
        _el(out, "NextKeyMarker", _enc(next_key_marker, enc))
        _el(out, "NextVersionIdMarker", next_version_id_marker)
    _el(out, "MaxKeys", max_keys)
    _el(out, "Delimiter", _enc(delimiter, enc) if delimiter else None)
    _el(out, "IsTruncated", is_truncated)
    if enc:
        _el(out, "EncodingType", "url")
    for v in versions:
        tag = "DeleteMarker" if v.delete_marker else "Version"
        out.append(f"<{tag}>")
        _el(out, "Key", _enc(v.key, enc))
        _el(out, "VersionId", v.version_id)
        _el(out, "IsLatest", v.is_latest)
        _el(out, "LastModified", v.last_modified)
        if not v.delete_marker:
            _el(out, "ETag", quote_etag(v.etag))
            _el(out, "Size", v.size)
            _el(out, "StorageClass", v.storage_class)
        _owner(out, v.owner)
        out.append(f"</{tag}>")
    _common_prefixes(out, common_prefixes, enc)
    return _done(out, "ListVersionsResult")


def render_initiate_multipart_upload(bucket: str, key: str, upload_id: str) -> bytes:
    """``InitiateMultipartUploadResult`` of CreateMultipartUpload."""
    out = _open("InitiateMultipartUploadResult")
    _el(out, "Bucket", bucket)
    _el(out, "Key", key)
    _el(out, "UploadId", upload_id)
    return _done(out, "InitiateMultipartUploadResult")


def _checksums(out: list[str], checksums: Iterable[tuple[str, str]]) -> None:
    for algorithm, value in checksums:
        _el(out, f"Checksum{algorithm.upper()}", value)


def render_complete_multipart_upload(
    *, location: str, bucket: str, key: str, etag: str, checksums: Sequence[tuple[str, str]] = ()
) -> bytes:
    """``CompleteMultipartUploadResult``; ``checksums`` as ("CRC32", base64) pairs."""
    out = _open("CompleteMultipartUploadResult")
    _el(out, "Location", location)
    _el(out, "Bucket", bucket)
    _el(out, "Key", key)
    _el(out, "ETag", quote_etag(etag))
    _checksums(out, checksums)
    return _done(out, "CompleteMultipartUploadResult")


def render_list_parts(
    *,
    bucket: str,
    key: str,
    upload_id: str,
    part_number_marker: int,
    next_part_number_marker: int,
    max_parts: int,
    is_truncated: bool,
    parts: Sequence[PartRecord],
    owner: Owner | None = None,
    storage_class: str = "STANDARD",
) -> bytes:
    """``ListPartsResult``; ``owner`` is shown as both Initiator and Owner."""
    out = _open("ListPartsResult")
    _el(out, "Bucket", bucket)
    _el(out, "Key", key)
    _el(out, "UploadId", upload_id)
    _owner(out, owner, "Initiator")
    _owner(out, owner)
    _el(out, "StorageClass", storage_class)
    _el(out, "PartNumberMarker", part_number_marker)
    _el(out, "NextPartNumberMarker", next_part_number_marker)
    _el(out, "MaxParts", max_parts)
    _el(out, "IsTruncated", is_truncated)
    for p in parts:
        out.append("<Part>")
        _el(out, "PartNumber", p.part_number)
        _el(out, "LastModified", p.last_modified)
        _el(out, "ETag", quote_etag(p.etag))
        _el(out, "Size", p.size)
        _checksums(out, p.checksums)
        out.append("</Part>")
    return _done(out, "ListPartsResult")


def render_list_multipart_uploads(
    *,
    bucket: str,
    prefix: str,
    key_marker: str,
    upload_id_marker: str,
    max_uploads: int,
    delimiter: str | None,
    is_truncated: bool,
    uploads: Sequence[UploadRecord],
    common_prefixes: Sequence[str] = (),
    next_key_marker: str | None = None,
    next_upload_id_marker: str | None = None,
    encoding_type: str | None = None,
) -> bytes:
    """``ListMultipartUploadsResult``; markers for the next page only when truncated."""
    enc = _encoding_flag(encoding_type)
    out = _open("ListMultipartUploadsResult")
    _el(out, "Bucket", bucket)
    _el(out, "KeyMarker", _enc(key_marker, enc))
    _el(out, "UploadIdMarker", upload_id_marker)
    _el(out, "NextKeyMarker", _enc(next_key_marker, enc) if is_truncated else None)
    _el(out, "NextUploadIdMarker", next_upload_id_marker if is_truncated else None)
    _el(out, "Delimiter", _enc(delimiter, enc) if delimiter else None)
    _el(out, "Prefix", _enc(prefix, enc))
    _el(out, "MaxUploads", max_uploads)
    _el(out, "IsTruncated", is_truncated)
    if enc:
        _el(out, "EncodingType", "url")
    for u in uploads:
        out.append("<Upload>")
        _el(out, "Key", _enc(u.key, enc))
        _el(out, "UploadId", u.upload_id)
        _owner(out, u.owner, "Initiator")
        _owner(out, u.owner)
        _el(out, "StorageClass", u.storage_class)
        _el(out, "Initiated", u.initiated)
        out.append("</Upload>")
    _common_prefixes(out, common_prefixes, enc)
    return _done(out, "ListMultipartUploadsResult")


def render_copy_object_result(etag: str, last_modified: datetime, checksums: Sequence[tuple[str, str]] = ()) -> bytes:
    """``CopyObjectResult`` of CopyObject."""
    out = _open("CopyObjectResult")
    _el(out, "LastModified", last_modified)
    _el(out, "ETag", quote_etag(etag))
    _checksums(out, checksums)
    return _done(out, "CopyObjectResult")


def render_copy_part_result(etag: str, last_modified: datetime, checksums: Sequence[tuple[str, str]] = ()) -> bytes:
    """``CopyPartResult`` of UploadPartCopy."""
    out = _open("CopyPartResult")
    _el(out, "LastModified", last_modified)
    _el(out, "ETag", quote_etag(etag))
    _checksums(out, checksums)
    return _done(out, "CopyPartResult")


def render_delete_result(
    deleted: Iterable[DeletedRecord], errors: Iterable[DeleteErrorRecord], *, quiet: bool = False
) -> bytes:
    """``DeleteResult``; in quiet mode only the errors are listed, as S3 does."""
    out = _open("DeleteResult")
    if not quiet:
        for d in deleted:
            out.append("<Deleted>")
            _el(out, "Key", d.key)
            _el(out, "VersionId", d.version_id)
            if d.delete_marker:
                _el(out, "DeleteMarker", True)
                _el(out, "DeleteMarkerVersionId", d.delete_marker_version_id)
            out.append("</Deleted>")
    for e in errors:
        out.append("<Error>")
        _el(out, "Key", e.key)
        _el(out, "VersionId", e.version_id)
        _el(out, "Code", e.code)
        _el(out, "Message", e.message)
        out.append("</Error>")
    return _done(out, "DeleteResult")


def render_location_constraint(region: str) -> bytes:
    """GetBucketLocation: empty for us-east-1, as S3 answers."""
    text = "" if region in ("", "us-east-1") else escape(region)
    return f'{_DECL}<LocationConstraint xmlns="{S3_NAMESPACE}">{text}</LocationConstraint>'.encode()


def render_error(err: S3Error, *, resource: str | None = None, request_id: str = "", host_id: str = "") -> bytes:
    """The ``<Error>`` body of an error response (not for HEAD: it has no body)."""
    out = [_DECL, "<Error>"]
    _el(out, "Code", err.code)
    _el(out, "Message", err.message)
    for name, value in err.fields.items():
        if name not in ("Resource", "RequestId", "HostId"):
            _el(out, name, value)
    _el(out, "Resource", err.fields.get("Resource", resource))
    _el(out, "RequestId", err.fields.get("RequestId", request_id))
    _el(out, "HostId", err.fields.get("HostId", host_id))
    out.append("</Error>")
    return printable_bytes("".join(out))


# --- parsing ---------------------------------------------------------------------


@dataclass(slots=True)
class _Node:
    tag: str
    text: list[str] = field(default_factory=list)
    children: list[_Node] = field(default_factory=list)

    def value(self) -> str:
        return "".join(self.text)

    def child(self, tag: str) -> _Node | None:
        for c in self.children:
            if c.tag == tag:
                return c
        return None


class _Refused(Exception):
    pass


def _malformed(detail: str | None = None) -> S3Error:
    message = CODES["MalformedXML"][1]
    return s3_error("MalformedXML", message if detail is None else f"{message} ({detail})")


def _parse_tree(body: bytes, root: str, *, max_bytes: int = MAX_BODY_BYTES, max_elements: int = 100_000) -> _Node:
    """Parse ``body`` into a tree of local names; the root must be ``root``.

    Namespaces are dropped (clients send S3's or none).  Raises ``MalformedXML``
    for bad XML, a DTD or entity declaration, a body over ``max_bytes``, more
    than ``max_elements`` elements, nesting deeper than 8, or another root.
    """
    if len(body) > max_bytes:
        raise _malformed("body too large")
    if not body.strip():
        raise _malformed("empty body")
    parser = xml.parsers.expat.ParserCreate(namespace_separator=" ")
    parser.SetParamEntityParsing(xml.parsers.expat.XML_PARAM_ENTITY_PARSING_NEVER)
    stack: list[_Node] = []
    top: list[_Node] = []
    count = 0

    def refuse(*_: object) -> None:
        raise _Refused

    def start(name: str, _attrs: object) -> None:
        nonlocal count
        count += 1
        if count > max_elements or len(stack) >= _MAX_DEPTH:
            raise _Refused
        node = _Node(name.rsplit(" ", 1)[-1])
        if stack:
            stack[-1].children.append(node)
        else:
            top.append(node)
        stack.append(node)

    def end(_name: str) -> None:
        stack.pop()

    def chars(data: str) -> None:
        if stack:
            stack[-1].text.append(data)

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = chars
    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    parser.ExternalEntityRefHandler = refuse  # type: ignore[assignment]
    try:
        parser.Parse(body, True)
    except (_Refused, xml.parsers.expat.ExpatError, ValueError):
        raise _malformed() from None
    if len(top) != 1 or top[0].tag != root:
        raise _malformed(f"expected a {root} document")
    return top[0]


@dataclass(frozen=True, slots=True)
class CompletedPart:
    """A part named in a CompleteMultipartUpload body."""

    part_number: int
    etag: str  # without quotes
    checksums: tuple[tuple[str, str], ...] = ()  # ("CRC32", base64), ... as sent


def _strip_etag(etag: str) -> str:
    etag = etag.strip()
    if len(etag) >= 2 and etag[0] == etag[-1] == '"':
        etag = etag[1:-1]
    return etag


def parse_complete_multipart_upload(body: bytes) -> list[CompletedPart]:
    """The parts listed in a ``CompleteMultipartUpload`` body, in document order.

    Order and existence are the operation's to check (``InvalidPartOrder``,
    ``InvalidPart``).  Raises ``MalformedXML`` for a bad document, a part without
    a number 1-10000 or an ETag, no parts, or more than 10,000 parts.
    """
    root = _parse_tree(body, "CompleteMultipartUpload")
    parts = []
    for node in root.children:
        if node.tag != "Part":
            continue
        number = node.child("PartNumber")
        etag = node.child("ETag")
        if number is None or etag is None:
            raise _malformed("each Part needs a PartNumber and an ETag")
        text = number.value().strip()
        if not text.isdigit() or not text.isascii() or not 1 <= int(text) <= MAX_PARTS:
            raise _malformed("PartNumber must be an integer from 1 to 10000")
        checksums = tuple(
            (c.tag[len("Checksum") :], c.value().strip())
            for c in node.children
            if c.tag.startswith("Checksum") and c.tag != "ChecksumType"
        )
        parts.append(CompletedPart(int(text), _strip_etag(etag.value()), checksums))
    if not parts or len(parts) > MAX_PARTS:
        raise _malformed("a CompleteMultipartUpload lists 1 to 10000 parts")
    return parts


@dataclass(frozen=True, slots=True)
class ObjectIdentifier:
    """A key (and optional version) named in a DeleteObjects body."""

    key: str
    version_id: str | None = None


@dataclass(frozen=True, slots=True)
class DeleteRequest:
    """A parsed DeleteObjects body."""

    objects: tuple[ObjectIdentifier, ...]
    quiet: bool = False


def parse_delete(body: bytes) -> DeleteRequest:
    """The body of DeleteObjects.  Keys are kept byte for byte (no trimming).

    Raises ``MalformedXML`` for a bad document, an Object without a Key, no
    objects, more than 1000, or a Quiet other than true/false.
    """
    root = _parse_tree(body, "Delete")
    quiet = False
    objects = []
    for node in root.children:
        if node.tag == "Quiet":
            text = node.value().strip().lower()
            if text not in ("true", "false"):
                raise _malformed("Quiet must be true or false")
            quiet = text == "true"
        elif node.tag == "Object":
            key = node.child("Key")
            if key is None:
                raise _malformed("each Object needs a Key")
            version = node.child("VersionId")
            version_id = (version.value().strip() or None) if version is not None else None
            objects.append(ObjectIdentifier(key.value(), version_id))
    if not objects or len(objects) > MAX_DELETE_OBJECTS:
        raise _malformed("a Delete lists 1 to 1000 objects")
    return DeleteRequest(tuple(objects), quiet)


def parse_create_bucket_configuration(body: bytes) -> str | None:
    """The LocationConstraint of a CreateBucket body; None for no body or none given.

    Raises ``MalformedXML`` for a body that is not a CreateBucketConfiguration.
    """
    if not body.strip():
        return None
    root = _parse_tree(body, "CreateBucketConfiguration", max_bytes=64 * 1024)
    node = root.child("LocationConstraint")
    return (node.value().strip() or None) if node is not None else None
