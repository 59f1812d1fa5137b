"""What jobs that read the stores directly need: a commit's ranges, tables from the block store, every commit and
staged record, recovery.

Export and garbage collection read every table of a commit once, in Spark
executors, so they skip the committed store's caches: :meth:`StorageVerbs.ranges`
lists a commit's ranges (lakeFS's ``GetMetaRange``), :meth:`StorageVerbs.all_commits`
and :meth:`StorageVerbs.staged_records` what GC must see besides the heads and tags, and :func:`read_table`
fetches one from the block store, verifies the xxh3-128 checksum its parent
recorded and parses it.  :func:`value_address` reads the one field GC needs of
a record (a 16-byte identity, a version byte, then a msgpack array whose first
element is the address) without decoding the rest.  :func:`join` is the one
way a key becomes a URL under a storage namespace.  :meth:`StorageVerbs.recover`
rebuilds a lost ref store from the block store alone.  The helpers are cheap to
import (the jobs' executors and the GC rules use them without the versioned
core's machinery).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import xxhash

from lakemount.errors import ChecksumMismatch, Corrupt, ObjectNotFound
from lakemount.graveler.committed.store import join, table_url
from lakemount.graveler.model import (
    EMPTY_METARANGE,
    ENTRY_VERSION,
    IDENTITY_LEN,
    Commit,
    RangeInfo,
    StagingToken,
    decode_value,
    has_moves,
)
from lakemount.graveler.ports import BlockAdapter
from lakemount.graveler.sstable import TableReader

if TYPE_CHECKING:
    from lakemount.graveler.graveler import Graveler
    from lakemount.graveler.recover import Progress, RecoverReport

__all__ = ["RangeInfo", "StorageVerbs", "TableReader", "join", "metarange_ranges", "read_table", "value_address"]


def read_table(adapter: BlockAdapter, namespace: str, table_id: str, checksum: str, what: str = "table") -> TableReader:
    """A verified reader of one table; ``Corrupt`` if it is missing or damaged."""
    try:
        data = adapter.get(table_url(namespace, table_id))
    except ObjectNotFound as exc:
        raise Corrupt(f"missing {what} {table_id} in {namespace}: the repository's metadata is damaged") from exc
    if checksum and xxhash.xxh3_128_hexdigest(data) != checksum:
        raise ChecksumMismatch(f"{what} {table_id} in {namespace}")
    return TableReader(data, name=f"{what} {table_id}")


def metarange_ranges(adapter: BlockAdapter, namespace: str, metarange_id: str, checksum: str) -> list[RangeInfo]:
    """The ranges a metarange lists (none for the empty metarange)."""
    if metarange_id == EMPTY_METARANGE:
        return []
    reader = read_table(adapter, namespace, metarange_id, checksum, "metarange")
    return [RangeInfo.decode(k, v) for k, v in reader.items()]


def value_address(value: bytes) -> str:
    """The physical address stored in a record value, without decoding the rest."""
    i = IDENTITY_LEN
    if len(value) > i + 3 and value[i] == ENTRY_VERSION and value[i + 1] in (0x9A, 0x9B):  # ten fields, or eleven with a hard-link group
        h = value[i + 2]
        start = i + 3
        if 0xA0 <= h <= 0xBF:
            n = h & 0x1F
        elif h == 0xD9:
            n, start = value[start], start + 1
        elif h == 0xDA:
            n, start = int.from_bytes(value[start : start + 2], "big"), start + 2
        else:
            return decode_value(value).address
        return value[start : start + n].decode("utf-8")
    return decode_value(value).address


class StorageVerbs:
    """A commit's tables, every commit and staged record, and the ref store's recovery (part of ``Catalog``)."""

    graveler: Graveler

    def ranges(self, repo: str, ref: str, *, start: bytes = b"", stop: bytes | None = None) -> list[RangeInfo]:
        """The ranges of the commit ``ref`` points at that may hold keys in [start, stop), in key order.

        Reads (and verifies) the commit's metarange; raises ``RefNotFound``...,
        ``Corrupt`` if the metarange is missing or damaged.
        """
        g = self.graveler
        mr = g.metarange_of(g.get_repository(repo), g.commit_of(repo, ref))
        return [info for info in mr.ranges if info.max_key >= start and (stop is None or info.min_key < stop)]

    def all_commits(self, repo: str) -> Iterator[Commit]:
        """Every commit of ``repo``, reachable from a ref or not, in no particular order (GC decides which to keep)."""
        return iter(self.graveler.refs.list_commits(repo))

    def staged_records(self, token: StagingToken) -> Iterator[tuple[bytes, bytes | None]]:
        """Every record staged under ``token`` (key, value or ``None`` for a tombstone), in key order; a move
        record (a directory rename, ``graveler/moves.py``) stages none: it points at committed data only."""
        if has_moves((token,)):
            return iter(())
        return self.graveler.staging.staged_scan(token)

    def recover(self, *, force: bool = False, progress: Progress | None = None) -> RecoverReport:
        """Rebuild repositories, branches, tags and commits from the journal in the block store.

        The ref store must hold no repositories (``PreconditionFailed``) unless
        ``force``; raises ``Corrupt`` for an unreadable commit object.
        """
        from lakemount.graveler.recover import recover

        return recover(self.graveler.journal, self.graveler.refs, force=force, progress=progress)
