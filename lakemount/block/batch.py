"""``put_many``: store a batch of small objects through any adapter, in one durable step where it can.

An adapter with a ``put_many`` of its own (``LocalAdapter``: one ``syncfs`` for
the batch; ``S3Adapter``: the batch goes to a child process, putprocess.py; the
router and the trash pass it on) stores the batch that way; any other (memory,
the failure-injecting one of the tests) gets one ``put`` per object,
``PARALLEL`` at a time (:func:`put_each`, what the write-back pipeline's upload
threads did per file before, and what the S3 child process does).  Either way
every object is whole and durable when it returns; a failure raises (the first
one met) once the puts under way are done.
``put_lazily`` passes one object on the same way (``LocalAdapter.put_lazily``: durable within a second).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from lakemount.block.pools import LazyPool
from lakemount.graveler.ports import BlockAdapter

PARALLEL: Final = 8  # puts in flight for a store that takes no batch (S3: one request each)

_puts = LazyPool(PARALLEL, "lakemount-put")


def put_lazily(adapter: BlockAdapter, url: str, data: bytes) -> None:
    """Store ``data`` at ``url`` through ``adapter``: with its ``put_lazily`` where it has one (the local store:
    whole and visible now, durable against power loss within a second or at the next sync), else a ``put``."""
    lazily = getattr(adapter, "put_lazily", None)
    if lazily is not None:
        lazily(url, data)
    else:
        adapter.put(url, data)


def put_many(adapter: BlockAdapter, items: Sequence[tuple[str, bytes]]) -> None:
    """Store each ``(url, data)`` of ``items`` through ``adapter``."""
    batch = getattr(adapter, "put_many", None)
    if batch is not None:
        batch(items)
        return
    put_each(adapter, items)


def put_each(adapter: BlockAdapter, items: Sequence[tuple[str, bytes]]) -> None:
    """Store each ``(url, data)`` of ``items`` with one ``put`` each, ``PARALLEL`` at a time; raises the first
    failure once the puts under way are done."""
    if len(items) == 1:
        adapter.put(*items[0])
        return
    futures = [_puts.get().submit(adapter.put, url, data) for url, data in items]
    errors = [f.exception() for f in futures]  # waits for every put, so none is still writing when this raises
    first = next((e for e in errors if e is not None), None)
    if first is not None:
        raise first
