"""Our table encoder: the C loop and its pure-Python twin write the same bytes, our reader and RocksDB's
own tools (``sst_dump``; RocksDB inside rocksdict) read them, and our reader still reads tables RocksDB wrote."""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakemount.graveler import sstable
from lakemount.graveler.sstable import TableReader, encode_table, encode_table_py

c_ext = pytest.importorskip("lakemount.graveler._sstblock")
SST_DUMP = shutil.which("sst_dump") or ("/usr/bin/sst_dump" if os.path.exists("/usr/bin/sst_dump") else None)
needs_sst_dump = pytest.mark.skipif(SST_DUMP is None, reason="sst_dump not installed (Debian package rocksdb-tools)")

Records = list[tuple[bytes, bytes]]


def both(records: Records, block_size: int = sstable.BLOCK_SIZE, interval: int = sstable.RESTART_INTERVAL) -> bytes:
    """The table of ``records`` as the C encoder writes it, checked equal to the twin's and read back."""
    keys, values = [k for k, _ in records], [v for _, v in records]
    c = c_ext.encode_table(keys, values, block_size, interval, sstable.FORMAT_VERSION)
    assert c == encode_table_py(keys, values, block_size, interval, sstable.FORMAT_VERSION)
    reader = TableReader(c)
    assert reader.items() == records
    assert reader.count == len(records)
    return c


def tricky_records(rng: random.Random, n: int) -> Records:
    """Keys sharing long prefixes, keys that are prefixes of others (with 0x00/0x01 bytes, the internal-key
    trailer's, right after), keys longer than a block; values empty, tiny and larger than a block."""
    keys: set[bytes] = set()
    stems = [b"", b"a", b"dir/sub/", b"\x00", b"\x01", b"x" * 300]
    while len(keys) < n:
        kind = rng.randrange(6)
        stem = rng.choice(stems)
        if kind == 0:
            keys.add(stem + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 12))))
        elif kind == 1:
            keys.add(stem + bytes(rng.choice(b"\x00\x01\x02") for _ in range(rng.randrange(1, 10))))
        elif kind == 2:
            keys.add(stem + b"%06d" % rng.randrange(100_000))
        elif kind == 3:
            keys.add(stem + os.urandom(rng.randrange(20_000, 40_000)) if rng.random() < 0.05 else stem + b"k")
        else:
            keys.add(b"part/%03d/%09d.parquet" % (rng.randrange(50), rng.randrange(10**9)))
    values = []
    for _ in range(n):
        r = rng.random()
        size = 0 if r < 0.2 else rng.randrange(1, 40) if r < 0.8 else rng.randrange(100, 3000) if r < 0.98 else 70_000
        values.append(os.urandom(size))
    return list(zip(sorted(keys), values))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.binary(min_size=0, max_size=80), st.binary(max_size=600)), min_size=1, max_size=300),
    st.sampled_from([1, 2, 16, 1000]),
    st.sampled_from([1, 64, 700, 4096, sstable.BLOCK_SIZE]),
)
def test_c_and_python_encoders_write_the_same_bytes(records: Records, interval: int, block_size: int) -> None:
    both(sorted(dict(records).items()), block_size, interval)


