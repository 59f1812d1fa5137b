"""The commit path's whole-run loops (``graveler.runs``: C when ``_sstblock`` is built) and
``apply_chunks`` against the record-by-record definitions they replace: the same records, the same
ranges, the same metarange id and the same counts."""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from lakemount.block import MemoryAdapter
from lakemount.cache.ram import RamCache
from lakemount.graveler import runs
from lakemount.graveler.committed import writer
from lakemount.graveler.committed.metarange import MetaRange
from lakemount.graveler.committed.store import CommittedStore
from lakemount.graveler.committed.writer import ApplyStats, RangeBuilder, apply, apply_chunks, chunked, write_metarange
from lakemount.graveler.model import EMPTY_METARANGE, MetaRangeID, RangeInfo
from lakemount.graveler.staging.file import PUT, UNSTAGED, UNSTAGED_MARK, tag
from lakemount.graveler.staging.lsm import LsmStaging

from ._support import build_graveler, val

NS = "mem://ns"
keys_st = st.lists(st.binary(min_size=1, max_size=6), max_size=60, unique=True).map(sorted)


def test_the_extension_is_built() -> None:
    """``runs`` uses the C loops (install.sh builds them): the checks below compare them to Python."""
    assert runs.NATIVE
    assert runs.overlay is not runs.overlay_py


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(keys_st, st.integers(0, 60), st.integers(0, 60)), max_size=6))
def test_merge_newest_is_a_dict_merge_oldest_first(spans: list[tuple[list[bytes], int, int]]) -> None:
    keys = [ks for ks, _, _ in spans]
    values = [[(n, k) for k in ks] for n, ks in enumerate(keys)]  # whose record it is, visible
    starts = [min(a, b, len(ks)) for ks, a, b in spans]
    ends = [max(min(a, len(ks)), min(b, len(ks))) for ks, a, b in spans]
    want: dict[bytes, Any] = {}
    for ks, vs, lo, hi in zip(keys, values, starts, ends):
        want.update(zip(ks[lo:hi], vs[lo:hi]))
    expected = (sorted(want), [want[k] for k in sorted(want)])
    assert runs.merge_newest(keys, values, starts, ends) == expected
    assert runs.merge_newest_py(keys, values, starts, ends) == expected


tagged_st = st.one_of(st.binary(max_size=8).map(tag), st.just(tag(None)), st.just(UNSTAGED_MARK))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.binary(min_size=1, max_size=4), tagged_st), max_size=40))
def test_live_untags_and_drops_unstaged_marks(records: list[tuple[bytes, bytes]]) -> None:
    keys, values = [k for k, _ in records], [v for _, v in records]
    expected = ([k for k, v in records if v[0] != UNSTAGED], [v[1:] if v[0] == PUT else None for v in values if v[0] != UNSTAGED])
    assert runs.live(keys, values, PUT, UNSTAGED) == expected
    assert runs.live_py(keys, values, PUT, UNSTAGED) == expected


@settings(max_examples=150, deadline=None)
@given(keys_st, keys_st, st.data())
def test_overlay_is_the_record_loop(base_keys: list[bytes], change_keys: list[bytes], data: st.DataObject) -> None:
    """Changes over base records: a dict with the changes applied, and the count apply's record loop kept."""
    base_values = [data.draw(st.sampled_from([b"a", b"b"])) for _ in base_keys]
    values: list[bytes | None] = [data.draw(st.sampled_from([b"a", b"b", None])) for _ in change_keys]
    model = dict(zip(base_keys, base_values))
    applied = 0
    for k, v in zip(change_keys, values):
        if model.get(k) != v and (v is not None or k in model):
            applied += 1
        if v is None:
            model.pop(k, None)
        else:
            model[k] = v
    expected = (sorted(model), [model[k] for k in sorted(model)], applied)
    assert runs.overlay(base_keys, base_values, change_keys, values) == expected
    assert runs.overlay_py(base_keys, base_values, change_keys, values) == expected


def test_cut_ends_and_range_feed_agree_with_python() -> None:
    rnd = random.Random(3)
    keys = sorted({b"p/%d/%d" % (rnd.randrange(50), rnd.randrange(10**6)) for _ in range(20000)})
    values = [bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 40))) for _ in keys]
    h = xxhash.xxh3_64_intdigest
    assert runs.cut_ends(keys, h, 1023) == runs.cut_ends_py(keys, h, 1023)
    assert len(runs.cut_ends(keys, h, 1023)) > 5
    assert runs.range_feed(keys, values, 16) == runs.range_feed_py(keys, values, 16)
    assert runs.range_feed([], [], 16) == (b"", 0)


def test_the_c_loops_refuse_what_is_not_bytes() -> None:
    with pytest.raises(TypeError):
        runs.overlay([b"a"], [b"x"], ["a"], [b"y"])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        runs.overlay([], [], [b"a"], [3])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        runs.live([b"a"], [b""], PUT, UNSTAGED)
    with pytest.raises(ValueError):
        runs.merge_newest([[b"a"]], [[1]], [0], [2])


