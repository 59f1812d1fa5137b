"""FlakyAdapter: scripted and seeded random faults, and each fault kind's effect."""

from __future__ import annotations

import time

import pytest

from lakemount.block.flaky import Fault, FaultKind, FlakyAdapter
from lakemount.block.memory import MemoryAdapter
from lakemount.errors import InvalidArgument, Unavailable

URL = "mem://t/k"


def test_fail_next_n_calls_of_one_op() -> None:
    flaky = FlakyAdapter(MemoryAdapter())
    flaky.fail_next("put", 2)
    for _ in range(2):
        with pytest.raises(Unavailable):
            flaky.put(URL, b"x")
    assert not flaky.exists(URL)  # a failed-before put has no effect
    flaky.put(URL, b"x")
    assert flaky.get(URL) == b"x"
    assert flaky.injected["put"] == 2
    assert flaky.calls["put"] == 3
    assert flaky.injected["get"] == 0


def test_error_after_applies_the_write() -> None:
    flaky = FlakyAdapter(MemoryAdapter())
    flaky.fail_next("put", kind=FaultKind.ERROR_AFTER)
    with pytest.raises(Unavailable):
        flaky.put(URL, b"x")
    assert flaky.get(URL) == b"x"


def test_slow_and_timeout_faults_delay() -> None:
    flaky = FlakyAdapter(MemoryAdapter())
    flaky.put(URL, b"x")
    flaky.fail_next("get", kind=FaultKind.SLOW, delay=0.05)
    t0 = time.monotonic()
    assert flaky.get(URL) == b"x"
    assert time.monotonic() - t0 >= 0.05
    flaky.fail_next("get", kind=FaultKind.TIMEOUT, delay=0.05)
    t0 = time.monotonic()
    with pytest.raises(Unavailable, match="timed out"):
        flaky.get(URL)
    assert time.monotonic() - t0 >= 0.05


def _outcomes(seed: int) -> list[bool]:
    flaky = FlakyAdapter(MemoryAdapter(), seed=seed, probability=0.3)
    out = []
    for i in range(200):
        try:
            flaky.put(f"mem://t/{i}", b"x")
            out.append(True)
        except Unavailable:
            out.append(False)
    return out


def test_random_faults_are_deterministic_per_seed() -> None:
    a, b, c = _outcomes(1), _outcomes(1), _outcomes(2)
    assert a == b
    assert a != c
    assert 30 < a.count(False) < 90


def test_random_faults_only_on_chosen_ops() -> None:
    flaky = FlakyAdapter(MemoryAdapter(), probability=1.0, ops=["get"], random_fault=Fault(FaultKind.ERROR))
    flaky.put(URL, b"x")
    with pytest.raises(Unavailable):
        flaky.get(URL)
    assert [i.url for i in flaky.list("mem://t/")] == [URL]
    flaky.heal()
    assert flaky.get(URL) == b"x"


def test_list_fault_strikes_at_call() -> None:
    flaky = FlakyAdapter(MemoryAdapter())
    flaky.fail_next("list")
    with pytest.raises(Unavailable):
        flaky.list("mem://t/")


def test_unknown_op_and_bad_probability_rejected() -> None:
    with pytest.raises(InvalidArgument):
        FlakyAdapter(MemoryAdapter()).fail_next("frobnicate")
    with pytest.raises(InvalidArgument):
        FlakyAdapter(MemoryAdapter(), probability=1.5)
