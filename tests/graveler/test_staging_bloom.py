"""The staging files' bloom filter: built in C when the extension is built, else in plain Python for a few keys and
with numpy for more, the same bits."""

from __future__ import annotations

import pytest

from lakemount.graveler.staging import bloom
from lakemount.graveler.staging.bloom import Bloom
from tests.calls import python_calls


@pytest.mark.parametrize("n", [0, 1, 5, bloom.SMALL])
def test_a_small_filter_has_the_bits_numpy_would_set(n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    keys = [b"k/%d/%05d" % (n, i * 7919) for i in range(n)]
    monkeypatch.setattr(bloom, "_bloom_bits_c", None)  # the Python paths
    small = Bloom.of(keys, n).encode()
    monkeypatch.setattr(bloom, "SMALL", -1)  # every count through numpy
    assert Bloom.of(keys, n).encode() == small
    f = Bloom.decode(small, "test")
    assert all(f.may_contain(k) for k in keys)


@pytest.mark.skipif(bloom._bloom_bits_c is None, reason="the C extension is not built")
@pytest.mark.parametrize("n", [0, 1, 5, bloom.SMALL, 17, 1000])
def test_the_c_filter_has_the_python_filters_bits(n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    keys = [b"k/%d/%05d" % (n, i * 7919) for i in range(n)]
    native = Bloom.of(keys, n).encode()
    monkeypatch.setattr(bloom, "_bloom_bits_c", None)
    assert Bloom.of(keys, n).encode() == native
    f = Bloom.decode(native, "test")
    assert all(f.may_contain(k) for k in keys)


@pytest.mark.skipif(bloom._bloom_bits_c is None, reason="the C extension is not built")
def test_a_filter_makes_no_python_call_per_key() -> None:
    """A lone writer's flush has one key, a busy process's ~64: built in C, a filter of 16 keys makes as many
    calls as one of a single key (the plain-Python loop made two per key, numpy's path a dozen per filter)."""
    def calls(n: int) -> int:
        keys = [b"k/%05d" % i for i in range(n)]
        return python_calls(lambda: Bloom.of(keys, n))

    assert calls(bloom.SMALL) == calls(1)
    assert calls(64) == calls(1)