# ---------------------------------------------------------------- apply_chunks against the record loop
def _apply_record_by_record(
    store: CommittedStore, base: MetaRange, changes: Iterable[tuple[bytes, bytes | None]]
) -> tuple[MetaRangeID, ApplyStats]:
    """``apply`` as it was before changes came in chunks: one ``RangeBuilder.add`` per record,
    a base range reused when no change falls into it while the builder is on a boundary."""
    stats = ApplyStats()
    out: list[RangeInfo | Future[RangeInfo]] = []
    builder = RangeBuilder(store, NS, stats)
    it: Iterator[tuple[bytes, bytes | None]] = iter(changes)
    pending = next(it, None)

    def add(key: bytes, value: bytes) -> None:
        done = builder.add(key, value)
        if done:
            out.append(done)

    for i, info in enumerate(base.ranges):
        if builder.empty and (pending is None or pending[0] > info.max_key):
            out.append(info)
            stats.ranges_reused += 1
            continue
        for key, value in base.reader(i).items():
            while pending is not None and pending[0] < key:
                if pending[1] is not None:
                    stats.changes_applied += 1
                    add(pending[0], pending[1])
                pending = next(it, None)
            if pending is not None and pending[0] == key:
                if pending[1] != value:
                    stats.changes_applied += 1
                if pending[1] is not None:
                    add(key, pending[1])
                pending = next(it, None)
                continue
            add(key, value)
    while pending is not None:
        if pending[1] is not None:
            stats.changes_applied += 1
            add(pending[0], pending[1])
        pending = next(it, None)
    done = builder.flush()
    if done:
        out.append(done)
    ranges = [r.result() if isinstance(r, Future) else r for r in out]
    mr_id, _ = write_metarange(store, NS, ranges)
    return mr_id, stats


def _base(store: CommittedStore, records: dict[bytes, bytes]) -> MetaRange:
    empty = store.metarange(NS, EMPTY_METARANGE, "")
    mr_id, digest, _ = apply(store, NS, empty, sorted(records.items()))
    return store.metarange(NS, mr_id, digest)


def _chunks_of(changes: list[tuple[bytes, bytes | None]], rnd: random.Random) -> Iterator[writer.Chunk]:
    i = 0
    while i < len(changes):
        n = rnd.choice((1, 2, 7, 50, 400, 5000))
        part = changes[i : i + n]
        yield [k for k, _ in part], [v for _, v in part]
        i += n


