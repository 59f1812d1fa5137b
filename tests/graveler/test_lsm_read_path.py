"""The LSM staging's warm read path and commit (issue 26's read and commit targets): what each
speed-up relies on, checked against the plain definition it replaces."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from lakemount.block import MemoryAdapter
from lakemount.cache.ram import RamCache
from lakemount.graveler import reads as reads_module
from lakemount.graveler.committed import writer
from lakemount.graveler.committed.store import CommittedStore
from lakemount.graveler.committed.writer import ApplyStats, RangeBuilder
from lakemount.graveler.graveler import Graveler
from lakemount.graveler.staging import files as files_module
from lakemount.graveler.staging import lsm as lsm_module
from lakemount.graveler.staging.file import UNSTAGED_MARK, StagingFile, encode_file, tag
from lakemount.graveler.staging.lsm import LsmStaging
from lakemount.metastore import staging_lists

from ._support import build_graveler, content, fresh_view, val

R = "repo"


@pytest.fixture
def g(tmp_path: Path) -> Graveler:
    g = build_graveler(tmp_path / "refs.db", staging="lsm", l1_max=1000)
    g.create_repository(R, "mem://repo")
    return g


def _lsm(g: Graveler) -> LsmStaging:
    assert isinstance(g.staging, LsmStaging)
    return g.staging


@pytest.mark.parametrize("first", [1, 3, 256])
def test_chunked_merge_is_the_newest_record_of_every_key(first: int) -> None:
    """Files of random overlapping keys (some partial-reset marks): the chunks, in order, are the
    newest record of each key in [start, stop), as a plain dict merge oldest first gives."""
    rnd = random.Random(first)
    files: list[StagingFile] = []
    for n in range(7):  # given oldest first here, merged newest first below
        keys = sorted({b"k%04d" % rnd.randrange(400) for _ in range(rnd.randrange(0, 120))})
        recs = [(k, UNSTAGED_MARK if rnd.random() < 0.1 else tag(b"f%d" % n)) for k in keys]
        if recs:
            files.append(StagingFile(encode_file(recs), f"f{n}"))
    for start, stop in [(b"", None), (b"k0100", b"k0300"), (b"k0399", None), (b"k9", None), (b"k0200", b"k0200")]:
        want: dict[bytes, bytes] = {}
        for f in files:
            want.update((k, v) for k, v in f.items() if k >= start and (stop is None or k < stop))
        got: list[tuple[bytes, bytes]] = []
        for keys, values in files_module._merge_chunks(list(reversed(files)), start, stop, first):
            assert keys, "no empty chunk"
            got += zip(keys, values)
        assert got == sorted(want.items())


def test_a_warm_lookup_reads_no_list_row_twice(g: Graveler, monkeypatch: pytest.MonkeyPatch) -> None:
    """List rows never change once inserted: a read fetches the ids a token lists, and whole rows
    only for ids this process has not seen (old code decoded every row on every lookup)."""
    for i in range(5):
        g.set_many(R, "main", [(b"f%d/%d" % (i, j), val(f"{i}.{j}")) for j in range(3)])
    made: list[Any] = []
    info = staging_lists._info

    def counted(row: Any) -> Any:
        made.append(row)
        return info(row)

    monkeypatch.setattr(staging_lists, "_info", counted)
    ref = g.resolve(R, "main")
    for _ in range(3):
        assert g.get(R, ref, b"f2/1") == val("2.1")
    assert made == []  # all appended by this process: known by id
    # Another process's append: its row is read whole once, then known.
    other = fresh_view(g)  # its own lists object: knows no row
    other.set(R, "main", b"f9", val("other"))
    assert g.get(R, ref, b"f9") == val("other")
    assert len(made) == 1
    assert g.get(R, ref, b"f9") == val("other")
    assert len(made) == 1


def test_a_row_compacted_away_between_the_two_reads_is_read_again(g: Graveler, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows not yet known are read by id in a second statement: if a compaction deleted one in
    between, the lists are read again (a file missing from the answer would lose staged entries)."""
    g.set_many(R, "main", [(b"a", val("1"))])
    g.set_many(R, "main", [(b"b", val("2"))])
    lists = _lsm(g).lists
    token = g.get_branch(R, "main").staging_token
    lists._known.clear()  # type: ignore[attr-defined]  # as another process that never read them
    fast = lists._fast  # type: ignore[attr-defined]
    query = fast.query
    compacted: list[bool] = []
    racing_once: list[str] = []

    def racing(text: str, params: Any) -> Any:
        if "WHERE id IN" in text and not racing_once:
            racing_once.append(text)
            compacted.append(_lsm(g).compact(token, minimum=2))  # its own reads go through unraced
        return query(text, params)

    monkeypatch.setattr(fast, "query", racing)
    files = lists.files([token])
    assert compacted == [True]  # the fault happened: the rows read first were gone by the second read
    assert [f.level for f in files] == [2]
    assert g.get(R, g.resolve(R, "main"), b"a") == val("1")


