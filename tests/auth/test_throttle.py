"""The login backoff (``auth/throttle.py``) on an injected clock: the tests count decisions, they never wait."""

from __future__ import annotations

from lakemount.auth import throttle
from lakemount.auth.throttle import ADDRESS_FREE, KEY_FREE, MAX_DELAY, WINDOW, LoginThrottle, delay_after


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_key_id_slows_down_exponentially_past_its_free_failures_up_to_the_cap() -> None:
    clock = Clock()
    t = LoginThrottle(clock=clock)
    waits = []
    for _ in range(KEY_FREE + 6):
        waits.append(t.wait("AKIAX", "10.0.0.1"))
        assert waits[-1] == 0  # each attempt comes once the last wait is over
        t.failed("AKIAX", "10.0.0.1")
        waits.append(t.wait("AKIAX", "10.0.0.1"))
        clock.now += waits[-1]
    after_each = waits[1::2]
    assert after_each == [0] * KEY_FREE + [1, 2, 4, 8, 8, 8]
    assert max(after_each) == MAX_DELAY
    # Another key id from another address is not slowed by it.
    assert t.wait("AKIAY", "10.0.0.2") == 0


def test_the_wait_counts_down_and_a_refused_attempt_does_not_count() -> None:
    clock = Clock()
    t = LoginThrottle(clock=clock)
    for _ in range(KEY_FREE + 3):
        clock.now += 10
        t.failed("AKIAX", "")
    assert t.wait("AKIAX", "") == 4
    clock.now += 2.5
    assert t.wait("AKIAX", "") == 2  # whole seconds, rounded up
    clock.now += 1.5
    assert t.wait("AKIAX", "") == 0


def test_a_success_resets_the_key_id_and_the_address() -> None:
    clock = Clock()
    t = LoginThrottle(clock=clock)
    for _ in range(KEY_FREE + 1):
        t.failed("AKIAX", "10.0.0.1")
    assert t.wait("AKIAX", "10.0.0.9") == 1
    clock.now += 1
    t.succeeded("AKIAX", "10.0.0.1")
    t.failed("AKIAX", "10.0.0.1")
    assert t.wait("AKIAX", "10.0.0.1") == 0  # counting starts again


def test_failures_are_forgotten_after_the_window() -> None:
    clock = Clock()
    t = LoginThrottle(clock=clock)
    for _ in range(KEY_FREE + 3):
        t.failed("AKIAX", "")
    assert t.wait("AKIAX", "") == 4
    clock.now += WINDOW + 1
    assert t.wait("AKIAX", "") == 0
    t.failed("AKIAX", "")
    assert t.wait("AKIAX", "") == 0  # one failure in a fresh window is free


def test_an_address_spraying_key_ids_slows_down_after_more_free_failures() -> None:
    clock = Clock()
    t = LoginThrottle(clock=clock)
    for i in range(ADDRESS_FREE):
        t.failed(f"AKIA{i}", "10.0.0.1")
    assert t.wait("AKIANEW", "10.0.0.1") == 0
    t.failed("AKIAONE-MORE", "10.0.0.1")
    assert t.wait("AKIANEW", "10.0.0.1") == 1  # any key id from that address
    assert t.wait("AKIANEW", "10.0.0.2") == 0  # the same key id from elsewhere


def test_the_state_is_bounded_least_recently_failed_forgotten_first() -> None:
    clock = Clock()
    t = LoginThrottle(clock=clock, max_entries=3)
    for _ in range(KEY_FREE + 1):
        t.failed("AKIAOLD", "")
    for name in ("A", "B", "C"):
        t.failed(name, "")
    assert t.wait("AKIAOLD", "") == 0  # pushed out by three newer key ids


def test_delays() -> None:
    assert [delay_after(n, 2) for n in range(1, 9)] == [0, 0, 1, 2, 4, 8, 8, 8]
    assert throttle.BASE_DELAY == 1.0