@pytest.mark.parametrize("seed", range(8))
def test_apply_chunks_is_the_record_loop(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """Random changes over a base of many ranges (new keys before, between, inside and after its
    ranges; base keys deleted, changed, set to what they hold; tombstones of absent keys; keys on
    range bounds), in chunks of random sizes: the same metarange id and counts as record by record."""
    rnd = random.Random(seed)
    if seed % 2:
        monkeypatch.setattr(writer, "MAX_RECORDS", 97)  # cuts by count too, not only by key
    store = CommittedStore(MemoryAdapter(), RamCache(1 << 28))
    base_records = {b"k/%06d" % i: val(f"b{i}") for i in range(0, 60000, rnd.choice((2, 3)))}
    base = _base(store, base_records)
    assert len(base.ranges) > 10
    bounds = [r.min_key for r in base.ranges] + [r.max_key for r in base.ranges]
    keys = list(base_records)
    changes: dict[bytes, bytes | None] = {}
    for _ in range(rnd.choice((5, 300, 4000))):
        pick = rnd.random()
        if pick < 0.2:
            k = rnd.choice(bounds)
        elif pick < 0.6:
            k = rnd.choice(keys)
        else:
            k = b"k/%06d%s" % (rnd.randrange(-10, 60010), rnd.choice((b"", b"x")))
        v = rnd.random()
        changes[k] = None if v < 0.3 else base_records.get(k, val("same")) if v < 0.4 else val(f"n{rnd.random()}")
    if seed == 0:  # everything deleted
        changes = dict.fromkeys(keys)
    ordered = sorted(changes.items())
    want_id, want_stats = _apply_record_by_record(store, base, ordered)
    got_id, _digest, got_stats = apply_chunks(store, NS, base, _chunks_of(ordered, rnd))
    assert got_id == want_id
    assert (got_stats.changes_applied, got_stats.ranges_reused, got_stats.ranges_written, got_stats.records_written) == (
        want_stats.changes_applied, want_stats.ranges_reused, want_stats.ranges_written, want_stats.records_written)
    assert (apply(store, NS, base, ordered)[0], apply_chunks(store, NS, base, chunked(ordered, 3))[0]) == (want_id, want_id)
    model = {**base_records, **changes}
    result = store.metarange(NS, got_id, _digest)
    assert list(result.scan()) == sorted((k, v) for k, v in model.items() if v is not None)


def test_apply_chunks_over_an_empty_base_and_no_changes() -> None:
    store = CommittedStore(MemoryAdapter(), RamCache(1 << 26))
    empty = store.metarange(NS, EMPTY_METARANGE, "")
    assert apply_chunks(store, NS, empty, [])[0] == EMPTY_METARANGE
    only_tombstones = apply_chunks(store, NS, empty, [([b"a", b"b"], [None, None])])
    assert only_tombstones[0] == EMPTY_METARANGE and only_tombstones[2].changes_applied == 0
    base = _base(store, {b"a": val("a")})
    mr_id, _, stats = apply_chunks(store, NS, base, [])
    assert mr_id == base.id and stats.ranges_reused == 1 and stats.ranges_written == 0


def _staged_commit(tmp_path: Path, name: str, chunked_reads: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[str, int]:
    """Commit, on a fresh lsm graveler, a base of 20,000 keys, then random staged changes over it in
    many files (sets, deletes of base and absent keys, partial resets); the second commit's
    metarange id and changes applied.  Without ``chunked_reads`` the commit reads the staging
    entry by entry (``staged_scan``), as before chunks."""
    g = build_graveler(tmp_path / f"{name}.db", staging="lsm", l1_max=1000)
    if not chunked_reads:
        monkeypatch.setattr(g.reads, "staged_chunks", lambda tokens: chunked(g.reads.staged_scan(tokens, b"", None)))
    g.create_repository("r", "mem://r")
    g.set_many("r", "main", [(b"k/%05d" % i, val(f"b{i}")) for i in range(0, 40000, 2)])
    g.commit("r", "main", "base")
    rnd = random.Random(5)
    for n in range(12):
        items: dict[bytes, bytes | None] = {}
        for _ in range(rnd.randrange(1, 3000)):
            k = b"k/%05d" % rnd.randrange(40000)
            items[k] = None if rnd.random() < 0.3 else val(f"s{n}-{k!r}")
        g.set_many("r", "main", list(items.items()))
        if n % 4 == 3:
            g.reset("r", "main", key=b"k/%05d" % rnd.randrange(0, 40000, 2))
            g.reset("r", "main", prefix=b"k/%03d" % rnd.randrange(400))
    r = g.commit("r", "main", "changes")
    return r.commit.metarange_id, r.stats.changes_applied


def test_a_commit_reading_chunks_is_the_commit_reading_entries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lsm staging's chunks (``staged_chunks``: the commit's read) give the metarange and counts
    that reading ``staged_scan`` entry by entry gives."""
    chunks = _staged_commit(tmp_path, "chunks", True, monkeypatch)
    entries = _staged_commit(tmp_path, "entries", False, monkeypatch)
    assert chunks == entries
    assert chunks[1] > 1000


def test_staged_chunks_are_the_staged_scan(tmp_path: Path) -> None:
    g = build_graveler(tmp_path / "refs.db", staging="lsm", l1_max=1000)
    g.create_repository("r", "mem://r")
    rnd = random.Random(7)
    for n in range(9):
        g.set_many("r", "main", [(b"k%05d" % rnd.randrange(3000), None if rnd.random() < 0.2 else val(f"{n}"))
                                 for _ in range(rnd.randrange(1, 900))])
        g.reset("r", "main", prefix=b"k%03d" % rnd.randrange(300))
    staging = g.staging
    assert isinstance(staging, LsmStaging)
    token = g.get_branch("r", "main").staging_token
    got = [kv for keys, values in staging.staged_chunks(token) for kv in zip(keys, values)]
    assert got == list(staging.staged_scan(token))
    assert len(got) > 1000 and any(v is None for _, v in got)
    assert [kv for keys, values in staging.staged_chunks(token, b"k01", b"k02") for kv in zip(keys, values)] == list(
        staging.staged_scan(token, b"k01", b"k02"))


def test_range_tables_are_written_off_the_feeding_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """The thread adding records encodes no table (waited for behind the upload threads): each
    range's table is encoded on the worker that uploads it, and holds its records."""
    import threading

    made_on: list[threading.Thread] = []
    real = writer.encode_table

    def watched(keys: list[bytes], values: list[bytes]) -> bytes:
        made_on.append(threading.current_thread())
        return real(keys, values)

    monkeypatch.setattr(writer, "encode_table", watched)
    store = CommittedStore(MemoryAdapter(), RamCache(1 << 26))
    recs = sorted({b"k/%05d" % i: val(f"{i}") for i in range(5000)}.items())
    b = RangeBuilder(store, NS, ApplyStats())
    futures = b.add_many([k for k, _ in recs], [v for _, v in recs])
    futures.append(b.flush())  # type: ignore[arg-type]
    infos = [f.result() for f in futures]
    assert len(infos) > 2 and len(made_on) == len(infos)
    assert threading.current_thread() not in made_on
    got = [kv for info in infos for kv in store.range_reader(NS, info).items()]
    assert got == recs
