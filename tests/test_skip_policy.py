"""The skip policy (tests/skip_policy.py): under CI=true a skip fails the run, xfail and the allow-list excepted."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import skip_policy

ROOT = Path(__file__).resolve().parent.parent

SKIPPING = """
import pytest

@pytest.fixture
def needs_thing():
    pytest.skip("no thing here")

def test_passes():
    assert True

def test_skips():
    pytest.skip("no /dev/fuse")

@pytest.mark.skipif(True, reason="not root")
def test_skipif():
    pass

def test_importorskip():
    pytest.importorskip("lakemount_no_such_module")

def test_fixture_skips(needs_thing):
    pass

@pytest.mark.xfail(reason="known", strict=True)
def test_xfail():
    assert False
"""

MODULE_SKIP = """
import pytest

pytest.importorskip("lakemount_no_such_module")

def test_never_runs():
    pass
"""

PASSING = """
def test_passes():
    pass
"""


@pytest.mark.parametrize("ci", ["true", "1", "yes"])
def test_under_ci_every_kind_of_skip_fails_the_run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str) -> None:
    monkeypatch.setenv("CI", ci)
    pytester.makepyfile(test_some=SKIPPING)
    result = pytester.runpytest("-p", "tests.skip_policy", "-rf")
    # A skip in setup (a skipif mark, a fixture) becomes an error, one in the test's body a failure.
    result.assert_outcomes(passed=1, failed=2, errors=2, xfailed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*test_skips*skipped under CI (no /dev/fuse)*"])
    result.stdout.fnmatch_lines(["*test_importorskip*skipped under CI (could not import 'lakemount_no_such_module'*"])
    result.stdout.fnmatch_lines(["*skips refused under CI*", "*test_some.py::test_skipif: not root"])


@pytest.mark.parametrize("ci", [None, "", "false", "0", "no"])
def test_outside_ci_skips_are_only_reported(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str | None) -> None:
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    pytester.makepyfile(test_some=SKIPPING)
    result = pytester.runpytest("-p", "tests.skip_policy")
    result.assert_outcomes(passed=1, skipped=4, xfailed=1)
    assert result.ret == pytest.ExitCode.OK
    assert "skips refused under CI" not in result.stdout.str()


def test_allowed_skips_pass_under_ci_and_need_a_reason(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    pytester.makepyfile(test_some=SKIPPING)
    allowed = {
        "test_some.py::test_skips": "the reason",
        "test_some.py::test_skipif": "the reason",
        "test_some.py::test_importorskip": "the reason",
        "test_some.py::test_fixture_skips": "the reason",
    }
    monkeypatch.setattr(skip_policy, "ALLOWED_SKIPS", allowed)
    result = pytester.runpytest("-p", "tests.skip_policy")
    result.assert_outcomes(passed=1, skipped=4, xfailed=1)
    assert result.ret == pytest.ExitCode.OK
    monkeypatch.setattr(skip_policy, "ALLOWED_SKIPS", {"test_some.py::test_skips": "  "})
    result = pytester.runpytest("-p", "tests.skip_policy")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "ALLOWED_SKIPS['test_some.py::test_skips'] needs a reason" in result.stderr.str()


def test_a_parametrized_test_is_allowed_by_its_base_id() -> None:
    saved = dict(skip_policy.ALLOWED_SKIPS)
    try:
        skip_policy.ALLOWED_SKIPS.clear()
        skip_policy.ALLOWED_SKIPS["t.py::test_x"] = "why"
        assert skip_policy.allowed("t.py::test_x[a-1]") and skip_policy.allowed("t.py::test_x")
        assert not skip_policy.allowed("t.py::test_xy") and not skip_policy.allowed("t.py::test_y[a]")
    finally:
        skip_policy.ALLOWED_SKIPS.clear()
        skip_policy.ALLOWED_SKIPS.update(saved)


def test_the_allow_list_is_empty() -> None:
    # Every entry is a claim CI does not check; adding one is a decision, and this test makes it visible.
    assert skip_policy.ALLOWED_SKIPS == {}


# The first case runs with every installed plugin, as CI's run does; the others load only the two the policy needs
# (itself and xdist): each process (a worker too) spent ~3 s of CPU importing the others (schemathesis, hypothesis,
# the browser driver...), 40 s of wall a case on the loaded 2-core machine (docs/TESTING.md, "The fast tier's cuts").
SUBPROCESS_CASES = [("true", 1, [], True), (None, 0, [], False), ("true", 1, ["-p", "xdist.plugin", "-n", "2"], False)]


@pytest.mark.parametrize("ci, status, workers, autoload", SUBPROCESS_CASES)
def test_a_module_skipped_at_collection_fails_a_real_ci_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str | None, status: int, workers: list[str],
    autoload: bool,
) -> None:
    """In a separate pytest process, as .ci/run starts it: the exit status is what CI sees (also with workers)."""
    if not autoload:
        monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    pytester.makepyfile(test_mod=MODULE_SKIP, test_ok=PASSING)
    result = pytester.runpytest_subprocess("-p", "tests.skip_policy", *workers)
    result.assert_outcomes(passed=1, skipped=1)
    assert result.ret == status
    refused = "skips refused under CI" in result.stdout.str()
    assert refused == (ci is not None)
    if refused:
        result.stdout.fnmatch_lines(["test_mod.py: could not import 'lakemount_no_such_module'*"])
