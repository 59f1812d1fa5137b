"""Buckets: which repository and ref an S3 bucket name stands for.

By default a bucket is a repository and a key is ``<ref>/<path>``; listing the
bucket root with delimiter ``/`` shows the branches.  A *flat* bucket instead
stands for one ref, and its keys are paths on it:

- configured aliases (``gateways.s3.aliases``: ``bucket: repo/ref``);
- in flat mode (``gateways.s3.flat``) every repository, on its default branch;
- buckets created through the gateway whose name is no valid repository name
  (S3 allows ``.``): their repository gets a derived name, which the
  ``BucketStore`` (``lm_gw_buckets`` on the ref store's database) remembers.

The same store keeps the canned ACL a bucket was created with
(``public-read`` and ``public-read-write`` admit anonymous requests; the
default ``private`` admits none).  A gateway process keeps what it read of
the store (a record, or that there is none) for ``RECORD_TTL`` seconds, as it
keeps access decisions: every request names a bucket, and most buckets have
no record, so asking the database each time would cost a statement per GET.
A bucket created or deleted through another gateway process shows within it.

Reads of objects (GET, HEAD) also use the repository's own record as this
process keeps it while change notices can drop it (``kept.py``); without
notices (SQLite) or while the listener is disconnected every request reads
the record, as writes always do (a write through a deleted repository's
namespace would be lost).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Final

from lakemount.auth.cache import TtlCache
from lakemount.catalog.catalog import Catalog
from lakemount.catalog.model import Repository
from lakemount.catalog.names import is_repository_name
from lakemount.catalog.s3state import BucketRecord, BucketStore
from lakemount.errors import NotFound
from lakemount.gateway.errors import S3Error, s3_error
from lakemount.gateway.kept import KeptReads
from lakemount.gateway.settings import GatewaySettings

CANNED_ACLS: Final = ("private", "public-read", "public-read-write", "authenticated-read")
_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_IPV4 = re.compile(r"^\d+\.\d+\.\d+\.\d+$")
RECORD_TTL: Final = 5.0  # seconds a bucket record (or its absence) read from the store is trusted


@dataclass(frozen=True, slots=True)
class Target:
    """What a bucket stands for: a repository, and either one ref or ``<ref>/`` keys."""

    bucket: str
    repo: Repository
    ref: str | None  # None: the first key segment names the ref
    acl: str = "private"

    @property
    def flat(self) -> bool:
        return self.ref is not None

    def split(self, key: str) -> tuple[str, str]:
        """(ref, path) of an S3 key; the path is empty for ``<ref>`` alone."""
        if self.ref is not None:
            return self.ref, key
        ref, _, path = key.partition("/")
        return ref, path


def valid_bucket_name(name: str) -> bool:
    """S3's rules for new bucket names (3-63 of ``a-z0-9.-``, no ``..``, not an IP address)."""
    return bool(_BUCKET_NAME.match(name)) and ".." not in name and not _IPV4.match(name)


def repo_name_for(bucket: str) -> str:
    """The repository a new bucket gets: its own name when valid, else a derived one."""
    if is_repository_name(bucket):
        return bucket
    digest = hashlib.sha256(bucket.encode()).hexdigest()[:10]
    base = re.sub(r"[^a-z0-9-]", "-", bucket.lower())[:52].strip("-") or "bucket"
    return f"{base}-{digest}"


class BucketMap:
    """Resolves bucket names; records gateway-created buckets that need it (in a ``BucketStore``)."""

    def __init__(self, store: BucketStore, catalog: Catalog, settings: GatewaySettings, *, ttl: float | None = None) -> None:
        self.store = store
        self.catalog = catalog
        self.settings = settings
        self._records = TtlCache(RECORD_TTL if ttl is None else ttl)  # bucket -> (record or None,)
        self.kept = KeptReads(catalog)  # what GET and HEAD reuse (``Services.kept``), repository records among it

    def _record(self, bucket: str) -> BucketRecord | None:
        hit = self._records.get(bucket)
        if hit is None:
            hit = (self.store.get(bucket),)
            self._records.put(bucket, hit)
        return hit[0]  # type: ignore[index,no-any-return]

    def _repo(self, name: str, bucket: str, kept: bool) -> Repository:
        try:
            # A write may use the record the catalog keeps for writes: its staging checks the namespace.
            return self.kept.repository(name) if kept else self.catalog.kept_repository(name)
        except NotFound:
            raise s3_error("NoSuchBucket", BucketName=bucket) from None

    def resolve(self, bucket: str, *, read: bool = False) -> Target:
        """The target of ``bucket``; raises ``S3Error`` NoSuchBucket.

        ``read``: for a request that only reads objects, which may use a kept
        repository record (``KeptReads``); any other uses the record the catalog keeps
        for writes (``Catalog.kept_repository``).
        """
        alias = self.settings.aliases.get(bucket)
        if alias is not None:
            return Target(bucket, self._repo(alias.repo, bucket, read), alias.ref)
        record = self._record(bucket)
        if record is not None:
            repo = self._repo(record.repo, bucket, read)
            ref = record.ref or (repo.default_branch if self.settings.flat or record.repo != bucket else None)
            return Target(bucket, repo, ref, record.acl)
        repo = self._repo(bucket, bucket, read)
        return Target(bucket, repo, repo.default_branch if self.settings.flat else None)

    def exists(self, bucket: str) -> bool:
        """Whether ``bucket`` resolves to a repository."""
        try:
            self.resolve(bucket)
            return True
        except S3Error:
            return False

    def record(self, bucket: str, repo: str, *, acl: str, owner: str) -> None:
        """Remember a gateway-created bucket (its repository name and ACL)."""
        record = BucketRecord(bucket, repo, None, acl, owner)
        self.store.put(record)
        self._records.put(bucket, (record,))

    def forget(self, bucket: str) -> None:
        """Forget a bucket's record (nothing happens if it has none)."""
        self.store.delete(bucket)
        self._records.put(bucket, (None,))

    def listing(self) -> list[tuple[str, Repository]]:
        """Every bucket by name with its repository (derived-name repositories under their bucket name)."""
        repos = {r.name: r for r in self.catalog.list_repositories()}
        records = self.store.list()
        out: dict[str, Repository] = {}
        renamed = {r.repo for r in records if r.bucket != r.repo}
        for name, repo in repos.items():
            if name not in renamed:
                out[name] = repo
        for r in records:
            if r.repo in repos:
                out[r.bucket] = repos[r.repo]
        for bucket, alias in self.settings.aliases.items():
            if alias.repo in repos:
                out[bucket] = repos[alias.repo]
        return sorted(out.items())
