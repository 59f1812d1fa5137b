"""Receiving object data: a raw body or a ``multipart/form-data`` one, verified before anything is staged.

The bytes go through the catalog's object writer (``catalog/writer.py``, as
the gateway's PUT: a landing file inside a local storage namespace, MD5 and
SHA-256 computed on two threads); only when the whole body arrived, its
length matches ``Content-Length`` and (for a form) the closing boundary was
seen, is it stored content-addressed. A client that disconnects or times out
leaves nothing behind: the writer's block fails, nothing is stored or staged.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from lakemount.api.errors import ApiError, bad_request
from lakemount.serving.http import Request
from lakemount.serving.metadata import header_text

if TYPE_CHECKING:
    from lakemount.api.context import ApiCatalog
    from lakemount.catalog.model import Repository
    from lakemount.catalog.writer import DataWriter

MAX_OBJECT_BYTES: Final = 5 * 1024**3
MAX_PART_HEADER: Final = 64 * 1024


@dataclass(frozen=True, slots=True)
class Stored:
    """An object body landed in the block store: its address, size, MD5 and content type."""
    address: str
    size: int
    md5: str
    content_type: str


def _chunks(request: Request) -> Iterator[bytes]:
    while piece := request.body.read():
        yield piece


def _boundary(content_type: str) -> bytes:
    m = re.search(r'boundary="?([^";]+)"?', content_type)
    if m is None or not 1 <= len(m.group(1)) <= 70:
        raise bad_request("multipart/form-data without a valid boundary")
    return m.group(1).encode("latin-1", "replace")


def _form_content(chunks: Iterator[bytes], boundary: bytes, part_type: list[str]) -> Iterator[bytes]:
    """The data of the form's ``content`` part, streamed; 400 if the form is malformed or lacks it."""
    buf = b""
    opener = b"--" + boundary
    # The preamble and the first part's headers.
    while True:
        start = buf.find(opener)
        if start >= 0:
            head_end = buf.find(b"\r\n\r\n", start)
            if head_end >= 0:
                break
        if len(buf) > MAX_PART_HEADER:
            raise bad_request("multipart/form-data: part headers too long or boundary missing")
        piece = next(chunks, b"")
        if not piece:
            raise bad_request("multipart/form-data: body ended before the first part")
        buf += piece
    headers = buf[start + len(opener) : head_end].decode("utf-8", "replace")
    disposition = re.search(r'(?im)^content-disposition:\s*form-data;.*\bname="([^"]*)"', headers)
    if disposition is None or disposition.group(1) != "content":
        raise bad_request("multipart/form-data: the first part must be the 'content' field")
    ctype = re.search(r"(?im)^content-type:\s*([^\r\n]+)", headers)
    if ctype is not None:
        part_type.append(ctype.group(1).strip())
    buf = buf[head_end + 4 :]
    delim = b"\r\n--" + boundary
    keep = len(delim) - 1
    while True:
        i = buf.find(delim)
        if i >= 0:
            if buf[:i]:
                yield buf[:i]
            rest = buf[i + len(delim) :]
            while len(rest) < 2:
                piece = next(chunks, b"")
                if not piece:
                    raise bad_request("multipart/form-data: body ended inside the closing boundary")
                rest += piece
            if not (rest.startswith(b"--") or rest.startswith(b"\r\n")):
                raise bad_request("multipart/form-data: malformed boundary")
            for _ in chunks:  # the epilogue and any further parts are read and ignored
                pass
            return
        if len(buf) > keep:
            yield buf[: len(buf) - keep]
            buf = buf[len(buf) - keep :]
        piece = next(chunks, b"")
        if not piece:
            raise bad_request("multipart/form-data: body ended before the closing boundary (truncated upload)")
        buf += piece


def _fill(w: DataWriter, data: Iterator[bytes], limit: int) -> None:
    """Write ``data`` into ``w``; 413 once it passes ``limit`` bytes."""
    for piece in data:
        if w.size + len(piece) > limit:
            raise ApiError(413, f"object larger than {limit} bytes")
        w.write(piece)


def receive_object(request: Request, catalog: ApiCatalog, repo: Repository) -> Stored:
    """Read the request's object data (raw or form), verify it and store it content-addressed.

    Raises ``ApiError`` (400 malformed or truncated, 413 too large) and
    ``ClientDisconnected``; nothing is stored then.
    """
    declared = request.header("content-length")
    if declared is not None:
        if not declared.strip().isdigit():
            raise bad_request("malformed Content-Length")
        if int(declared) > MAX_OBJECT_BYTES + MAX_PART_HEADER:
            raise ApiError(413, f"object larger than {MAX_OBJECT_BYTES} bytes")
    ctype = header_text(request.header("content-type") or "")
    is_form = ctype.split(";")[0].strip().lower() == "multipart/form-data"
    part_type: list[str] = []
    chunks = _chunks(request)
    data = _form_content(chunks, _boundary(ctype), part_type) if is_form else chunks
    with catalog.writer(repo, expected=None if declared is None else int(declared)) as w:
        _fill(w, data, MAX_OBJECT_BYTES)
        if not is_form and declared is not None and int(declared) != w.size:
            raise bad_request(f"body has {w.size} bytes, Content-Length said {declared}")
    content_type = part_type[0] if is_form and part_type else (ctype if not is_form else "")
    return Stored(w.info.address, w.size, w.info.etag, content_type or "application/octet-stream")
