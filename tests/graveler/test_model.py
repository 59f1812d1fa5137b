"""Entry decoding: the memo of decoded values returns what a fresh decode would, stays bounded, and never keeps garbage."""

from __future__ import annotations

import pytest

from lakemount.errors import Corrupt
from lakemount.graveler import model
from lakemount.graveler.model import DECODED_MEMO, Entry, decode_value


def _value(i: int) -> bytes:
    return Entry(f"data/{i:064x}", i, f"{i:032x}", i * 1000, "text/csv", (("owner", str(i)),)).value()


def test_a_memoised_decoding_equals_a_fresh_one() -> None:
    model._decoded.clear()
    v = _value(7)
    first = decode_value(v)
    again = decode_value(bytes(v))  # equal bytes, another object: the memo answers
    assert again is first
    assert first == model.decode_entry(v[model.IDENTITY_LEN :])
    assert first.metadata == (("owner", "7"),) and first.size == 7


def test_the_memo_is_bounded() -> None:
    model._decoded.clear()
    for i in range(DECODED_MEMO + 10):
        assert decode_value(_value(i)).size == i
        assert len(model._decoded) <= DECODED_MEMO
    assert decode_value(_value(3)).size == 3  # started over, still right


def test_undecodable_values_raise_every_time_and_are_not_kept() -> None:
    model._decoded.clear()
    bad = b"\x00" * model.IDENTITY_LEN + b"\x01\xc1garbage"
    for _ in range(2):
        with pytest.raises(Corrupt):
            decode_value(bad)
    assert bad not in model._decoded
