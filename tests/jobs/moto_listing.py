"""A fast ListObjectsV2 for moto's S3 server, so tests can list 100,000 keys.

moto 5 renders each listed key through its generic botocore-model serializer
(about 1.5 ms per key, mostly dateutil parsing timestamps it produced itself)
and filters the whole bucket on every page; listing 100,000 keys takes
minutes.  ``install()`` replaces the one response method with a direct
rendering of the same XML from moto's own key store (prefix, delimiter,
max-keys, start-after and continuation tokens as S3 defines them).  Every
other S3 operation is moto's.
"""

from __future__ import annotations

import base64
import bisect
from typing import Any
from xml.sax.saxutils import escape

_installed = False


def _upper(prefix: str) -> str:
    """The smallest string greater than every string starting with ``prefix``."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1) if prefix else ""


def _token(kind: str, value: str) -> str:
    return base64.urlsafe_b64encode(f"{kind}:{value}".encode()).decode()


def _untoken(token: str) -> tuple[str, str]:
    kind, _, value = base64.urlsafe_b64decode(token.encode()).decode().partition(":")
    return kind, value


def install() -> None:
    global _installed
    if _installed:
        return
    import moto.s3.responses as responses
    from moto.s3.models import FakeDeleteMarker

    def list_objects_v2(self: Any) -> Any:
        bucket = self.backend.get_bucket(self.bucket_name)
        qs = self.querystring
        prefix = qs.get("prefix", [""])[0] or ""
        if isinstance(prefix, bytes):
            prefix = prefix.decode()
        delimiter = qs.get("delimiter", [None])[0] or None
        max_keys = int(qs.get("max-keys", ["1000"])[0])
        token = qs.get("continuation-token", [None])[0]
        start_after = qs.get("start-after", [None])[0]
        store = bucket.keys
        names = sorted(dict.keys(store))
        i = bisect.bisect_left(names, prefix)
        if token:
            kind, value = _untoken(token)
            i = max(i, bisect.bisect_left(names, _upper(value)) if kind == "p" else bisect.bisect_right(names, value))
        elif start_after:
            i = max(i, bisect.bisect_right(names, start_after))
        contents: list[str] = []
        prefixes: list[str] = []
        last: tuple[str, str] | None = None
        truncated = False
        n = len(names)
        while i < n and names[i].startswith(prefix):
            if len(contents) + len(prefixes) >= max_keys:
                truncated = True
                break
            name = names[i]
            if delimiter:
                j = name.find(delimiter, len(prefix))
                if j >= 0:
                    cp = name[: j + len(delimiter)]
                    prefixes.append(f"<CommonPrefixes><Prefix>{escape(cp)}</Prefix></CommonPrefixes>")
                    last = ("p", cp)
                    i = bisect.bisect_left(names, _upper(cp))
                    continue
            key = dict.__getitem__(store, name)[-1]
            i += 1
            if isinstance(key, FakeDeleteMarker):
                continue
            contents.append(
                f"<Contents><Key>{escape(name)}</Key><LastModified>{key.last_modified_ISO8601}</LastModified>"
                f"<ETag>{escape(key.etag)}</ETag><Size>{key.size}</Size><StorageClass>STANDARD</StorageClass></Contents>"
            )
            last = ("k", name)
        parts = [
            '<?xml version="1.0" encoding="UTF-8"?>',
            '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">',
            f"<Name>{escape(bucket.name)}</Name><Prefix>{escape(prefix)}</Prefix>",
            f"<MaxKeys>{max_keys}</MaxKeys><KeyCount>{len(contents) + len(prefixes)}</KeyCount>",
            f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>",
        ]
        if delimiter:
            parts.append(f"<Delimiter>{escape(delimiter)}</Delimiter>")
        if token:
            parts.append(f"<ContinuationToken>{escape(token)}</ContinuationToken>")
        if truncated and last is not None:
            parts.append(f"<NextContinuationToken>{_token(*last)}</NextContinuationToken>")
        parts += contents + prefixes + ["</ListBucketResult>"]
        return 200, {"Content-Type": "application/xml"}, "".join(parts)

    responses.S3Response.list_objects_v2 = list_objects_v2
    _installed = True
