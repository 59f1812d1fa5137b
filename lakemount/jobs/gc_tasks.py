"""GC's executor side: the functions its Spark tasks run, for the mark and for the sweep.

Everything here runs in executor processes: it is pickled with its arguments
(a ``Config``, never an ``App``: each worker opens its own with
``lakemount.jobs.runtime.app_for``) and imports only what executors need.
The driver that plans these tasks, merges their counters into the reports
and explains the protocol as a whole is ``lakemount.jobs.gc``.

**References** (the mark and the re-mark): ``read_metaranges`` turns
metaranges into their ranges; ``live_keys`` reads ranges and staging tokens
and turns each record into the name of the data object it references,
grouped by bucket (``lakemount.jobs.gc_buckets``): one record per bucket per
task, not per object, goes into the shuffle.

**Marking a bucket** (``mark_task``): the task of bucket ``b`` lists the data
objects (``data/<aa>/``) and tables (``_lakefs/<aa>...``) of its prefixes
itself and keeps as *candidates* those that nothing references and that were
last modified before ``cutoff``.  It also lists its part of the trash and
records, for each trashed object, whether something references it (the
sweep cannot recompute that).  Candidates go to
``_lakefs/gc/marks/<id>/candidates/part-<b>.tsv``, the trash to
``.../trash/part-<b>.tsv``.

**Sweeping a bucket** (``sweep_task``, ``sweep_bucket``), with the moves of
``Catalog.gc_store`` (``lakemount.catalog.gcstore``, the only way these tasks
reach the namespace's objects):

1. *restores* every trashed object the mark or the re-mark found referenced
   (moves it back to its key);
2. *purges* (really deletes) every trashed object that neither found
   referenced and that was trashed before ``cutoff``, i.e. by an earlier run
   and at least ``min_age`` before ``T``; one trashed since stays there;
3. *trashes* every candidate the re-mark did not find referenced and whose
   modification time, read again, is still older than ``cutoff`` (``touch``
   on dedup keeps re-used bytes): it moves ``data/<aa>/<sha256>`` to
   ``_lakefs/gc/trash/data/<aa>/<sha256>`` and ``_lakefs/<id>`` to
   ``_lakefs/gc/trash/tables/<id>`` (``lakemount.block.trash``).

What each did goes to ``marks/<id>/sweeps/<sweep id>/{trashed,restored,purged}/part-<b>.tsv``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

from lakemount.block.layout import collected_name, data_sha, is_data
from lakemount.catalog.gcstore import GcStore
from lakemount.catalog.model import StagingToken
from lakemount.catalog.storage import value_address
from lakemount.config import Config
from lakemount.errors import Corrupt, ObjectNotFound
from lakemount.jobs.addresses import namespace_key
from lakemount.jobs.gc_buckets import bucket_map, bucket_prefixes
from lakemount.jobs.runtime import app_for

SAMPLE: Final = 10  # keys per bucket, and per report section, shown as a sample
SWEEP_THREADS: Final = 16


def read_metaranges(config: Config, namespace: str, items: Iterable[tuple[str, str]]) -> Iterator[tuple[str, str]]:
    """(range id, checksum) of every range the given metaranges list, once per task."""
    store = app_for(config).catalog.gc_store(namespace)
    seen: set[str] = set()
    for mr_id, checksum in items:
        for info in store.metarange_ranges(mr_id, checksum):
            if info.id not in seen:
                seen.add(info.id)
                yield info.id, info.checksum


def live_keys(
    config: Config, namespace: str, buckets: int, counters: tuple[Any, Any, Any], items: Iterable[tuple[str, ...]]
) -> Iterator[tuple[int, list[str]]]:
    """Names of the data objects that ranges and staging tokens reference, grouped by bucket.

    One record per bucket per task (not per object) goes into the shuffle.
    """
    app = app_for(config)
    store = app.catalog.gc_store(namespace)
    bmap = bucket_map(buckets)
    found: dict[int, set[str]] = {}
    entries = staged = external = 0

    def add(address: str) -> None:
        nonlocal external
        key = namespace_key(address, namespace)
        if key is None:
            external += 1
            return
        sha = data_sha(key)
        if sha is not None:
            b = bmap.get(sha[:2])
            if b is not None:
                found.setdefault(b, set()).add(sha)

    for item in items:
        if item[0] == "range":
            reader = store.read_range(item[1], item[2])
            for _key, value in reader.items():
                entries += 1
                address = value_address(value)
                # Fast path for the usual record: a relative data/<aa>/<sha256> address.
                sha = data_sha(address)
                if sha is not None:
                    b = bmap.get(sha[:2])
                    if b is not None:
                        shas = found.get(b)
                        if shas is None:
                            shas = found[b] = set()
                        shas.add(sha)
                    continue
                add(address)
        else:
            for _key, staged_value in app.catalog.staged_records(StagingToken(item[1])):
                if staged_value is not None:
                    staged += 1
                    add(value_address(staged_value))
    counters[0].add(entries)
    counters[1].add(staged)
    counters[2].add(external)
    for b, shas in found.items():
        yield b, list(shas)


def mark_task(
    config: Config, namespace: str, buckets: int, cutoff: float, mark_dir: str, tables: Any,
    index: int, records: Iterable[tuple[int, list[str]]],
) -> Iterator[dict[str, Any]]:
    """The mark's task of bucket ``index``: list the bucket and its part of the trash, write both part files.

    ``records`` are the shuffled ``(bucket, shas)`` of the referenced data
    objects, ``tables`` a broadcast of the referenced tables by bucket.
    Yields the bucket's counters and a sample of its candidates.
    """
    store = app_for(config).catalog.gc_store(namespace)
    prefixes = bucket_prefixes(index, buckets)
    live: set[str] = set()
    for _b, shas in records:
        live.update(shas)
    live_tables = tables.value.get(index, frozenset())
    stats: Counter[str] = Counter()
    lines: list[str] = []
    keys: list[str] = []
    for kind, key, info in store.collectable(prefixes):
        if kind == "other":
            stats["unrecognized"] += 1
            continue
        stats[f"{kind}_objects"] += 1
        stats["bytes"] += info.size
        name = collected_name(key)
        if name in (live if kind == "data" else live_tables):
            stats["referenced"] += 1
            continue
        if info.mtime >= cutoff:
            stats["recent"] += 1
            continue
        stats[f"garbage_{kind}"] += 1
        stats["garbage_bytes"] += info.size
        lines.append(f"{key}\t{info.size}\t{info.mtime!r}\n")
        keys.append(key)
    # The trash, with what this mark knows and the sweep cannot recompute: whether it is referenced.
    trashed: list[str] = []
    for kind, key, info in store.trashed(prefixes):
        stats[f"trash_{kind}"] += 1
        stats["trash_bytes"] += info.size
        referenced = collected_name(key) in (live if kind == "data" else live_tables)
        if referenced:
            stats["trash_referenced"] += 1
        elif info.mtime < cutoff:
            stats["trash_expired"] += 1
        trashed.append(f"{key}\t{info.size}\t{info.mtime!r}\t{int(referenced)}\n")
    store.put(f"{mark_dir}/trash/part-{index:05d}.tsv", "".join(trashed).encode())
    store.put(f"{mark_dir}/candidates/part-{index:05d}.tsv", "".join(lines).encode())
    yield {"stats": dict(stats), "sample": sorted(keys)[:SAMPLE]}


def _part(store: GcStore, key: str) -> list[list[str]]:
    try:
        text = store.get(key).decode()
    except ObjectNotFound:
        raise Corrupt(f"GC mark is incomplete: {key} is missing") from None
    return [line.split("\t") for line in text.splitlines()]


def sweep_bucket(
    store: GcStore, cutoff: float, mark_dir: str, sweep_dir: str,
    live: set[str], live_tables: frozenset[str], dry_run: bool, index: int,
) -> dict[str, Any]:
    """Sweep one bucket of a mark, given what the re-mark found referenced (``live``: shas, ``live_tables``: ids).

    First the trash the mark listed: what the mark or the re-mark found
    referenced is restored, what neither did and was trashed before
    ``cutoff`` is purged, the rest stays.  Then the candidates: what the
    re-mark found referenced stays, the rest is trashed (if still older than
    ``cutoff``).  Writes what was trashed, restored and purged to the sweep's
    part files, and returns the bucket's counters and a sample.
    """
    stats: Counter[str] = Counter()
    todo_trash: list[tuple[str, str]] = []
    for key, _size, mtime, referenced in _part(store, f"{mark_dir}/trash/part-{index:05d}.tsv"):
        if referenced == "1" or collected_name(key) in (live if is_data(key) else live_tables):
            todo_trash.append(("restore", key))
        elif float(mtime) < cutoff:
            todo_trash.append(("purge", key))
        else:
            stats["recent"] += 1
    todo: list[tuple[str, str]] = []
    for key, _size, _mtime in _part(store, f"{mark_dir}/candidates/part-{index:05d}.tsv"):
        if collected_name(key) in (live if is_data(key) else live_tables):
            stats["referenced_again"] += 1
            continue
        todo.append(("trash", key))

    def one(item: tuple[str, str]) -> tuple[str, str, int]:
        op, key = item
        if op == "restore":
            outcome, size = store.restore(key, dry_run=dry_run)
        elif op == "purge":
            outcome, size = store.purge(key, cutoff, dry_run=dry_run)
        else:
            outcome, size = store.trash(key, cutoff, dry_run=dry_run)
            return outcome, key, size
        # Counted apart from candidates already gone: an interrupted sweep's count stays exact.
        return ("gone_from_trash" if outcome == "already_gone" else outcome), key, size

    done: dict[str, list[str]] = {"trashed": [], "restored": [], "purged": []}
    with ThreadPoolExecutor(SWEEP_THREADS) as pool:
        # The trash first, so that no purge ever meets a copy this sweep has just trashed.
        for batch in (todo_trash, todo):
            for outcome, key, nbytes in pool.map(one, batch):
                stats[outcome] += 1
                if outcome in done:
                    kind = "data" if is_data(key) else "table"
                    stats[f"{outcome}_{kind}"] += 1
                    stats[f"{outcome}_bytes"] += nbytes
                    done[outcome].append(f"{key}\t{nbytes}\n")
    samples: dict[str, list[str]] = {}
    for outcome, lines in done.items():
        lines.sort()
        store.put(f"{sweep_dir}/{outcome}/part-{index:05d}.tsv", "".join(lines).encode())
        samples[outcome] = [line.split("\t", 1)[0] for line in lines[:SAMPLE]]
    return {"stats": dict(stats), "samples": samples}


def sweep_task(
    config: Config, namespace: str, cutoff: float, mark_dir: str, sweep_dir: str, tables: Any, dry_run: bool,
    index: int, records: Iterable[tuple[int, list[str]]],
) -> Iterator[dict[str, Any]]:
    """The sweep's task of bucket ``index``: ``sweep_bucket`` with the worker's GC store and what the re-mark found."""
    live: set[str] = set()
    for _b, shas in records:
        live.update(shas)
    yield sweep_bucket(
        app_for(config).catalog.gc_store(namespace), cutoff, mark_dir, sweep_dir,
        live, tables.value.get(index, frozenset()), dry_run, index,
    )
