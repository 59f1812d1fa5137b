"""The request as the signature verifiers see it, and helpers both SigV2 and SigV4 share.

``HttpRequest`` is framework-free (method, raw path and query, header pairs);
``first`` reads a header, ``raw_query_pairs``/``decode_component`` read the
query as sent, ``lookup_secret`` turns a ``SecretLookup`` miss into
``InvalidAccessKeyId`` and ``signatures_equal`` compares signatures in
constant time.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote_to_bytes

from lakemount import errors as lm
from lakemount.gateway.errors import s3_error
from lakemount.serving.http import Request

SecretLookup = Callable[[str], str]
"""``lookup(access_key_id) -> secret``; raises ``NotFound`` (or ``KeyError``) for
an unknown key, which the verifier answers with ``InvalidAccessKeyId``."""


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
    _header_map: dict[str, list[str]] | None = field(default=None, init=False, compare=False, repr=False)

    @classmethod
    def of(cls, request: Request) -> HttpRequest:
        """What the verifiers need of a front end's request (its body is not consulted)."""
        return cls(request.method, request.raw_path, request.raw_query, request.headers)

    def header_map(self) -> dict[str, list[str]]:
        """Lower-cased header names to their values, in received order (made once a request: do not change it)."""
        if self._header_map is not None:
            return self._header_map
        out: dict[str, list[str]] = {}
        for name, value in self.headers:
            out.setdefault(name.lower(), []).append(value)
        object.__setattr__(self, "_header_map", out)
        return out

    def query_pairs(self) -> list[tuple[str, str]]:
        """The query decoded to (name, value) pairs; ``+`` stays a plus sign."""
        return [(decode_component(k), decode_component(v)) for k, v in raw_query_pairs(self.query)]

    def query_names(self) -> set[str]:
        """The decoded names of the query's parameters (their values left encoded)."""
        return {decode_component(k) for k, _ in raw_query_pairs(self.query)}


def raw_query_pairs(query: str) -> list[tuple[str, str]]:
    """The raw ``name=value`` pairs of a query string, in order, still percent-encoded."""
    pairs = []
    for part in query.split("&"):
        if part:
            name, _, value = part.partition("=")
            pairs.append((name, value))
    return pairs


def decode_component(text: str) -> str:
    """A percent-decoded URL component; bytes that are not UTF-8 survive as surrogates."""
    if "%" not in text and text.isascii():
        return text  # nothing to decode (most names and values): no round trip through bytes
    return unquote_to_bytes(text).decode("utf-8", "surrogateescape")


def first(headers: Mapping[str, list[str]], name: str) -> str | None:
    """The first value of header ``name`` (lower-case) or ``None``."""
    values = headers.get(name)
    return values[0] if values else None


def signatures_equal(a: str, b: str) -> bool:
    """Constant-time comparison of two signatures (no timing side channel)."""
    return hmac.compare_digest(a.encode("utf-8", "surrogateescape"), b.encode("utf-8", "surrogateescape"))


def lookup_secret(lookup: SecretLookup, access_key_id: str) -> str:
    """The secret of ``access_key_id``; raises ``S3Error`` InvalidAccessKeyId for an unknown key."""
    try:
        return lookup(access_key_id)
    except (lm.NotFound, KeyError):
        raise s3_error("InvalidAccessKeyId", AWSAccessKeyId=access_key_id) from None
