"""The C block decoder agrees with the pure-Python one, and rejects malformed blocks."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakemount.graveler import sstable
from lakemount.graveler.sstable import TableReader, encode_table

c_decoder = pytest.importorskip("lakemount.graveler._sstblock")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.binary(min_size=1, max_size=300), st.binary(max_size=2000)), min_size=1, max_size=400))
def test_c_and_python_decoders_agree(records: list[tuple[bytes, bytes]]) -> None:
    items = sorted(dict(records).items())
    data = encode_table([k for k, _ in items], [v for _, v in items])
    reader = TableReader(data)
    for off, size in reader._handles:  # noqa: SLF001 - white-box comparison of the two decoders
        assert c_decoder.decode_block(data, off, size, 8) == sstable._block_entries_py(data, off, size, 8)
    assert reader.items() == items


def test_malformed_blocks_raise_value_error() -> None:
    rng = random.Random(5)
    for _ in range(2000):
        blob = bytes(rng.randrange(256) for _ in range(rng.randrange(4, 64)))
        try:
            keys, values = c_decoder.decode_block(blob, 0, len(blob), rng.choice((0, 8)))
        except ValueError:
            continue
        assert len(keys) == len(values)
    with pytest.raises(ValueError):
        # one entry claiming 200 key bytes in a 3-byte entry area
        c_decoder.decode_block(bytes([0, 200, 0]) + struct.pack("<II", 0, 1), 0, 11, 0)
    with pytest.raises(ValueError):
        c_decoder.decode_block(b"abc", 0, 100, 0)