def test_has_uncommitted_reads_one_entry_not_the_whole_staging(g: Graveler, monkeypatch: pytest.MonkeyPatch) -> None:
    """A commit first asks whether anything is staged: counting every entry read the whole staging
    once more before the commit read it again."""
    g.set_many(R, "main", [(b"k%05d" % i, val(str(i))) for i in range(3000)])

    def counted(token: Any) -> int:
        raise AssertionError("counted the whole staging")

    monkeypatch.setattr(_lsm(g), "staged_count", counted)
    assert g.has_uncommitted(R, g.get_branch(R, "main"))
    stats = g.commit(R, "main", "all").stats
    assert stats is not None and stats.changes_applied == 3000


def test_a_listing_within_the_first_page_reads_the_lists_once(g: Graveler, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rest after a first page is read only when listed past the page."""
    g.set_many(R, "main", [(b"k%03d" % i, val(str(i))) for i in range(50)])
    ref = g.resolve(R, "main")
    list(g.scan(R, ref))  # the branch is known: the next scan reads branch row and lists in one statement
    monkeypatch.setattr(lsm_module, "SCAN_PAGE", 10)
    monkeypatch.setattr(reads_module, "SCAN_PAGE_FIRST", 10)  # a branch with one token is scanned in pages from it (stop 55)
    statements: list[str] = []
    fast = _lsm(g).lists._fast  # type: ignore[attr-defined]
    query = fast.query

    def counted(text: str, params: Any) -> Any:
        if "lm_staging_files" in text:
            statements.append(text)
        return query(text, params)

    monkeypatch.setattr(fast, "query", counted)
    assert [kv[0] for _, kv in zip(range(10), g.scan(R, ref))] == [b"k%03d" % i for i in range(10)]
    assert len(statements) == 1
    assert len(list(g.scan(R, ref))) == 50  # past the page: the rest is read then
    assert len(statements) == 3


@pytest.mark.parametrize("max_records", [writer.MAX_RECORDS, 7])
def test_add_many_cuts_the_ranges_add_cuts(monkeypatch: pytest.MonkeyPatch, max_records: int) -> None:
    """The batched builder writes the same ranges (ids, bounds, counts) as record by record,
    also where a run reaches MAX_RECORDS before its cut key (then it goes record by record)."""
    monkeypatch.setattr(writer, "MAX_RECORDS", max_records)
    recs = [(b"key/%06d" % i, b"v" * (i % 40)) for i in range(0, 30000, 3)]

    def build(batched: bool) -> list[tuple[str, bytes, bytes, int]]:
        store = CommittedStore(MemoryAdapter(), RamCache(1 << 26))
        b = RangeBuilder(store, "mem://ns", ApplyStats())
        out: list[Any] = []
        if batched:
            for lo in range(0, len(recs), 1000):
                chunk = recs[lo : lo + 1000]
                out += b.add_many([k for k, _ in chunk], [v for _, v in chunk])
        else:
            out += [f for f in (b.add(k, v) for k, v in recs) if f is not None]
        out.append(b.flush())
        return [(r.id, r.min_key, r.max_key, r.count) for r in (f.result() for f in out if f is not None)]

    plain = build(False)
    assert len(plain) > 3
    assert build(True) == plain


def test_a_cold_lookup_decodes_one_block_not_the_whole_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stat over a big file not used yet probes its bloom filter and decodes one block; the file
    is decoded whole (sorted arrays) only once scanned, or asked HOT_AFTER times."""
    from lakemount.graveler import sstable

    recs = [(b"k%06d" % i, tag(b"v" * 50)) for i in range(20000)]
    f = StagingFile(encode_file(recs), "big")
    blocks: list[int] = []
    entries = sstable._block_entries

    def counted(*a: Any) -> Any:
        blocks.append(a[1])
        return entries(*a)

    monkeypatch.setattr(sstable, "_block_entries", counted)
    assert f.get(b"k012345") == tag(b"v" * 50)
    assert f.get(b"k012345x") is None  # in range, not held
    assert len(blocks) <= 2
    assert list(f.scan(b"k019998", None)) == recs[-2:]
    assert len(blocks) > 20  # scanned: decoded whole, once
    n = len(blocks)
    for i in range(0, 20000, 97):
        assert f.get(b"k%06d" % i) == recs[i][1]
    assert len(blocks) == n


def test_the_first_value_past_a_compacted_run_of_deletions_is_a_bisect(g: Graveler, monkeypatch: pytest.MonkeyPatch) -> None:
    """S3A's task attempts moved out of ``_temporary/`` and compacted into one file: ``staged_first`` finds the
    value after 3,000 tombstones by the file's PUT keys, merging no chunk (stop 55; before, it stepped
    over each tombstone of the merge)."""
    staging = _lsm(g)
    gone = [b"t/attempt_%05d/part-0" % i for i in range(3000)]
    g.set_many(R, "main", [(k, val("x")) for k in gone])
    g.set_many(R, "main", [(k, None) for k in gone])
    g.set_many(R, "main", [(b"t/live", val("live"))])
    token = g.get_branch(R, "main").staging_token
    assert staging.compact(token, minimum=2)
    assert len(staging.lists.files([token], b"t/", b"t0")) == 1  # the tombstones hide the PUTs within the one file

    def merged(*a: Any, **k: Any) -> Any:
        raise AssertionError("stepped over the tombstones by the chunk")

    monkeypatch.setattr(staging.files, "chunks", merged)
    found = staging.staged_first([token], b"t/", b"t0")
    assert found is not None and found[0] == b"t/live" and content(found[1]) == "live"
    assert staging.staged_first([token], b"t/attempt_", b"t/attempt`") is None


def test_the_first_value_past_deletions_in_a_newer_file_is_the_newest_record(g: Graveler, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys staged in one file and deleted in a newer one (not compacted yet: S3A's attempts put, then moved
    out): the run of them is passed over by comparing the two files' key lists a slice at a time, with no
    chunk merged; the answer is the plain definition's (the first key whose newest record is a PUT)."""
    staging = _lsm(g)
    g.set_many(R, "main", [(b"k%03d" % i, val(str(i))) for i in range(100)])
    g.set_many(R, "main", [(b"k%03d" % i, None) for i in range(60) if i != 7])
    token = g.get_branch(R, "main").staging_token
    assert len(staging.lists.files([token], b"", None)) == 2

    def plain(start: bytes, stop: bytes | None) -> tuple[bytes, bytes] | None:
        return next(((k, v) for k, v in staging.staged_scan(token, start, stop) if v is not None), None)

    cases = [(b"", None), (b"k001", None), (b"k008", None), (b"k008", b"k060"), (b"k008", b"k061"), (b"k090", None), (b"k100", None)]
    want = {c: plain(*c) for c in cases}

    def merged(*a: Any, **k: Any) -> Any:
        raise AssertionError("merged by the chunk")

    monkeypatch.setattr(staging.files, "chunks", merged)
    for c in cases:
        assert staging.staged_first([token], *c) == want[c], c
    found = staging.staged_first([token], b"k008", None)
    assert found is not None and found[0] == b"k060"  # 52 deleted keys passed over as one run


def test_the_first_value_past_deletions_split_over_newer_files_is_the_newest_record(g: Graveler) -> None:
    """Keys of one file deleted by two newer files by turns (each run one key long): past ``DEAD_STEPS`` runs
    the files are merged by the chunk, and the answer is still the plain definition's."""
    staging = _lsm(g)
    g.set_many(R, "main", [(b"k%03d" % i, val(str(i))) for i in range(100)])
    g.set_many(R, "main", [(b"k%03d" % i, None) for i in range(0, 60, 2)])
    g.set_many(R, "main", [(b"k%03d" % i, None) for i in range(1, 60, 2)])
    g.set_many(R, "main", [(b"k%03d" % i, val("again")) for i in (30, 70)])
    token = g.get_branch(R, "main").staging_token
    assert len(staging.lists.files([token], b"", None)) == 4

    def plain(start: bytes, stop: bytes | None) -> tuple[bytes, bytes] | None:
        return next(((k, v) for k, v in staging.staged_scan(token, start, stop) if v is not None), None)

    for start, stop in [(b"", None), (b"k001", None), (b"k031", None), (b"k031", b"k060"), (b"k031", b"k061"), (b"k071", None)]:
        assert staging.staged_first([token], start, stop) == plain(start, stop), (start, stop)
    found = staging.staged_first([token], b"k031", None)
    assert found is not None and found[0] == b"k060"  # 29 runs of one key: past DEAD_STEPS
    assert lsm_module.DEAD_STEPS < 29
