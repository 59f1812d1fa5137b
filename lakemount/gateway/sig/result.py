"""What authentication yields: ``AuthResult`` (who signed, by which ``AuthScheme``, how to read the body)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import Enum

from lakemount.gateway.sig.chunked import BodyDecoder
from lakemount.gateway.sig.payload import BodyPlan


class AuthScheme(Enum):
    """Which signature scheme authenticated a request."""

    SIGV4_HEADER = "sigv4-header"
    SIGV4_QUERY = "sigv4-query"
    SIGV2_HEADER = "sigv2-header"
    SIGV2_QUERY = "sigv2-query"


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
