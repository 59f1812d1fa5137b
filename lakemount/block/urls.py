"""Block-store URLs: splitting off the scheme that picks a backend, joining keys.

Every address a block adapter sees is an absolute URL ``scheme://rest``.  The
URL is used verbatim, without percent-decoding, so that the URL an adapter's
``list`` yields is byte-for-byte the URL that was written and can be fed back
to ``get``.
"""

from __future__ import annotations

from lakemount.errors import InvalidArgument

_SEP = "://"


def split_url(url: str) -> tuple[str, str]:
    """Return ``(scheme, rest)`` of ``scheme://rest``; the scheme is lower-cased.

    Raises ``InvalidArgument`` when the URL has no scheme.
    """
    scheme, sep, rest = url.partition(_SEP)
    if not sep or not scheme or not scheme.replace("+", "").replace("-", "").replace(".", "").isalnum():
        raise InvalidArgument(f"not a block-store URL (expected scheme://...): {url!r}")
    return scheme.lower(), rest


def scheme_of(url: str) -> str:
    """Return the lower-cased scheme of ``url``; raise ``InvalidArgument`` if it has none."""
    return split_url(url)[0]


def join_url(namespace_url: str, key: str) -> str:
    """Append ``key`` to a storage namespace URL with exactly one ``/`` between them.

    ``join_url("s3://bucket/repo", "data/ab/cd")`` and
    ``join_url("s3://bucket/repo/", "data/ab/cd")`` both give
    ``s3://bucket/repo/data/ab/cd``.  Raises ``InvalidArgument`` for a namespace
    without a scheme or an empty or absolute key (a leading ``/`` would silently
    create an empty path segment, which local and S3 stores treat differently).
    """
    split_url(namespace_url)
    if not key or key.startswith("/"):
        raise InvalidArgument(f"block key must be non-empty and relative: {key!r}")
    if namespace_url.endswith("/"):
        return namespace_url + key
    return f"{namespace_url}/{key}"
