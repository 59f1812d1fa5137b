"""Object listings in S3 order for any bucket target, shared by the listing operations.

A flat target lists one ref.  A repository bucket has keys ``<ref>/<path>``: a
prefix that names a ref (``main/data/``) lists that ref; a shorter prefix walks
the branches in key order (``name/``, so ``a-b/`` sorts before ``a/``), and with
delimiter ``/`` each branch is one common prefix, which is how ``aws s3 ls
s3://repo/`` shows branches.  The catalog does the per-ref work, including
jumping over a common prefix instead of reading every key under it.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Final

from lakemount.audit.context import note
from lakemount.catalog.catalog import Catalog
from lakemount.catalog.model import Entry
from lakemount.errors import InvalidArgument, NotFound
from lakemount.gateway.buckets import Target
from lakemount.gateway.errors import s3_error
from lakemount.gateway.kept import KeptReads

MAX_KEYS: Final = 1000

Item = tuple[str, Entry | None]  # (key, entry) or (common prefix, None)


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a listing: its items, and whether more follow (``last`` is the marker for the next page)."""

    items: list[Item]
    truncated: bool

    @property
    def last(self) -> str | None:
        return self.items[-1][0] if self.items else None


def parse_max(value: str | None, name: str = "max-keys", cap: int = MAX_KEYS) -> int:
    """A max-keys style parameter: default and cap 1000; raises InvalidArgument."""
    if value is None or value == "":
        return cap
    text = value.strip()
    if not text.lstrip("-").isdigit():
        raise s3_error("InvalidArgument", f"Provided {name} not an integer or within integer range", ArgumentName=name, ArgumentValue=value)
    n = int(text)
    if n < 0:
        raise s3_error("InvalidArgument", f"Argument {name} must be an integer between 0 and 2147483647", ArgumentName=name, ArgumentValue=value)
    return min(n, cap)


def encode_token(key: str) -> str:
    """A continuation token for resuming a listing after ``key`` (URL-safe base64, opaque to clients)."""
    return base64.urlsafe_b64encode(key.encode("utf-8", "surrogateescape")).decode()


def decode_token(token: str) -> str:
    """The key a continuation token resumes after; raises ``S3Error`` InvalidArgument for a malformed token."""
    try:
        return base64.urlsafe_b64decode(token.encode()).decode("utf-8", "surrogateescape")
    except (binascii.Error, ValueError):
        raise s3_error("InvalidArgument", "The continuation token provided is incorrect", ArgumentName="continuation-token") from None


def list_page(
    catalog: Catalog, target: Target, prefix: str, delimiter: str, after: str, max_keys: int, *, kept: KeptReads | None = None
) -> Page:
    """Up to ``max_keys`` items after ``after``, and whether more follow.

    ``kept``: what GETs keep, whose lookups of every branch listed are dropped once
    the listing has read it: a GET after a listing never shows an object older than it.
    """
    if max_keys <= 0:
        return Page([], False)
    listed: set[str] = set()
    items = list(islice(iterate(catalog, target, prefix, delimiter, after, max_keys + 1, listed), max_keys + 1))
    if kept is not None:
        for branch in listed:
            kept.drop_branch(target.repo.name, branch)
    return Page(items[:max_keys], len(items) > max_keys)


def iterate(
    catalog: Catalog, target: Target, prefix: str, delimiter: str, after: str, limit: int, listed: set[str] | None = None
) -> Iterator[Item]:
    """Every item of the listing after ``after``, in key order; ``listed`` gets the branches read."""
    repo = target.repo.name
    if target.ref is not None:
        yield from _ref_items(catalog, repo, target.ref, "", prefix, delimiter, after, limit, listed)
        return
    if "/" in prefix:
        ref, _, path_prefix = prefix.partition("/")
        yield from _ref_items(catalog, repo, ref, ref + "/", path_prefix, delimiter, after, limit, listed)
        return
    heads = sorted(b.name + "/" for b in catalog.list_branches(repo) if b.name.startswith(prefix))
    last_prefix = None
    for head in heads:
        if delimiter:
            i = head.find(delimiter, len(prefix))
            if i >= 0:
                common = head[: i + len(delimiter)]
                if common != last_prefix and common > after:
                    last_prefix = common
                    yield common, None
                continue
        yield from _ref_items(catalog, repo, head[:-1], head, "", delimiter, after, limit, listed)


def _ref_items(
    catalog: Catalog, repo: str, ref: str, head: str, path_prefix: str, delimiter: str, after: str, limit: int,
    listed: set[str] | None,
) -> Iterator[Item]:
    """Items of one ref, keys being ``head + path``."""
    if after.startswith(head):
        path_after = after[len(head) :]
    elif after < head:
        path_after = ""
    else:
        return  # every key of this ref sorts before ``after``
    try:
        resolved = catalog.resolve(repo, ref)
    except (NotFound, InvalidArgument):
        return  # a prefix naming no ref lists nothing
    note(ref=ref, commit=resolved.commit_id)
    if listed is not None and resolved.branch is not None:
        listed.add(resolved.branch)
    for item in catalog.list(repo, resolved, path_prefix, delimiter=delimiter, after=path_after, limit=limit):
        yield head + item.path, item.entry
