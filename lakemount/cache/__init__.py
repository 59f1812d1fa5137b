"""Caches of immutable objects (ranges, metaranges, commits, data), keyed by content id.

Implementations of graveler's ``Cache``: ``RamCache`` (in-process LRU),
``DiskCache`` (checksummed files shared by the processes of a node) and
``TieredCache`` (RAM in front of disk, one load per key on a miss).  Content
never changes under a key, so nothing here ever needs invalidation.
"""

from __future__ import annotations

from lakemount.cache.disk import DiskCache
from lakemount.cache.ram import RamCache
from lakemount.cache.singleflight import SingleFlight
from lakemount.cache.tiered import TieredCache

__all__ = ["DiskCache", "RamCache", "SingleFlight", "TieredCache"]
