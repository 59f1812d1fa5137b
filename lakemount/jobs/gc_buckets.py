"""How GC spreads a namespace over Spark tasks: ``P`` buckets of object names, by their first two hex digits.

Bucket ``b`` of ``P`` owns the prefixes ``aa`` (``00`` to ``ff``) with
``int(aa, 16) % P == b``: the data objects ``data/<aa>/<sha256>``, the tables
``_lakefs/<aa>...`` and their copies in the trash.  The driver shuffles the
referenced names into the same buckets (``by_bucket`` for what it holds, the
partitioner ``identity`` for records already keyed by bucket), so the task of
bucket ``b`` gets every reference to its names and lists its prefixes
itself: no task, and not the driver, needs the whole namespace or the whole
set of references (``lakemount.jobs.gc_tasks``).  ``P`` is between 1 and 256
and is stored with a mark, so its sweep uses the same buckets.
"""

from __future__ import annotations

from collections.abc import Iterable


def bucket_prefixes(bucket: int, buckets: int) -> list[str]:
    """The two-hex-digit name prefixes a bucket owns."""
    return [f"{i:02x}" for i in range(256) if i % buckets == bucket]


def bucket_map(buckets: int) -> dict[str, int]:
    """Each two-hex-digit prefix's bucket."""
    return {f"{i:02x}": i % buckets for i in range(256)}


def by_bucket(ids: Iterable[str], buckets: int) -> dict[int, frozenset[str]]:
    """``ids`` (names starting with two hex digits) grouped by bucket; a name without such a prefix is left out."""
    bmap = bucket_map(buckets)
    out: dict[int, set[str]] = {}
    for i in ids:
        b = bmap.get(i[:2])
        if b is not None:
            out.setdefault(b, set()).add(i)
    return {b: frozenset(s) for b, s in out.items()}


def identity(bucket: int) -> int:
    """The partitioner of the shuffles: a record's key is its bucket already, and bucket ``b`` is partition ``b``."""
    return bucket
