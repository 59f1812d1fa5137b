"""The staging files' bloom filter: built in plain Python for a few keys and with numpy for more, the same bits."""

from __future__ import annotations

import pytest

from lakemount.graveler.staging import bloom
from lakemount.graveler.staging.bloom import Bloom


@pytest.mark.parametrize("n", [0, 1, 5, bloom.SMALL])
def test_a_small_filter_has_the_bits_numpy_would_set(n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    keys = [b"k/%d/%05d" % (n, i * 7919) for i in range(n)]
    small = Bloom.of(keys, n).encode()
    monkeypatch.setattr(bloom, "SMALL", -1)  # every count through numpy
    assert Bloom.of(keys, n).encode() == small
    f = Bloom.decode(small, "test")
    assert all(f.may_contain(k) for k in keys)
