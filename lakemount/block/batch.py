"""``put_many``: store a batch of small objects through any adapter, in one durable step where it can.

An adapter with a ``put_many`` of its own (``LocalAdapter``: one ``syncfs`` for
the batch; the router and the trash pass it on) stores the batch that way; any
other (S3, memory, the failure-injecting one of the tests) gets one ``put``
per object, in order.  Either way every object is whole and durable when it
returns, and a failure raises with the objects before it in place.
"""

from __future__ import annotations

from collections.abc import Sequence

from lakemount.graveler.ports import BlockAdapter


def put_many(adapter: BlockAdapter, items: Sequence[tuple[str, bytes]]) -> None:
    """Store each ``(url, data)`` of ``items`` through ``adapter``."""
    batch = getattr(adapter, "put_many", None)
    if batch is not None:
        batch(items)
        return
    for url, data in items:
        adapter.put(url, data)
