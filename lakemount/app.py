"""The composition root: builds stores, caches, graveler and catalog from a configuration.

Nothing else in lakemount constructs a store; front ends receive an ``App``.
Each part is built, and its modules imported, on first use: a command that
never touches the ref store does not pay for SQLAlchemy, and boto3 is loaded
only when an ``s3://`` namespace is used.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from lakemount.config import Config, load

if TYPE_CHECKING:
    from lakemount.actions.network import WebhookPolicy
    from lakemount.actions.runner import HookLimits
    from lakemount.audit.log import AuditLog
    from lakemount.auth.store import SqlAuthStore
    from lakemount.block.router import RouterAdapter
    from lakemount.block.trash import TrashFallbackAdapter
    from lakemount.cache.tiered import TieredCache
    from lakemount.catalog.catalog import Catalog
    from lakemount.catalog.confinement import Confinement
    from lakemount.graveler.committed.store import CommittedStore
    from lakemount.graveler.graveler import Graveler
    from lakemount.graveler.journal import Journal
    from lakemount.graveler.ports import StagingStore
    from lakemount.metastore.actions import SqlRunStore
    from lakemount.metastore.buckets import SqlBucketStore
    from lakemount.metastore.events import SqlEventLog
    from lakemount.metastore.multipart import SqlMultipartStore
    from lakemount.metastore.pulls import SqlPullStore
    from lakemount.metastore.sql import SqlRefStore


@dataclass
class App:
    """The built parts of one lakemount process (stores, caches, graveler, catalog), each made on first use.

    Properties raise ``ConfigError``/``InvalidArgument`` for a configuration that cannot build them and
    ``Unavailable`` when a store cannot be reached.
    """

    config: Config

    def __post_init__(self) -> None:
        # Before any store opens a file there: the home is private (see lakemount/private.py).
        from lakemount.private import prepare_home

        config = self.config
        url = config.metadata.db.url
        others = (url[len("sqlite:///") :],) if url.startswith("sqlite:///") else ()
        prepare_home(config.home, (*others, config.blockstore.local.path, config.cache.dir))

    @staticmethod
    def from_config(path: str | None = None) -> App:
        """An app over ``load(path)``; raises ``ConfigError`` for a bad configuration."""
        return App(load(path))

    @cached_property
    def blockstore(self) -> RouterAdapter:
        """The block stores themselves, by URL scheme."""
        from lakemount.block import adapter_from_config

        return adapter_from_config(dataclasses.asdict(self.config.blockstore))

    @cached_property
    def adapter(self) -> TrashFallbackAdapter:
        """The block adapter every component uses: the stores, with reads that find GC's trash."""
        from lakemount.block.trash import TrashFallbackAdapter

        return TrashFallbackAdapter(self.blockstore)

    @cached_property
    def cache(self) -> TieredCache:
        from lakemount.cache.disk import DiskCache
        from lakemount.cache.ram import RamCache
        from lakemount.cache.tiered import TieredCache

        section = self.config.cache
        disk = DiskCache(section.dir, section.disk_bytes) if section.dir and section.disk_bytes > 0 else None
        return TieredCache(RamCache(section.ram_bytes), disk)

    @cached_property
    def metastore(self) -> SqlRefStore:
        """The SQL store of refs and staging, and the database every other record store shares (its engine)."""
        from lakemount.metastore.sql import SqlRefStore
        from lakemount.metastore.stamps import NodeStamps

        url = self.config.metadata.db.url
        if url.startswith("sqlite:///"):
            os.makedirs(os.path.dirname(url[len("sqlite:///") :]) or ".", exist_ok=True)
        # The processes sharing this home are one node: they see each other's branch changes at once.
        return SqlRefStore(url, stamps=NodeStamps(os.path.join(self.config.home, "node-stamps")))

    def check_metastore(self) -> str:
        """Where the metadata database is and how many repositories it holds (``lakemount doctor``).

        Opens only the database, so a block store or catalog problem does not
        hide whether it is reachable; raises ``Unavailable``, ``SchemaTooNew``.
        """
        return f"{self.metastore.where}, {len(self.metastore.list_repositories())} repositories"

    def check_block_store(self) -> str:
        """Write, read back and delete a scratch object under the system namespace (``lakemount doctor``).

        Uses only the block store; raises its errors, or ``OSError`` if the bytes read back differ.
        """
        url = f"{self.system_namespace()}/doctor/{uuid.uuid4().hex}"
        self.adapter.put(url, b"ok")
        data = self.adapter.get(url)
        self.adapter.delete(url)
        if data != b"ok":
            raise OSError("read back different bytes")
        return f"read/write {self.namespace_root()}"

    def namespace_root(self) -> str:
        """Where storage namespaces of repositories created without one go."""
        blockstore = self.config.blockstore
        if blockstore.default_namespace_prefix:
            return blockstore.default_namespace_prefix.rstrip("/")
        if blockstore.type == "s3":
            from lakemount.errors import InvalidArgument

            raise InvalidArgument("blockstore.type is s3: set blockstore.default_namespace_prefix (s3://bucket/prefix)")
        return "local://" + os.path.abspath(blockstore.local.path)

    def system_namespace(self) -> str:
        """The namespace of the server's own store: the journal of repositories ``recover`` starts from."""
        return self.namespace_root() + "/_system"

    def release_connections(self) -> None:
        """Close the pooled database connections this app holds (every store here shares one pool).

        A connection inherited by a forked process is shared by two sessions and
        corrupts both: the server supervisors call this before they fork their
        workers (each worker builds its own ``App``), and a process calls it when
        done with an app.  The app stays usable: a new pool opens on the next
        query.  Does nothing if the database was never opened.
        """
        if "metastore" in self.__dict__:
            self.metastore.engine.dispose()

    def start(self) -> None:
        """Start what a long-running process of this app (a server's worker, a mount) runs beside its requests: the
        audit log's flusher, which counts at once the trail a killed process of this host left unwritten (STYLE 8:
        no thread starts in a constructor; the front ends' handlers start nothing).  Idempotent; :meth:`close` stops
        it.  A short-lived process (a CLI verb) does not call it: its records go to a spool file, no thread.
        Raises ``ConfigError`` for a bad ``audit.*`` setting."""
        audit = self.audit
        if audit is not None:
            audit.start()

    def close(self) -> None:
        """Done with this app: flush and stop its audit log, close its database connections.

        A process with one app needs not call it (its audit log flushes at exit);
        a process that builds many (tests, tools) calls it so threads and pooled
        connections do not outlive their app.  Reading the app again reopens what it needs.
        """
        audit = self.__dict__.get("audit")
        if audit is not None:
            audit.close()
        self.release_connections()

    @cached_property
    def journal(self) -> Journal:
        from lakemount.graveler.journal import Journal

        return Journal(self.adapter, self.system_namespace())

    @cached_property
    def confinement(self) -> Confinement:
        """Where imports may read and ``local://`` namespaces may lie (``blockstore.local.*_roots``).

        Unset roots are the local block store's directory (and, for namespaces, a
        ``local://`` default namespace prefix too, where repositories created
        without a namespace go).  Raises ``ConfigError`` for a root that is not
        an absolute path.
        """
        from lakemount.catalog.confinement import Confinement
        from lakemount.errors import ConfigError

        blockstore = self.config.blockstore
        data = os.path.abspath(blockstore.local.path)
        prefix = blockstore.default_namespace_prefix
        default_ns = (data, prefix[len("local://") :]) if prefix.startswith("local://") else (data,)

        def roots(name: str, given: tuple[str, ...] | None, default: tuple[str, ...]) -> tuple[str, ...]:
            if given is None:
                return default
            found = tuple(os.path.expanduser(r) for r in given)
            for root in found:
                if not os.path.isabs(root):
                    key = f"blockstore.local.{name}"
                    raise ConfigError(f"{key}: {root!r} is not an absolute path", key, "configuration")
            return found

        local = blockstore.local
        return Confinement(
            roots("import_roots", local.import_roots, (data,)),
            roots("namespace_roots", local.namespace_roots, default_ns),
            self.system_namespace(),
        )

    @cached_property
    def committed(self) -> CommittedStore:
        from lakemount.graveler.committed.store import CommittedStore

        return CommittedStore(self.adapter, self.cache)

    @cached_property
    def graveler(self) -> Graveler:
        from lakemount.graveler.graveler import Graveler

        return Graveler(self.metastore, self.committed, self.journal, staging=self.staging)

    @cached_property
    def staging(self) -> StagingStore:
        """Where uncommitted entries live (``staging.backend``): rows beside the ref store's (``SqlStaging``), or staging files (docs/DESIGN.md §4)."""
        from lakemount.errors import ConfigError

        section = self.config.staging
        if section.backend == "sql":
            from lakemount.metastore.sql_staging import SqlStaging

            return SqlStaging(self.metastore)
        if section.backend != "lsm":
            raise ConfigError(f"staging.backend: expected sql or lsm, got {section.backend!r}", "staging.backend", "configuration")
        from lakemount.graveler.staging.lsm import LsmStaging
        from lakemount.metastore.staging_lists import SqlStagingLists

        refs = self.metastore
        return LsmStaging(
            SqlStagingLists(refs), self.adapter, self.cache, lambda repo: refs.get_repository(repo).storage_namespace,
            flush_ms=section.flush_ms, l1_max=section.l1_max, inline_bytes=section.inline_bytes,
        )

    @cached_property
    def catalog(self) -> Catalog:
        from lakemount.catalog.catalog import Catalog

        tmp = os.path.join(self.config.home, "tmp")
        os.makedirs(tmp, exist_ok=True)
        return Catalog(
            self.graveler, self.adapter, namespace_root=self.namespace_root(), confinement=self.confinement, tmpdir=tmp,
            runs=self._run_store, pulls=self._pull_store, events=self._event_log, link_key=lambda: self.link_key,
            webhooks=lambda: self.webhook_policy, hook_limits=lambda: self.hook_limits,
            max_comments=self.config.pulls.max_comments,
            changes=self.metastore,
            cache=self.cache,
            observer=self.audit.versioning if self.audit is not None else None,
        )

    @cached_property
    def audit(self) -> AuditLog | None:
        """This process's audit log (``audit.*``), None when ``audit.enabled`` is false; raises ``ConfigError``."""
        from lakemount.errors import ConfigError

        section = self.config.audit
        if not section.enabled:
            return None
        if not section.flush_s > 0:
            raise ConfigError("audit.flush_s: must be positive", "audit.flush_s", "configuration")
        if section.flush_records < 1:
            raise ConfigError("audit.flush_records: must be at least 1", "audit.flush_records", "configuration")
        from lakemount.audit.log import AuditLog

        return AuditLog(self.adapter, lambda repo: self.catalog.repository(repo).storage_namespace,
                        home=self.config.home, flush_s=section.flush_s, flush_records=section.flush_records,
                        retention_days=section.retention_days)

    @cached_property
    def webhook_policy(self) -> WebhookPolicy:
        """The addresses webhooks may reach and their longest timeout (``actions.webhook.*``); raises ``ConfigError`` for a bad value."""
        from lakemount.actions.network import WebhookPolicy, parse_networks
        from lakemount.errors import ConfigError

        section = self.config.actions.webhook
        networks = []
        for name in ("allowed_networks", "denied_networks"):
            try:
                networks.append(parse_networks(getattr(section, name)))
            except ValueError as exc:
                raise ConfigError(f"actions.webhook.{name}: {exc}", f"actions.webhook.{name}", "configuration") from None
        if not section.max_timeout > 0:
            raise ConfigError("actions.webhook.max_timeout: must be positive", "actions.webhook.max_timeout", "configuration")
        allowed, denied = networks
        return WebhookPolicy(allowed, denied, section.max_timeout)

    @cached_property
    def hook_limits(self) -> HookLimits:
        """How many hooks this process runs at once and how long one waits (``actions.hooks.*``), and the
        most action files an event reads (``actions.max_files``); raises ``ConfigError``."""
        from lakemount.actions.runner import HookLimits
        from lakemount.errors import ConfigError

        section = self.config.actions.hooks
        if section.max_running < 1:
            raise ConfigError("actions.hooks.max_running: must be at least 1", "actions.hooks.max_running", "configuration")
        if section.max_wait < 0:
            raise ConfigError("actions.hooks.max_wait: must not be negative", "actions.hooks.max_wait", "configuration")
        if self.config.actions.max_files < 1:
            raise ConfigError("actions.max_files: must be at least 1", "actions.max_files", "configuration")
        return HookLimits(section.max_running, section.max_wait, self.config.actions.max_files)

    @cached_property
    def link_key(self) -> bytes:
        """The key that signs upload addresses (``catalog/uploads.py``), derived from the server key."""
        from lakemount.auth.crypto import read_key_file
        from lakemount.catalog.uploads import link_key

        return link_key(self.config.auth.encrypt.secret_key or read_key_file(os.path.join(self.config.home, "server.key")))

    def _run_store(self) -> SqlRunStore:
        from lakemount.metastore.actions import SqlRunStore

        return SqlRunStore(self.metastore.engine)

    def _event_log(self) -> SqlEventLog:
        from lakemount.metastore.events import SqlEventLog

        return SqlEventLog(self.metastore)

    def _pull_store(self) -> SqlPullStore:
        from lakemount.metastore.pulls import SqlPullStore

        return SqlPullStore(self.metastore.engine)

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

        key = self.config.auth.encrypt.secret_key or read_key_file(os.path.join(self.config.home, "server.key"))
        return SqlAuthStore(self.metastore.engine, key)

    @cached_property
    def bucket_store(self) -> SqlBucketStore:
        """The S3 gateway's bucket records, in the ref store's database (table created if missing)."""
        from lakemount.metastore.buckets import SqlBucketStore

        return SqlBucketStore(self.metastore.engine)

    @cached_property
    def multipart_store(self) -> SqlMultipartStore:
        """The S3 gateway's multipart uploads, in the ref store's database (tables created if missing)."""
        from lakemount.metastore.multipart import SqlMultipartStore

        return SqlMultipartStore(self.metastore.engine)
