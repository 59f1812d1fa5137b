"""The composition root: builds stores, caches, graveler and catalog from a configuration.

Nothing else in lakemount constructs a store; front ends receive an ``App``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from lakemount.block import adapter_from_config
from lakemount.block.router import RouterAdapter
from lakemount.block.trash import TrashFallbackAdapter
from lakemount.cache.disk import DiskCache
from lakemount.cache.ram import RamCache
from lakemount.cache.tiered import TieredCache
from lakemount.catalog.catalog import Catalog
from lakemount.config import Config, load
from lakemount.graveler.committed.store import CommittedStore
from lakemount.graveler.graveler import Graveler
from lakemount.graveler.journal import Journal
from lakemount.refs.sql import SqlRefStore

if TYPE_CHECKING:
    from lakemount.auth.store import SqlAuthStore
    from lakemount.refs.buckets import SqlBucketStore
    from lakemount.refs.multipart import SqlMultipartStore


@dataclass
class App:
    config: Config

    @staticmethod
    def from_config(path: str | None = None) -> App:
        return App(load(path))

    @cached_property
    def blockstore(self) -> RouterAdapter:
        """The block stores themselves, by URL scheme."""
        return adapter_from_config(self.config.get("blockstore"))

    @cached_property
    def adapter(self) -> TrashFallbackAdapter:
        """The block adapter every component uses: the stores, with reads that find GC's trash."""
        return TrashFallbackAdapter(self.blockstore)

    @cached_property
    def cache(self) -> TieredCache:
        disk_dir = self.config.get("cache.dir")
        disk_bytes = int(self.config.get("cache.disk_bytes"))
        disk = DiskCache(disk_dir, disk_bytes) if disk_dir and disk_bytes > 0 else None
        return TieredCache(RamCache(int(self.config.get("cache.ram_bytes"))), disk)

    @cached_property
    def refs(self) -> SqlRefStore:
        url = self.config.get("metadata.db.url")
        if url.startswith("sqlite:///"):
            os.makedirs(os.path.dirname(url[len("sqlite:///") :]) or ".", exist_ok=True)
        return SqlRefStore(url)

    def namespace_root(self) -> str:
        """Where storage namespaces of repositories created without one go."""
        prefix = self.config.get("blockstore.default_namespace_prefix")
        if prefix:
            return str(prefix).rstrip("/")
        if self.config.get("blockstore.type") == "s3":
            from lakemount.errors import InvalidArgument

            raise InvalidArgument("blockstore.type is s3: set blockstore.default_namespace_prefix (s3://bucket/prefix)")
        return "local://" + os.path.abspath(self.config.get("blockstore.local.path"))

    @cached_property
    def journal(self) -> Journal:
        return Journal(self.adapter, self.namespace_root() + "/_system")

    @cached_property
    def committed(self) -> CommittedStore:
        tmp = os.path.join(self.config.home, "tmp")
        os.makedirs(tmp, exist_ok=True)
        return CommittedStore(self.adapter, self.cache, tmpdir=tmp)

    @cached_property
    def graveler(self) -> Graveler:
        return Graveler(self.refs, self.committed, self.journal)

    @cached_property
    def catalog(self) -> Catalog:
        tmp = os.path.join(self.config.home, "tmp")
        os.makedirs(tmp, exist_ok=True)
        return Catalog(self.graveler, self.adapter, namespace_root=self.namespace_root(), tmpdir=tmp)

    @cached_property
    def auth(self) -> SqlAuthStore:
        """Users, keys and policies in the ref store's database.

        Secrets are encrypted under ``auth.encrypt.secret_key``; when that is
        empty, under a key generated once into ``LAKEMOUNT_HOME/server.key``
        (every process sharing the stores must then share that file or set
        the key).
        """
        from lakemount.auth.crypto import read_key_file
        from lakemount.auth.store import SqlAuthStore

        key = self.config.get("auth.encrypt.secret_key") or read_key_file(os.path.join(self.config.home, "server.key"))
        return SqlAuthStore(self.refs.engine, key)

    @cached_property
    def bucket_store(self) -> SqlBucketStore:
        """The S3 gateway's bucket records, in the ref store's database (table created if missing)."""
        from lakemount.refs.buckets import SqlBucketStore

        return SqlBucketStore(self.refs.engine)

    @cached_property
    def multipart_store(self) -> SqlMultipartStore:
        """The S3 gateway's multipart uploads, in the ref store's database (tables created if missing)."""
        from lakemount.refs.multipart import SqlMultipartStore

        return SqlMultipartStore(self.refs.engine)
