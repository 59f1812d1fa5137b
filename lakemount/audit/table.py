"""The audit table: Parquet files under ``<namespace>/_lakefs/audit/``, partitioned by date and hour (UTC).

Layout (Hive-style, so DuckDB, pandas, pyarrow and Spark read it as one table)::

    <namespace>/_lakefs/audit/date=YYYY-MM-DD/hour=HH/<host>-<pid>-<flush seq>.parquet

Each flush of a process writes one file per repository and hour; files are
written whole in one PUT (a reader never sees half a file) and never changed.
GC leaves the prefix alone (it only touches ``data/`` and ``_lakefs/<hex>``);
:func:`expire` removes the partitions older than the retention.  :func:`query`
reads only the partitions its time window can touch.
"""

from __future__ import annotations

import io
import re
import time
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import accumulate
from typing import Any, Final

from lakemount.audit.record import FIELDS, AuditRecord, Row, cursor
from lakemount.errors import ObjectNotFound
from lakemount.graveler.ports import BlockAdapter

PREFIX: Final = "_lakefs/audit/"
_PARTITION = re.compile(r"date=(\d{4}-\d{2}-\d{2})/hour=(\d{2})/")

_INT_FIELDS: Final = frozenset({"seq", "bytes", "status", "uid", "pid"})


def _schema() -> Any:
    import pyarrow as pa

    def kind(name: str) -> Any:
        if name == "time":
            return pa.timestamp("us", tz="UTC")
        return pa.int64() if name in _INT_FIELDS else pa.string()

    return pa.schema([(name, kind(name)) for name in FIELDS])


def root(namespace: str) -> str:
    """The audit table's root URL in a storage namespace."""
    return namespace.rstrip("/") + "/" + PREFIX


def partition(at: float) -> str:
    """``date=YYYY-MM-DD/hour=HH/`` of a time (UTC)."""
    t = datetime.fromtimestamp(at, UTC)
    return f"date={t:%Y-%m-%d}/hour={t:%H}/"


