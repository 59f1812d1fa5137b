"""The run's one browser (tests/chromium.py): the tests that use it run last, so none runs while it lives."""

from __future__ import annotations

import pytest

FAKE = """
import pytest

@pytest.fixture(scope="session")
def chromium():
    return "a stand-in: no browser"

@pytest.fixture
def page(chromium):
    return chromium
"""

FIRST = """
def test_a_page(page):
    pass

def test_plain_first():
    pass
"""

SECOND = """
def test_the_browser(chromium):
    pass

def test_plain_second():
    pass
"""


def test_the_tests_that_use_the_browser_run_last_in_their_order(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(FAKE)
    pytester.makepyfile(test_first=FIRST, test_second=SECOND)
    result = pytester.runpytest("-p", "tests.chromium", "-v")
    result.assert_outcomes(passed=4)
    ran = [line.split()[0] for line in result.outlines if "::test_" in line and "PASSED" in line]
    assert ran == [
        "test_first.py::test_plain_first",
        "test_second.py::test_plain_second",
        "test_first.py::test_a_page",
        "test_second.py::test_the_browser",
    ]