def test_encoders_agree_on_tricky_keys_values_and_block_boundaries() -> None:
    rng = random.Random(11)
    for n in (1, 2, 15, 16, 17, 200, 3000):
        records = tricky_records(rng, n)
        for block_size, interval in ((sstable.BLOCK_SIZE, sstable.RESTART_INTERVAL), (1, 16), (300, 3), (4096, 1)):
            data = both(records, block_size, interval)
            reader = TableReader(data)
            if block_size == 1:  # every record a block of its own
                assert reader.block_bounds() == [k for k, _ in records]
            for k, v in records[:: max(1, n // 50)]:
                assert reader.get(k) == v
    # Records of 114 bytes and a restart each (interval 1): a block of m records is 118 * m + 4 bytes, and
    # is cut once it reaches block_size, so it holds ceil((block_size - 4) / 118) records, exactly at the
    # boundary too (block_size = 118 * m + 4).
    records = [(b"k%02d" % i, b"v" * 100) for i in range(40)]
    for block_size in [*range(1, 2000, 13), *(118 * m + 4 for m in range(1, 12)), *(118 * m + 5 for m in range(1, 12))]:
        per_block = max(1, -(-(block_size - 4) // 118))
        bounds = TableReader(both(records, block_size, 1)).block_bounds()
        assert bounds == [k for k, _ in records][per_block - 1 :: per_block] + ([] if 40 % per_block == 0 else [records[-1][0]])


def test_encoders_refuse_what_is_not_a_table() -> None:
    v = sstable.FORMAT_VERSION
    for enc in (c_ext.encode_table, encode_table_py):
        for keys, values in (([], []), ([b"b", b"a"], [b"", b""]), ([b"a", b"a"], [b"", b""]), ([b"a"], [b"", b""])):
            with pytest.raises(ValueError):
                enc(keys, values, sstable.BLOCK_SIZE, 16, v)
        with pytest.raises(ValueError):
            enc([b"a"], [b""], sstable.BLOCK_SIZE, 0, v)
    with pytest.raises(TypeError):
        c_ext.encode_table(["a"], [b""], sstable.BLOCK_SIZE, 16, v)
    with pytest.raises(TypeError):
        c_ext.encode_table([b"a"], [None], sstable.BLOCK_SIZE, 16, v)


def test_tables_are_a_function_of_their_records() -> None:
    records = tricky_records(random.Random(3), 500)
    keys, values = [k for k, _ in records], [v for _, v in records]
    assert encode_table(keys, values) == encode_table(list(keys), [bytes(bytearray(v)) for v in values])


# --------------------------------------------------------------------------- RocksDB reads what we write


def _sst_dump(path: Path, *args: str) -> str:
    assert SST_DUMP is not None
    proc = subprocess.run([SST_DUMP, f"--file={path}", *args], capture_output=True, timeout=120)
    out = proc.stdout.decode("latin-1")
    assert proc.returncode == 0, out + proc.stderr.decode("latin-1")
    return out + proc.stderr.decode("latin-1")


_ROW = re.compile(r"^'([0-9A-F]*)' seq:(\d+), type:(\d+) => ([0-9A-F]*)$", re.M)


@needs_sst_dump
def test_sst_dump_reads_and_verifies_what_we_write(tmp_path: Path) -> None:
    rng = random.Random(5)
    for n in (1, 17, 2500):
        records = tricky_records(rng, n)
        path = tmp_path / f"t{n}.sst"
        path.write_bytes(encode_table([k for k, _ in records], [v for _, v in records]))
        out = _sst_dump(path, "--command=scan", "--verify_checksum", "--output_hex")
        assert "Corruption" not in out and "not a valid SST file" not in out, out[:2000]
        rows = [(bytes.fromhex(k), int(seq), int(t), bytes.fromhex(v)) for k, seq, t, v in _ROW.findall(out)]
        assert rows == [(k, 0, 1, v) for k, v in records]
        props = _sst_dump(path, "--command=none", "--show_properties")
        assert f"# entries: {n}\n" in props
        assert "comparator name: leveldb.BytewiseComparator" in props
        assert "SST file compression algo: NoCompression" in props


@needs_sst_dump
def test_sst_dump_checks_our_block_checksums(tmp_path: Path) -> None:
    """The trailers hold real checksums: a flipped byte in a value is what RocksDB reports."""
    records = [(b"k%04d" % i, b"value-%d" % i) for i in range(2000)]
    data = bytearray(encode_table([k for k, _ in records], [v for _, v in records]))
    path = tmp_path / "t.sst"
    path.write_bytes(bytes(data))
    assert "Corruption" not in _sst_dump(path, "--command=scan", "--verify_checksum")
    data[data.index(b"value-1000") + 6] ^= 1
    path.write_bytes(bytes(data))
    proc = subprocess.run([SST_DUMP, f"--file={path}", "--command=scan", "--verify_checksum"],  # type: ignore[list-item]
                          capture_output=True, timeout=60)
    assert b"block checksum mismatch" in proc.stdout + proc.stderr


def test_rocksdb_ingests_and_reads_what_we_write(tmp_path: Path) -> None:
    """A newer RocksDB than sst_dump's (rocksdict's) takes our table as an external SST file."""
    rocksdict = pytest.importorskip("rocksdict")
    records = tricky_records(random.Random(9), 800)
    path = tmp_path / "t.sst"
    path.write_bytes(encode_table([k for k, _ in records], [v for _, v in records]))
    db = rocksdict.Rdict(str(tmp_path / "db"), options=rocksdict.Options(raw_mode=True))
    try:
        db.ingest_external_file([str(path)])
        assert list(db.items()) == records
    finally:
        db.close()


# --------------------------------------------------------------------------- we read what RocksDB writes


def test_reader_reads_tables_rocksdb_wrote(tmp_path: Path) -> None:
    """Ranges stored before our encoder were written by RocksDB's SstFileWriter (user-key index,
    delta-encoded handles, other block cuts): they must stay readable."""
    rocksdict = pytest.importorskip("rocksdict")
    opts = rocksdict.Options(raw_mode=True)
    table = rocksdict.BlockBasedOptions()
    table.set_format_version(sstable.FORMAT_VERSION)
    table.set_block_size(sstable.BLOCK_SIZE)
    opts.set_block_based_table_factory(table)
    opts.set_compression_type(rocksdict.DBCompressionType.none())
    records = tricky_records(random.Random(13), 3000)
    path = str(tmp_path / "r.sst")
    w = rocksdict.SstFileWriter(options=opts)
    w.open(path)
    for k, v in records:
        w[k] = v
    w.finish()
    with open(path, "rb") as f:
        reader = TableReader(f.read())
    assert reader.items() == records
    for k, v in records[::37]:
        assert reader.get(k) == v
