"""SSTables: our reader against our writer, RocksDB's own ``sst_dump``, and damaged files."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from lakemount.block import LocalAdapter
from lakemount.errors import ChecksumMismatch, Corrupt
from lakemount.graveler import sstable
from lakemount.graveler.committed.store import metarange_id_of, range_id_of
from lakemount.graveler.graveler import Graveler
from lakemount.graveler.model import decode_value
from lakemount.graveler.sstable import TableReader, encode_table

from ._support import build_graveler, content, fresh_view, val

SST_DUMP = shutil.which("sst_dump") or ("/usr/bin/sst_dump" if os.path.exists("/usr/bin/sst_dump") else None)


def write_table(records: list[tuple[bytes, bytes]]) -> bytes:
    return encode_table([k for k, _ in records], [v for _, v in records])


# --------------------------------------------------------------------------- reader round trips


def test_many_keys_round_trip() -> None:
    rng = random.Random(1)
    keys = sorted({bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))) for _ in range(20_000)})
    records = [(k, os.urandom(rng.randrange(0, 300))) for k in keys]
    reader = TableReader(write_table(records))
    assert reader.count == len(records)
    assert reader.items() == records
    assert list(reader.scan()) == records
    # Every key is found, by a cold reader too (decoded blocks dropped).
    reader.drop_blocks()
    for k, v in records[::7]:
        assert reader.get(k) == v


def test_big_values_round_trip() -> None:
    # Values bigger than a block (16 KiB) and than several blocks.
    records = [
        (b"k%03d" % i, os.urandom(size)) for i, size in enumerate([0, 1, 16 * 1024, 100_000, 1 << 20, 5, 70_000])
    ]
    reader = TableReader(write_table(records))
    assert reader.items() == records
    for k, v in records:
        assert reader.get(k) == v
    assert list(reader.scan(b"k003")) == records[3:]


def test_single_key_table() -> None:
    reader = TableReader(write_table([(b"only", b"value")]))
    assert reader.count == 1
    assert reader.items() == [(b"only", b"value")]
    assert reader.get(b"only") == b"value"
    for miss in (b"", b"a", b"onl", b"only\x00", b"z", b"\xff\xff"):
        assert reader.get(miss) is None
    assert list(reader.scan(b"only")) == [(b"only", b"value")]
    assert list(reader.scan(b"a")) == [(b"only", b"value")]
    assert list(reader.scan(b"only\x00")) == []


def test_scan_from_every_kind_of_start() -> None:
    keys = [b"p/%05d" % i for i in range(0, 6000, 3)] + [b"q\x00", b"q\xff", b"\xff" * 3]
    records = [(k, b"v" + k) for k in sorted(keys)]
    reader = TableReader(write_table(records))
    all_keys = [k for k, _ in records]
    probes = [
        b"",
        b"a",
        b"p/",
        b"p/00000",
        b"p/00001",
        b"p/02999",
        b"p/03000",
        b"p/05997",
        b"p/05998",
        b"q",
        b"q\x00",
        b"q\x01",
        b"\xff",
        b"\xff" * 3,
        b"\xff" * 4,
    ]
    for start in probes:
        expected = [r for r in records if r[0] >= start]
        assert list(reader.scan(start)) == expected, start
    # Gets: every present key and the keys between them.
    for k in all_keys[::11]:
        assert reader.get(k) == b"v" + k
        assert reader.get(k + b"\x00") is None
    assert reader.get(b"p/00001") is None
    assert reader.get(b"p/06000") is None


def test_garbage_is_corrupt_not_a_crash() -> None:
    for data in (b"", b"x" * 10, os.urandom(200), b"\x00" * 4096):
        with pytest.raises(Corrupt):
            TableReader(data, name="junk")


def test_truncated_table_is_corrupt() -> None:
    data = write_table([(b"k%04d" % i, b"v" * 100) for i in range(500)])
    for cut in (1, 20, len(data) // 2):
        with pytest.raises(Corrupt):
            TableReader(data[:-cut]).items()


# --------------------------------------------------------------------------- graveler-written tables


def _local_repo(tmp_path: Path, n: int = 3000) -> tuple[Graveler, Path, str]:
    ns_dir = tmp_path / "ns"
    g = build_graveler(tmp_path / "refs.db", LocalAdapter(), system_ns=f"local://{tmp_path}/sys")
    g.create_repository("repo", f"local://{ns_dir}")
    g.set_many("repo", "main", [(b"dir/file-%05d" % i, val(f"c{i}")) for i in range(n)])
    g.commit("repo", "main", "many files")
    return g, ns_dir, g.commit_of("repo", "main").metarange_id


def _as_sst(src: Path, tmp_path: Path) -> Path:
    # sst_dump only opens files named *.sst; stored tables are named by their id.
    dst = tmp_path / "dump" / (src.name + ".sst")
    dst.parent.mkdir(exist_ok=True)
    shutil.copyfile(src, dst)
    return dst


def _sst_dump_scan(path: Path) -> str:
    assert SST_DUMP is not None
    proc = subprocess.run([SST_DUMP, f"--file={path}", "--command=scan"], capture_output=True, timeout=60)
    out = proc.stdout.decode("latin-1") + proc.stderr.decode("latin-1")
    assert proc.returncode == 0, out
    assert "not a valid SST file" not in out and "Corruption" not in out, out
    return out


@pytest.mark.skipif(SST_DUMP is None, reason="sst_dump not installed (Debian package rocksdb-tools)")
def test_sst_dump_reads_a_range_and_the_metarange(tmp_path: Path) -> None:
    g, ns_dir, mr_id = _local_repo(tmp_path)
    tables = sorted(p for p in (ns_dir / "_lakefs").iterdir() if p.is_file())
    mr_file = ns_dir / "_lakefs" / mr_id
    assert mr_file in tables
    mr = g.metarange_of(g.get_repository("repo"), g.commit_of("repo", "main"))
    assert len(mr.ranges) > 1
    info = mr.ranges[1]

    out = _sst_dump_scan(_as_sst(ns_dir / "_lakefs" / info.id, tmp_path))
    range_keys = [k for k, _ in mr.reader(1).items()]
    assert len(range_keys) == info.count
    for k in range_keys:
        assert f"'{k.decode()}' seq:0, type:1 =>" in out
    assert out.count("seq:0, type:1") == info.count

    out = _sst_dump_scan(_as_sst(mr_file, tmp_path))
    assert out.count("seq:0, type:1") == len(mr.ranges)
    for r in mr.ranges:
        assert f"'{r.max_key.decode()}' seq:0, type:1 =>" in out


def _flip_byte(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("where", ["start", "middle", "value", "footer"])
def test_corrupt_range_file_raises(tmp_path: Path, where: str) -> None:
    g, ns_dir, _mr_id = _local_repo(tmp_path)
    mr = g.metarange_of(g.get_repository("repo"), g.commit_of("repo", "main"))
    info = mr.ranges[0]
    path = ns_dir / "_lakefs" / info.id
    size = path.stat().st_size
    raw = path.read_bytes()
    offset = {
        "start": 0,
        "middle": size // 2,
        "value": raw.index(b"data/c0") + 5,  # inside an entry: the parse would succeed with wrong data
        "footer": size - 3,
    }[where]
    _flip_byte(path, offset)
    key = mr.reader(0).items()[0][0]

    cold = fresh_view(g)
    ref = cold.resolve("repo", "main")
    with pytest.raises(ChecksumMismatch):
        cold.get("repo", ref, key)
    with pytest.raises(ChecksumMismatch):
        list(cold.scan("repo", ref))
    with pytest.raises(Corrupt):
        list(cold.diff("repo", "main~1", "main"))
    # Still refused the second time (a cached corrupt copy must not become "valid").
    with pytest.raises(ChecksumMismatch):
        cold.get("repo", ref, key)
    # Other ranges still read fine.
    other = mr.reader(len(mr.ranges) - 1).items()[-1]
    assert cold.get("repo", ref, other[0]) == other[1]


@pytest.mark.parametrize("where", ["range id", "max key", "footer"])
def test_corrupt_metarange_file_raises(tmp_path: Path, where: str) -> None:
    g, ns_dir, mr_id = _local_repo(tmp_path)
    mr = g.metarange_of(g.get_repository("repo"), g.commit_of("repo", "main"))
    path = ns_dir / "_lakefs" / mr_id
    raw = path.read_bytes()
    offset = {
        "range id": raw.index(mr.ranges[1].id.encode()) + 7,
        "max key": raw.index(mr.ranges[0].max_key) + len(mr.ranges[0].max_key) - 1,
        "footer": len(raw) - 2,
    }[where]
    _flip_byte(path, offset)
    cold = fresh_view(g)
    with pytest.raises(Corrupt):
        cold.get("repo", cold.resolve("repo", "main"), b"dir/file-00000")


def test_any_single_byte_flip_never_reads_wrong_data(tmp_path: Path) -> None:
    """Flip bytes all over a range and the metarange: every read either raises Corrupt or returns the truth."""
    g, ns_dir, mr_id = _local_repo(tmp_path, n=1500)
    mr = g.metarange_of(g.get_repository("repo"), g.commit_of("repo", "main"))
    truth = dict(mr.scan())
    rng = random.Random(7)
    for table in (mr_id, mr.ranges[0].id):
        path = ns_dir / "_lakefs" / table
        good = path.read_bytes()
        for offset in rng.sample(range(len(good)), 25):
            _flip_byte(path, offset)
            cold = fresh_view(g)
            try:
                got = dict(cold.scan("repo", cold.resolve("repo", "main")))
            except Corrupt:
                pass
            else:
                assert got == truth, (table, offset)
            path.write_bytes(good)


def test_content_ids_are_what_the_writer_computes(tmp_path: Path) -> None:
    """The read-side verification recomputes range and metarange ids: it must agree with the writer."""
    g, _ns, _ = _local_repo(tmp_path)
    mr = g.metarange_of(g.get_repository("repo"), g.commit_of("repo", "main"))
    assert metarange_id_of(mr.ranges) == mr.id
    for i, info in enumerate(mr.ranges):
        assert range_id_of(mr.reader(i).items()) == info.id


def test_missing_range_file_raises(tmp_path: Path) -> None:
    g, ns_dir, _mr_id = _local_repo(tmp_path)
    mr = g.metarange_of(g.get_repository("repo"), g.commit_of("repo", "main"))
    key = mr.reader(0).items()[0][0]
    os.unlink(ns_dir / "_lakefs" / mr.ranges[0].id)
    cold = fresh_view(g)
    with pytest.raises(Corrupt):
        cold.get("repo", cold.resolve("repo", "main"), key)
    with pytest.raises(Corrupt):
        list(cold.scan("repo", cold.resolve("repo", "main")))


def test_missing_metarange_file_raises(tmp_path: Path) -> None:
    g, ns_dir, mr_id = _local_repo(tmp_path)
    os.unlink(ns_dir / "_lakefs" / mr_id)
    cold = fresh_view(g)
    with pytest.raises(Corrupt):
        list(cold.scan("repo", cold.resolve("repo", "main")))


def test_rewriting_a_corrupt_range_does_not_bless_it(tmp_path: Path) -> None:
    """A commit that produces a range whose id is already stored must not adopt a damaged stored copy."""
    g, ns_dir, _ = _local_repo(tmp_path)
    repo = g.get_repository("repo")
    first = g.commit_of("repo", "main")
    mr = g.metarange_of(repo, first)
    assert len(mr.ranges) > 2
    k0 = mr.reader(0).items()[3][0]
    klast = mr.reader(len(mr.ranges) - 1).items()[0][0]
    path = ns_dir / "_lakefs" / mr.ranges[0].id
    # Change a key of range 0 and commit; corrupt the first commit's range 0 (inside a value); then change the
    # key back (range 0's id again) together with a key of another range (a new metarange), and commit.
    g.set("repo", "main", k0, val("other"))
    g.commit("repo", "main", "change")
    old_k0 = content(mr.get(k0))
    assert old_k0 is not None
    raw = path.read_bytes()
    _flip_byte(path, raw.index(b"data/" + old_k0.encode()) + 5)
    cold = fresh_view(g)
    cold.set("repo", "main", k0, val(old_k0))
    cold.set("repo", "main", klast, val("changed"))
    cold.commit("repo", "main", "change back")
    again = cold.metarange_of(repo, cold.commit_of("repo", "main"))
    assert again.ranges[0].id == mr.ranges[0].id
    reader = fresh_view(g)
    ref = reader.resolve("repo", "main")
    assert reader.get("repo", ref, k0) == val(old_k0)
    expected = dict(mr.scan())
    expected[klast] = val("changed")
    assert dict(reader.scan("repo", ref)) == expected


def test_concurrent_writers_of_the_same_range_stay_readable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two writers racing to store the same table id both upload their own bytes (another version's
    encoder cuts other blocks; RocksDB's put a per-writer session id in the properties) and each records
    its own checksum: whichever file stays must read for both."""

    class RacingAdapter(LocalAdapter):
        """Reports every table as absent, as a writer that checked before the other's PUT landed would see it."""

        def exists(self, url: str) -> bool:
            return False

    ad = RacingAdapter()
    ga = build_graveler(tmp_path / "refs.db", ad, system_ns=f"local://{tmp_path}/sys")
    ga.create_repository("repo", f"local://{tmp_path}/ns")
    ga.create_branch("repo", "other", "main")
    items = [(b"k%03d" % i, val(f"v{i}")) for i in range(20)]
    ga.set_many("repo", "main", items)
    ga.set_many("repo", "other", items)
    gb = fresh_view(ga, ad)
    ga.commit("repo", "main", "a")
    tables = tmp_path / "ns" / "_lakefs"
    first = {p.name: p.read_bytes() for p in tables.iterdir() if p.is_file()}
    with monkeypatch.context() as m:
        m.setattr(sstable, "BLOCK_SIZE", 64)
        gb.commit("repo", "other", "b")  # same records: same range id, its own file bytes
    assert all((tables / name).read_bytes() != data for name, data in first.items())  # both overwritten
    cold = fresh_view(ga, LocalAdapter())
    assert len(list(cold.scan("repo", cold.resolve("repo", "main")))) == 20
    assert len(list(cold.scan("repo", cold.resolve("repo", "other")))) == 20


