"""GC's moves on one object (``lakemount.block.gcmoves``) on the memory and local stores, without Spark."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from lakemount.block.gcmoves import purge, restore, trash
from lakemount.block.local import LocalAdapter
from lakemount.block.memory import MemoryAdapter
from lakemount.block.router import RouterAdapter
from lakemount.block.trash import TrashFallbackAdapter, trash_key
from lakemount.errors import InvalidArgument, ObjectNotFound
from lakemount.graveler.ports import BlockAdapter, ObjectInfo

PAYLOAD = b"bytes GC thinks nobody needs"
SHA = hashlib.sha256(PAYLOAD).hexdigest()
KEY = f"data/{SHA[:2]}/{SHA}"
LONG_AGO = time.time() - 10_000


@pytest.fixture(params=["memory", "local"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[TrashFallbackAdapter, str]:
    """The adapter GC's executors use (the fallback over the stores) and a namespace on one store."""
    router = RouterAdapter({"mem": MemoryAdapter(), "local": LocalAdapter()})
    ns = "mem://lake/ns" if request.param == "memory" else f"local://{tmp_path}/ns"
    return TrashFallbackAdapter(router), ns


def _old_object(adapter: BlockAdapter, ns: str) -> None:
    adapter.put(f"{ns}/{KEY}", PAYLOAD)
    if ns.startswith("local://"):
        path = LocalAdapter.path_of(f"{ns}/{KEY}")
        os.utime(path, (LONG_AGO, LONG_AGO))


def _where(adapter: TrashFallbackAdapter, ns: str) -> tuple[bool, bool]:
    return adapter.exists(f"{ns}/{KEY}"), adapter.exists(f"{ns}/{trash_key(KEY)}")


def test_trash_moves_an_old_object_and_readers_still_find_it(store: tuple[TrashFallbackAdapter, str]) -> None:
    adapter, ns = store
    _old_object(adapter, ns)
    cutoff = time.time() + 5 if ns.startswith("mem://") else LONG_AGO + 1
    assert trash(adapter, ns, KEY, cutoff, dry_run=True) == ("trashed", len(PAYLOAD))
    assert _where(adapter, ns) == (True, False)
    before = time.time() - 1
    assert trash(adapter, ns, KEY, cutoff, dry_run=False) == ("trashed", len(PAYLOAD))
    assert _where(adapter, ns) == (False, True)
    assert adapter.stat(f"{ns}/{trash_key(KEY)}").mtime >= before  # its time is the time it was trashed
    assert adapter.get(f"{ns}/{KEY}") == PAYLOAD
    assert trash(adapter, ns, KEY, cutoff, dry_run=False) == ("already_gone", 0)


def test_trash_keeps_what_was_touched_since_the_cutoff(store: tuple[TrashFallbackAdapter, str]) -> None:
    adapter, ns = store
    _old_object(adapter, ns)
    adapter.touch(f"{ns}/{KEY}")
    assert trash(adapter, ns, KEY, time.time() - 5, dry_run=False) == ("touched", 0)
    assert _where(adapter, ns) == (True, False)


def test_trash_refuses_keys_gc_does_not_own(store: tuple[TrashFallbackAdapter, str]) -> None:
    adapter, ns = store
    adapter.put(f"{ns}/_lakefs/gc/rules.json", b"{}")
    with pytest.raises(InvalidArgument):
        trash(adapter, ns, "_lakefs/gc/rules.json", time.time() + 5, dry_run=False)
    assert adapter.exists(f"{ns}/_lakefs/gc/rules.json")


def test_restore_puts_it_back_or_drops_a_redundant_copy(store: tuple[TrashFallbackAdapter, str]) -> None:
    adapter, ns = store
    _old_object(adapter, ns)
    trash(adapter, ns, KEY, time.time() + 5, dry_run=False)
    assert restore(adapter, ns, KEY, dry_run=True) == ("restored", len(PAYLOAD))
    assert _where(adapter, ns) == (False, True)
    assert restore(adapter, ns, KEY, dry_run=False) == ("restored", len(PAYLOAD))
    assert _where(adapter, ns) == (True, False)
    assert adapter.get(f"{ns}/{KEY}") == PAYLOAD
    assert restore(adapter, ns, KEY, dry_run=False) == ("already_gone", 0)
    # Trashed, then uploaded again by a writer whose touch found nothing: the trash copy just goes.
    trash(adapter, ns, KEY, time.time() + 5, dry_run=False)
    adapter.put(f"{ns}/{KEY}", PAYLOAD)
    assert restore(adapter, ns, KEY, dry_run=False) == ("restored", len(PAYLOAD))
    assert _where(adapter, ns) == (True, False)


def test_purge_deletes_only_what_was_trashed_before_the_cutoff(store: tuple[TrashFallbackAdapter, str]) -> None:
    adapter, ns = store
    _old_object(adapter, ns)
    trash(adapter, ns, KEY, time.time() + 5, dry_run=False)
    assert purge(adapter, ns, KEY, time.time() - 5, dry_run=False) == ("recent", 0)
    assert _where(adapter, ns) == (False, True)
    later = time.time() + 5
    assert purge(adapter, ns, KEY, later, dry_run=True) == ("purged", len(PAYLOAD))
    assert _where(adapter, ns) == (False, True)
    assert purge(adapter, ns, KEY, later, dry_run=False) == ("purged", len(PAYLOAD))
    assert _where(adapter, ns) == (False, False)
    with pytest.raises(ObjectNotFound):
        adapter.get(f"{ns}/{KEY}")
    assert purge(adapter, ns, KEY, later, dry_run=False) == ("already_gone", 0)


class AfterStat:
    """Runs ``hook`` once, right after the first ``stat`` of ``url`` returned: the window S3 leaves open."""

    def __init__(self, inner: BlockAdapter, url: str, hook: Callable[[], None]) -> None:
        self.inner, self.url, self.hook = inner, url, hook
        self.fired = False

    def stat(self, url: str) -> ObjectInfo:
        info = self.inner.stat(url)
        if url == self.url and not self.fired:
            self.fired = True
            self.hook()
        return info

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def test_a_touch_between_stat_and_move_loses_nothing() -> None:
    """On a store without rename (memory, like S3) the touch comes too late; the trash keeps the bytes readable."""
    adapter = TrashFallbackAdapter(MemoryAdapter())
    ns = "mem://lake/ns"
    url = f"{ns}/{KEY}"
    adapter.put(url, PAYLOAD)
    touched: list[bool] = []

    def writer() -> None:
        adapter.touch(url)  # the dedup check of a writer: the bytes exist, it will only stage an entry
        touched.append(True)

    hooked = AfterStat(adapter, url, writer)
    assert trash(hooked, ns, KEY, time.time() + 5, dry_run=False) == ("trashed", len(PAYLOAD))  # type: ignore[arg-type]
    assert touched == [True]
    assert adapter.get(url) == PAYLOAD  # what the writer's entry points at still reads
    assert restore(adapter, ns, KEY, dry_run=False)[0] == "restored"  # what the next run does
    assert _where(adapter, ns) == (True, False)
