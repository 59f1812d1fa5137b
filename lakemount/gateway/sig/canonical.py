"""AWS's canonical forms of a request's path, query and headers, as SigV4 signs them.

The path is percent-encoded once (never normalised: ``//`` and ``.`` segments
are part of S3 keys), query parameters are encoded and sorted, header names
lower-cased and values trimmed with inner whitespace collapsed.
``raw_sorted_query`` is the query exactly as sent, only sorted (what botocore
signs); the verifiers try it too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from urllib.parse import quote, unquote_to_bytes

from lakemount.gateway.sig.request import decode_component, raw_query_pairs

# Text of unreserved characters only (and ``/`` in a path) is its own canonical form: decoding changes nothing
# without a ``%`` and encoding keeps every one of them, so it is returned as it is (stop 57: the decode and
# encode of each query name and value were a fifth of a signature check's time).
_UNRESERVED = re.compile(r"[A-Za-z0-9\-_.~]*")
_UNRESERVED_PATH = re.compile(r"[A-Za-z0-9\-_.~/]*")


def uri_encode_path(raw_path: str) -> str:
    """The canonical URI of a raw S3 path: decoded once, encoded AWS's way.

    Unreserved characters and ``/`` stay, everything else becomes ``%XX``
    (upper-case); ``//`` and dot segments are kept because they are key bytes.
    """
    if raw_path and _UNRESERVED_PATH.fullmatch(raw_path):
        return raw_path
    return quote(unquote_to_bytes(raw_path or "/"), safe="/~") or "/"


def _encode_component(raw: str, plus_is_space: bool) -> str:
    """One query name or value, decoded once and encoded AWS's way."""
    if _UNRESERVED.fullmatch(raw):
        return raw
    if plus_is_space:
        raw = raw.replace("+", "%20")
    return quote(unquote_to_bytes(raw), safe="-_.~")


def canonical_query(raw_query: str, *, exclude: str | None = None, plus_is_space: bool = False) -> str:
    """AWS's canonical query string of a raw query (minus parameter ``exclude``)."""
    pairs = sorted(
        (_encode_component(k, plus_is_space), _encode_component(v, plus_is_space))
        for k, v in raw_query_pairs(raw_query)
        if exclude is None or decode_component(k) != exclude
    )
    return "&".join(f"{k}={v}" for k, v in pairs)


def raw_sorted_query(raw_query: str, exclude: str | None) -> str:
    """The query exactly as sent (minus parameter ``exclude``), only sorted: what botocore signs."""
    pairs = sorted((k, v) for k, v in raw_query_pairs(raw_query) if exclude is None or decode_component(k) != exclude)
    return "&".join(f"{k}={v}" for k, v in pairs)


def canonical_headers(headers: Mapping[str, list[str]], signed: Sequence[str]) -> str:
    """``name:value\\n`` for each signed header; repeated values joined by ``,``."""
    return "".join(f"{name}:{','.join(' '.join(v.split()) for v in headers.get(name, ()))}\n" for name in signed)


def canonical_request(
    method: str, uri: str, query: str, headers: Mapping[str, list[str]], signed: Sequence[str], payload: str
) -> str:
    """The SigV4 canonical request (the header block keeps its trailing blank line)."""
    return "\n".join([method, uri, query, canonical_headers(headers, signed), ";".join(signed), payload])