def _text(value: str) -> str:
    """``value`` as valid UTF-8 text: the undecodable bytes of a non-UTF-8 key (surrogate escapes) as ``\\xNN``."""
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _strings(values: Sequence[str]) -> Any:
    """A string column built from its buffers: one join and one encode for the usual all-ASCII column."""
    import pyarrow as pa

    try:
        joined = "".join(values)
    except TypeError:  # a caller's None (or other non-text): stored as text rather than the batch dropped
        values = ["" if v is None else str(v) for v in values]
        joined = "".join(values)
    if joined.isascii():  # one byte per character: the offsets are the lengths
        data = joined.encode("ascii")
        lengths: Iterable[int] = map(len, values)
    else:
        encoded = [_text(v).encode("utf-8") for v in values]
        data = b"".join(encoded)
        lengths = map(len, encoded)
    offsets = array("i", accumulate(lengths, initial=0))
    return pa.Array.from_buffers(pa.string(), len(values), [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _text_column(values: Sequence[str]) -> Any:
    """A string column; text that repeats (the user, repository, ref, commit, operation, process of a mount's
    records are one value per batch) as its distinct values once and an index per record.

    Copying a 64-character commit id per record, and the Parquet writer hashing it again to dictionary-encode
    it, was half of a flush's work in the mount's process; the writer stores a dictionary it is given as is.
    The file still holds a plain string column (the schema is not stored, so no reader sees a dictionary type).
    """
    import pyarrow as pa

    n = len(values)
    try:
        index = dict.fromkeys(values)  # the distinct values in order of first use (files come out the same each time)
    except TypeError:  # an unhashable caller's value: stored as its text, as _strings does
        return _strings(values)
    if not n or len(index) * 2 > n:  # mostly distinct (paths): an index would only add to the copy
        return _strings(values)
    if len(index) == 1:
        indices: Any = bytes(4 * n)  # int32 zeros, without a step per record
    else:
        index = dict(zip(index, range(len(index))))
        indices = array("i", map(index.__getitem__, values))
    return pa.DictionaryArray.from_buffers(pa.dictionary(pa.int32(), pa.string()), n, [None, pa.py_buffer(indices)],
                                           _strings(list(index)))


def _ints(values: Sequence[int]) -> array[int]:
    """An int64 column's buffer (a caller's None stored as 0 rather than the batch dropped)."""
    try:
        return array("q", values)
    except TypeError:
        return array("q", [0 if v is None else int(v) for v in values])


def _micros(seconds: Sequence[float]) -> Any:
    """Times in seconds as int64 microseconds, each ``round(t * 1_000_000)`` (half to even, as Python's ``round``
    and :func:`write`'s partitioning), computed by Arrow: one step per record in C was three (multiply, round,
    store), holding the GIL.  The factor is an array, not a scalar: making a pyarrow scalar from a Python
    number imports pandas."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(seconds)
    times = pa.Array.from_buffers(pa.float64(), n, [None, pa.py_buffer(array("d", seconds))])
    factor = pa.Array.from_buffers(pa.float64(), n, [None, pa.py_buffer(array("d", (1_000_000.0,)) * n)])
    return pc.round(pc.multiply(times, factor), round_mode="half_to_even").cast(pa.int64())


Columns = Sequence[Sequence[Any]]  # a batch as its fields' columns, in FIELDS order (the flusher's form)


def columns(rows: Sequence[Row]) -> Columns:
    """``rows`` as :data:`Columns` (one transposition in C)."""
    return list(zip(*rows, strict=True)) if rows else [() for _ in FIELDS]


def encode(rows: Sequence[Row]) -> bytes:
    """``rows`` (records as :data:`Row` tuples) as one Parquet file (:func:`encode_columns`)."""
    return encode_columns(columns(rows))


def encode_columns(cols: Columns) -> bytes:
    """A batch given as its :data:`Columns` as one Parquet file.

    Built column by column from buffers (``array``, joins, text that repeats as
    its distinct values and an index): the work per record is C code, so the
    flusher holds the GIL the request threads need only briefly (a Python loop
    per row cost ~40 us a record).  Never from Python
    lists through ``pa.array``: pyarrow imports pandas (two seconds, holding the
    GIL) the first time it converts Python objects, which a CLI verb would pay
    at exit and a server in its first flush.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = len(cols[0])
    schema = _schema()
    arrays = []
    for name, values, type_ in zip(FIELDS, cols, schema.types, strict=True):
        if name == "time":
            arrays.append(_micros(values).view(type_))
        elif name in _INT_FIELDS:
            arrays.append(pa.Array.from_buffers(type_, n, [None, pa.py_buffer(_ints(values))]))
        else:
            arrays.append(_text_column(values))
    sink = io.BytesIO()
    # store_schema=False: the Arrow schema would name the dictionaries; without it every reader takes the
    # columns' types from the Parquet schema, which is the same as before (strings, int64, a UTC timestamp).
    pq.write_table(pa.Table.from_arrays(arrays, names=list(FIELDS)), sink, compression="zstd", store_schema=False)
    return sink.getvalue()


def decode(data: bytes) -> list[AuditRecord]:
    """The records of one Parquet file written by :func:`encode`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    # One thread: a small file gains nothing from the pool, and a CLI exiting while pool threads
    # wind down aborted (std::terminate) now and then.
    table = pq.read_table(io.BytesIO(data), columns=list(FIELDS), use_threads=False)
    cols = {name: table.column(name).to_pylist() for name in FIELDS if name != "time"}
    cols["time"] = [us / 1_000_000 for us in table.column("time").cast(pa.int64()).to_pylist()]
    return [AuditRecord(**{name: cols[name][i] for name in FIELDS}) for i in range(table.num_rows)]


def write(adapter: BlockAdapter, namespace: str, name: str, rows: Sequence[Row]) -> list[str]:
    """Store ``rows`` (one repository's records) as one file ``name`` per hour they fall in (:func:`write_columns`)."""
    return write_columns(adapter, namespace, name, columns(rows))


def write_columns(adapter: BlockAdapter, namespace: str, name: str, cols: Columns) -> list[str]:
    """Store one repository's records, given as their :data:`Columns`, as one file ``name`` per hour they fall in;
    returns the URLs written.

    Raises what the adapter raises (the caller counts the records as dropped).
    """
    def stored_hour(t: float) -> int:
        return round(t * 1_000_000) // 3_600_000_000  # the hour of the time as stored (microseconds)

    times = cols[0]
    if not times:
        return []
    by_hour: dict[int, Columns] = {}
    if stored_hour(min(times)) == stored_hour(max(times)):  # the usual batch: no loop in Python to split it
        by_hour[stored_hour(times[0])] = cols
    else:
        rows: dict[int, list[Row]] = {}
        for r in zip(*cols, strict=True):
            rows.setdefault(stored_hour(r[0]), []).append(r)
        by_hour = {hour: columns(group) for hour, group in rows.items()}
    urls = []
    for hour, group in sorted(by_hour.items()):
        url = root(namespace) + partition(hour * 3600) + name
        adapter.put(url, encode_columns(group))
        urls.append(url)
    return urls


def _hour_of(url: str) -> datetime | None:
    m = _PARTITION.search(url)
    if m is None:
        return None
    try:
        return datetime.strptime(f"{m.group(1)} {m.group(2)}", "%Y-%m-%d %H").replace(tzinfo=UTC)
    except ValueError:
        return None


def files(adapter: BlockAdapter, namespace: str, since: float | None = None, until: float | None = None) -> list[str]:
    """The table's files whose hour overlaps [since, until], oldest hour first.

    When both ends are given, only those hours' partitions are listed (a window
    of a day lists 24 prefixes, not the whole history).
    """
    base = root(namespace)
    if since is not None and until is not None and until - since <= 7 * 24 * 3600:
        hour = datetime.fromtimestamp(since, UTC).replace(minute=0, second=0, microsecond=0)
        end = datetime.fromtimestamp(until, UTC)
        prefixes = []
        while hour <= end:
            prefixes.append(base + partition(hour.timestamp()))
            hour += timedelta(hours=1)
        listed: Iterable[Any] = (info for p in prefixes for info in adapter.list(p))
    else:
        listed = adapter.list(base)
    out = []
    for info in listed:
        if not info.url.endswith(".parquet"):
            continue
        at = _hour_of(info.url)
        if at is None:
            continue
        start = at.timestamp()
        if since is not None and start + 3600 <= since:
            continue
        if until is not None and start > until:
            continue
        out.append((start, info.url))
    return [u for _, u in sorted(out)]


@dataclass(frozen=True, slots=True)
class Filter:
    """What :func:`query` keeps: every given field must match (``path`` is a prefix, ``ops`` any of its names,
    ``ref`` the ref as asked: a branch's records, not those of a commit id that was once its head)."""

    repo: str | None = None
    ref: str | None = None
    path: str | None = None
    user: str | None = None
    since: float | None = None
    until: float | None = None
    op: str | None = None
    ops: frozenset[str] | None = None

    def keeps(self, r: AuditRecord) -> bool:
        """Whether ``r`` passes every given condition."""
        return ((self.repo is None or r.repo == self.repo)
                and (self.ref is None or r.ref == self.ref)
                and (self.path is None or r.path.startswith(self.path))
                and (self.user is None or r.user == self.user)
                and (self.op is None or r.op == self.op)
                and (self.ops is None or r.op in self.ops)
                and (self.since is None or r.time >= self.since)
                and (self.until is None or r.time <= self.until))


def order_key(r: AuditRecord) -> str:
    """The table's order: time, then the writing process, then its logical sequence (as :func:`cursor`
    spells it, so a listing's ``after`` and this order agree)."""
    return cursor(r)


def _cursor_time(after: str) -> float | None:
    """The time (seconds) a :func:`cursor` starts with, None for text that is no cursor."""
    head = after.split(".", 1)[0]
    return int(head) / 1_000_000 if len(head) == 20 and head.isdigit() else None


def query(adapter: BlockAdapter, namespace: str, where: Filter, *, newest_first: bool = False,
          after: str = "") -> Iterator[AuditRecord]:
    """The records of the table at ``namespace`` that ``where`` keeps, oldest first (``newest_first``: newest first),
    only those after the :func:`cursor` ``after`` in that order.

    Lazy, an hour's partition at a time in the order asked: the first page of the newest records reads the last
    hours only, and a page after a cursor starts at the cursor's hour.  A file removed meanwhile (retention) is
    skipped; other adapter errors propagate.
    """
    since, until = where.since, where.until
    at = _cursor_time(after) if after else None
    if at is not None:  # a microsecond either way: the cursor truncates the stored time
        if newest_first:
            until = at + 2e-6 if until is None else min(until, at + 2e-6)
        else:
            since = at - 1e-6 if since is None else max(since, at - 1e-6)
    hours: dict[str, list[str]] = {}
    for url in files(adapter, namespace, since, until):  # oldest hour first
        m = _PARTITION.search(url)
        hours.setdefault(m.group(0) if m else "", []).append(url)
    groups = list(hours.values())
    if newest_first:
        groups.reverse()
    for urls in groups:
        found: list[AuditRecord] = []
        for url in urls:
            try:
                data = adapter.get(url)
            except ObjectNotFound:
                continue
            found.extend(r for r in decode(data) if where.keeps(r))
        found.sort(key=order_key, reverse=newest_first)
        if after:
            found = [r for r in found if (cursor(r) < after if newest_first else cursor(r) > after)]
        yield from found


def expire(adapter: BlockAdapter, namespace: str, retention_days: float, now: float | None = None) -> int:
    """Delete the table's files in hours that ended more than ``retention_days`` ago; returns how many.

    ``retention_days`` <= 0 keeps everything.
    """
    if retention_days <= 0:
        return 0
    cutoff = (time.time() if now is None else now) - retention_days * 86400
    removed = 0
    for url in files(adapter, namespace):
        hour = _hour_of(url)
        if hour is not None and hour.timestamp() + 3600 <= cutoff:
            try:
                adapter.delete(url)
            except ObjectNotFound:
                pass
            removed += 1
    return removed
