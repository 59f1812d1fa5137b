"""The state machines' example budget (tests/budget.py): full counts unless scripts/test.sh --fast asked for fewer."""

from __future__ import annotations

import pytest

from tests import budget


def test_the_full_count_unless_the_fast_tier_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LAKEMOUNT_TEST_TIER", raising=False)
    assert [budget.examples(n) for n in (3, 25, 35, 40, 400)] == [3, 25, 35, 40, 400]
    monkeypatch.setenv("LAKEMOUNT_TEST_TIER", "full")
    assert budget.examples(40) == 40
    monkeypatch.setenv("LAKEMOUNT_TEST_TIER", "fast")
    assert [budget.examples(n) for n in (3, 25, 35, 40, 400)] == [3, 6, 8, 10, 100]