def test_decode_value_of_stored_records(tmp_path: Path) -> None:
    g, _ns, _ = _local_repo(tmp_path, n=10)
    ref = g.resolve("repo", "main")
    for _k, v in g.scan("repo", ref):
        e = decode_value(v)
        assert e.address.startswith("data/c") and e.etag == e.address[5:]


def test_sst_dump_is_available_or_skipped_explicitly() -> None:
    if SST_DUMP is None:
        pytest.skip("sst_dump not installed (Debian package rocksdb-tools): cannot check RocksDB compatibility")
    assert os.access(SST_DUMP, os.X_OK)


# --------------------------------------------------------------------------- decoded scans


def test_decoded_scans_equal_decoding_the_plain_scan_and_decode_a_block_twice_at_most(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sstable, "DECODED", sstable._DecodedBlocks(1 << 20))
    records = [(b"k/%05d" % i, b"v%d" % i) for i in range(5000)]
    reader = TableReader(write_table(records))
    calls = 0

    def decode(v: bytes) -> int:
        nonlocal calls
        calls += 1
        return int(v[1:])

    starts = [b"", b"k/", b"k/00000", b"k/01234", b"k/01234\x00", b"k/04999", b"k/5", b"z"]
    want = {s: [(k, int(v[1:])) for k, v in reader.scan(s)] for s in starts}
    for rnd in range(4):
        for s in starts:
            assert list(reader.scan(s, decode)) == want[s], (rnd, s)
    # Each block is decoded when scanned (DECODE_AFTER times) and once more to be kept,
    # whatever the starts asked; then never again.
    before = calls
    for s in starts:
        list(reader.scan(s, decode))
    assert calls == before
    assert calls <= len(records) * (sstable.DECODE_AFTER + 1) * len(starts)


def test_decoded_blocks_stay_within_their_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kept = sstable._DecodedBlocks(300)
    monkeypatch.setattr(sstable, "DECODED", kept)
    readers = [
        TableReader(write_table([(b"t%d/%05d" % (t, i), b"%d" % i) for i in range(2000)])) for t in range(3)
    ]
    for _ in range(3):
        for t, reader in enumerate(readers):
            got = list(reader.scan(b"", int))
            assert got == [(b"t%d/%05d" % (t, i), i) for i in range(2000)]
            assert kept._total <= 300
            assert kept._total == sum(len(v) for v in kept._lru.values())
    reader = readers[0]
    reader.drop_blocks()
    assert all(k[0] is not reader for k in kept._lru)
    assert list(reader.scan(b"t0/01999", int)) == [(b"t0/01999", 1999)]
