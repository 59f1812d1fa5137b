"""Buckets: which repository and ref an S3 bucket name stands for.

By default a bucket is a repository and a key is ``<ref>/<path>``; listing the
bucket root with delimiter ``/`` shows the branches.  A *flat* bucket instead
stands for one ref, and its keys are paths on it:

- configured aliases (``gateways.s3.aliases``: ``bucket: repo/ref``);
- in flat mode (``gateways.s3.flat``) every repository, on its default branch;
- buckets created through the gateway whose name is no valid repository name
  (S3 allows ``.``): their repository gets a derived name, and the
  ``lm_gw_buckets`` table, on the ref store's database, remembers it.

The same table keeps the canned ACL a bucket was created with
(``public-read`` and ``public-read-write`` admit anonymous requests; the
default ``private`` admits none).
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass
from typing import Final

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from lakemount.errors import NotFound
from lakemount.gateway.errors import S3Error, s3_error
from lakemount.gateway.tables import create_tables
from lakemount.refs.fastsql import FastSql
from lakemount.gateway.settings import GatewaySettings
from lakemount.graveler.model import Repository
from lakemount.graveler.ports import RefStore

CANNED_ACLS: Final = ("private", "public-read", "public-read-write", "authenticated-read")
_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_REPO_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{2,62}$")
_IPV4 = re.compile(r"^\d+\.\d+\.\d+\.\d+$")

metadata = sa.MetaData()

buckets_t = sa.Table(
    "lm_gw_buckets",
    metadata,
    sa.Column("bucket", sa.String(255), primary_key=True),
    sa.Column("repo", sa.String(64), nullable=False, index=True),
    sa.Column("ref", sa.String(255), nullable=True),  # NULL: the mode decides (flat: default branch)
    sa.Column("acl", sa.String(32), nullable=False, default="private"),
    sa.Column("owner", sa.String(64), nullable=False, default=""),
    sa.Column("created", sa.Float, nullable=False),
)


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

    def key_of(self, ref: str, path: str) -> str:
        return path if self.ref is not None else f"{ref}/{path}"


def valid_bucket_name(name: str) -> bool:
    """S3's rules for new bucket names (3-63 of ``a-z0-9.-``, no ``..``, not an IP address)."""
    return bool(_BUCKET_NAME.match(name)) and ".." not in name and not _IPV4.match(name)


def repo_name_for(bucket: str) -> str:
    """The repository a new bucket gets: its own name when valid, else a derived one."""
    if _REPO_NAME.match(bucket):
        return bucket
    digest = hashlib.sha256(bucket.encode()).hexdigest()[:10]
    base = re.sub(r"[^a-z0-9-]", "-", bucket.lower())[:52].strip("-") or "bucket"
    return f"{base}-{digest}"


class BucketMap:
    """Resolves bucket names; records gateway-created buckets that need it."""

    def __init__(
        self, engine: sa.Engine, refs: RefStore, settings: GatewaySettings
    ) -> None:
        self.engine = engine
        self.refs = refs
        self.settings = settings
        create_tables(engine, metadata)
        self._reader = FastSql(engine)

    def _row(self, bucket: str) -> tuple[str, str | None, str] | None:
        """(repo, ref, acl) recorded for ``bucket``."""
        rows = self._reader.query("SELECT repo, ref, acl FROM lm_gw_buckets WHERE bucket = ?", (bucket,))
        return (rows[0][0], rows[0][1], rows[0][2]) if rows else None

    def _repo(self, name: str, bucket: str) -> Repository:
        try:
            repo = self.refs.get_repository(name)
        except NotFound:
            raise s3_error("NoSuchBucket", BucketName=bucket) from None
        return repo

    def resolve(self, bucket: str) -> Target:
        """The target of ``bucket``; raises ``S3Error`` NoSuchBucket."""
        alias = self.settings.aliases.get(bucket)
        if alias is not None:
            return Target(bucket, self._repo(alias.repo, bucket), alias.ref)
        row = self._row(bucket)
        if row is not None:
            repo_name, ref, acl = row
            repo = self._repo(repo_name, bucket)
            ref = ref or (repo.default_branch if self.settings.flat or repo_name != bucket else None)
            return Target(bucket, repo, ref, acl)
        repo = self._repo(bucket, bucket)
        return Target(bucket, repo, repo.default_branch if self.settings.flat else None)

    def exists(self, bucket: str) -> bool:
        try:
            self.resolve(bucket)
            return True
        except S3Error:
            return False

    def record(self, bucket: str, repo: str, *, acl: str, owner: str) -> None:
        """Remember a gateway-created bucket (its repository name and ACL)."""
        row = {"bucket": bucket, "repo": repo, "ref": None, "acl": acl, "owner": owner, "created": time.time()}
        try:
            with self.engine.begin() as conn:
                conn.execute(buckets_t.insert().values(**row))
        except IntegrityError:
            with self.engine.begin() as conn:
                conn.execute(buckets_t.update().where(buckets_t.c.bucket == bucket).values(**row))

    def forget(self, bucket: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(buckets_t.delete().where(buckets_t.c.bucket == bucket))

    def listing(self) -> list[tuple[str, Repository]]:
        """Every bucket by name with its repository (derived-name repositories under their bucket name)."""
        repos = {r.name: r for r in self.refs.list_repositories()}
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(buckets_t.c.bucket, buckets_t.c.repo)).all()
        out: dict[str, Repository] = {}
        renamed = {r.repo for r in rows if r.bucket != r.repo}
        for name, repo in repos.items():
            if name not in renamed:
                out[name] = repo
        for r in rows:
            if r.repo in repos:
                out[r.bucket] = repos[r.repo]
        for bucket, alias in self.settings.aliases.items():
            if alias.repo in repos:
                out[bucket] = repos[alias.repo]
        return sorted(out.items())
