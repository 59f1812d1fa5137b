"""Helpers for the graveler tests: a deterministic clock, entries from short strings, a Graveler builder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lakemount.block import MemoryAdapter
from lakemount.cache.ram import RamCache
from lakemount.graveler.committed.store import CommittedStore
from lakemount.graveler.graveler import Graveler
from lakemount.graveler.journal import Journal
from lakemount.graveler.model import Entry, decode_value
from lakemount.graveler.ports import BlockAdapter, StagingStore
from lakemount.graveler.staging.lsm import LsmStaging
from lakemount.metastore.sql import SqlRefStore
from lakemount.metastore.sql_staging import SqlStaging
from lakemount.metastore.staging_lists import SqlStagingLists


class TickClock:
    """A deterministic clock: every call returns one second later than the last."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def val(content: str, **fields: object) -> bytes:
    """The stored value of an entry whose content is ``content`` (equal strings, equal values)."""
    return Entry(f"data/{content}", len(content), etag=content, **fields).value()  # type: ignore[arg-type]


def content(value: bytes | None) -> str | None:
    """Inverse of :func:`val`."""
    return None if value is None else decode_value(value).etag


STAGING_BACKENDS = ("sql", "lsm")


def make_staging(refs: SqlRefStore, adapter: BlockAdapter, backend: str, **kw: Any) -> StagingStore:
    """The staging backend ``backend`` ("sql": rows in the ref store's database; "lsm": staging files) over ``refs``
    and ``adapter``."""
    if backend == "sql":
        return SqlStaging(refs)
    assert backend == "lsm", backend
    return LsmStaging(
        SqlStagingLists(refs), adapter, RamCache(1 << 26), lambda repo: refs.get_repository(repo).storage_namespace, **kw
    )


def build_graveler(
    db_path: Path | str,
    adapter: BlockAdapter | None = None,
    *,
    system_ns: str = "mem://system",
    cache_bytes: int = 1 << 26,
    staging: str = "sql",
    **staging_kw: Any,
) -> Graveler:
    """A Graveler on a SQLite ref store at ``db_path`` and ``adapter`` (a fresh MemoryAdapter by default),
    staging with backend ``staging``."""
    adapter = adapter if adapter is not None else MemoryAdapter()
    refs = SqlRefStore(f"sqlite:///{db_path}")
    return Graveler(
        refs,
        CommittedStore(adapter, RamCache(cache_bytes)),
        Journal(adapter, system_ns),
        staging=make_staging(refs, adapter, staging, **staging_kw),
        clock=TickClock(),
    )


def fresh_view(g: Graveler, adapter: BlockAdapter | None = None) -> Graveler:
    """Another Graveler on the same ref store and block store with empty caches (what a new process sees)."""
    adapter = adapter if adapter is not None else g.committed.adapter
    backend = "lsm" if isinstance(g.staging, LsmStaging) else "sql"
    assert isinstance(g.refs, SqlRefStore)
    return Graveler(
        g.refs, CommittedStore(adapter, RamCache(1 << 26)), Journal(adapter, g.journal.system_namespace),
        staging=make_staging(g.refs, adapter, backend), clock=g.clock,
    )
