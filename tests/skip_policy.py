"""Under CI a skipped test is a failed test: a pytest plugin (loaded by tests/conftest.py).

Every headline test has a way out (no /dev/fuse, no Java, no git, no sst_dump,
no PostgreSQL, not root, a C extension that did not build...), so a green run
proves the claims only if nothing was skipped.  When ``CI`` is set to a true
value (``.ci/run`` sets ``CI=true``):

- a test that skips (``pytest.skip``, a ``skipif`` mark, ``pytest.importorskip``,
  a fixture that skips) is reported as **failed** (an *error* when the skip
  came in setup, as for marks and fixtures), with the skip's reason;
- a module or class skipped at collection (a module-level ``importorskip``)
  stays in the report as skipped, is listed under "skips refused under CI",
  and the run exits with status 1 (pytest's "tests failed");
- expected failures (``xfail``) are unaffected;
- the only exceptions are the node ids in ``ALLOWED_SKIPS``, each with the
  reason it may skip on CI's machine (a test id, or a parametrized test's id
  without its ``[...]`` part).

Outside CI (``CI`` unset, empty, ``0``, ``false`` or ``no``) skips are only
reported (``-ra``), which is how the suite runs where FUSE or root is missing.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

# node id -> why it may skip under CI.  Keep it empty: every entry is a claim CI does not check.
ALLOWED_SKIPS: dict[str, str] = {}

_REFUSED_KEY = pytest.StashKey[list[tuple[str, str]]]()


def under_ci(environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """Whether skips fail the run: ``CI`` is set to anything but empty, ``0``, ``false`` or ``no``."""
    return environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def allowed(nodeid: str) -> bool:
    """Whether ``nodeid`` (or, for a parametrized test, its id without the parameters) may skip under CI."""
    return nodeid in ALLOWED_SKIPS or nodeid.split("[", 1)[0] in ALLOWED_SKIPS


def _reason(longrepr: Any) -> str:
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def pytest_configure(config: pytest.Config) -> None:
    for nodeid, why in ALLOWED_SKIPS.items():
        if not why.strip():
            raise pytest.UsageError(f"tests/skip_policy.py: ALLOWED_SKIPS[{nodeid!r}] needs a reason")
    config.stash[_REFUSED_KEY] = []
    config.pluginmanager.register(_Collection(config), "skip_policy_collection")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Turn a test's skip into a failure under CI (xfail and allowed ids excepted)."""
    rep = yield
    if rep.skipped and not hasattr(rep, "wasxfail") and under_ci() and not allowed(item.nodeid):
        reason = _reason(rep.longrepr)
        rep.outcome = "failed"
        rep.longrepr = (
            f"skipped under CI ({reason}): CI=true refuses skips; install what is missing with scripts/install.sh --test, "
            "or allow it in tests/skip_policy.py"
        )
        item.config.stash[_REFUSED_KEY].append((item.nodeid, reason))
    return rep


class _Collection:
    """Records a module or class skipped at collection under CI (the run goes on, and fails at the end).

    ``pytest_collectreport``, not the collector's hook: with xdist's workers (``-n``) the collection happens in the
    workers, and the run's process, whose exit status counts, hears of a skipped module only through this hook.
    A plugin object so that the hook, which is given no config, records into its own run's.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.skipped and under_ci() and not allowed(report.nodeid):
            self.config.stash[_REFUSED_KEY].append((report.nodeid, _reason(report.longrepr)))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    refused = config.stash.get(_REFUSED_KEY, [])
    if refused:
        terminalreporter.section("skips refused under CI (tests/skip_policy.py)", red=True)
        for nodeid, reason in refused:
            terminalreporter.line(f"{nodeid}: {reason}")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if session.config.stash.get(_REFUSED_KEY, []) and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
