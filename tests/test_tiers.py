"""Test tiers (tests/tiers.py): a test is marked by what it starts without declaring it, and the tripwire fails one
that starts an expensive thing its marks do not say."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import tiers

ROOT = Path(__file__).resolve().parent.parent

FIXTURES = """
import pytest

@pytest.fixture
def spark():
    return "a stand-in: no JVM"

@pytest.fixture
def chromium():
    return "a stand-in: no browser"

@pytest.fixture
def page(chromium):
    return chromium
"""

USES = """
def test_uses_spark(spark):
    pass

def test_uses_a_browser_through_another_fixture(page):
    pass

def test_plain():
    pass
"""

# The module's text says it starts a PostgreSQL cluster (its test only names the program).
SAYS_POSTGRES = """
def test_names_initdb():
    assert "initdb"
"""


def _selected(result: pytest.RunResult) -> list[str]:
    return sorted(line.split("::", 1)[1].split()[0] for line in result.outlines if line.startswith("test_") and "::" in line)


def test_a_test_gets_the_markers_of_the_fixtures_it_uses_without_declaring_them(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(FIXTURES)
    pytester.makepyfile(test_uses=USES, test_says=SAYS_POSTGRES)
    spark = pytester.runpytest("-p", "tests.tiers", "-m", "spark", "-v")
    spark.assert_outcomes(passed=1, deselected=3)
    assert _selected(spark) == ["test_uses_spark"]
    browser = pytester.runpytest("-p", "tests.tiers", "-m", "browser", "-v")
    browser.assert_outcomes(passed=1, deselected=3)
    assert _selected(browser) == ["test_uses_a_browser_through_another_fixture"]
    postgres = pytester.runpytest("-p", "tests.tiers", "-m", "postgres", "-v")
    postgres.assert_outcomes(passed=1, deselected=3)
    assert _selected(postgres) == ["test_names_initdb"]
    fast = pytester.runpytest("-p", "tests.tiers", "-m", "not spark and not browser and not cluster", "-v")
    fast.assert_outcomes(passed=2, deselected=2)
    assert _selected(fast) == ["test_names_initdb", "test_plain"]


# A program named like PostgreSQL's initdb, started by a test whose text does not say so (the name is built).
STARTS_UNMARKED = """
import os
import subprocess

import pytest

PROGRAM = os.path.join(os.environ["TIERS_BIN"], "init" + "db")

def test_starts_it_unmarked():
    subprocess.run([PROGRAM, "-D", "data"], check=True)

@pytest.mark.postgres
def test_starts_it_marked():
    subprocess.run([PROGRAM, "-D", "data"], check=True)

def test_starts_something_else():
    subprocess.run(["true"], check=True)
"""

ASKS_FOR_SPARK = """
import pytest
from lakemount.jobs import session

def test_asks_for_the_spark_context_unmarked(monkeypatch):
    # A context that is already up (a stand-in): asking for it starts no JVM, and still uses Spark.
    monkeypatch.setattr(session, "_context", "running")
    monkeypatch.setattr(session, "_master", "local[2]")
    assert session.get_context() == "running"

@pytest.mark.spark
def test_asks_for_it_marked(monkeypatch):
    monkeypatch.setattr(session, "_context", "running")
    assert session.get_context() == "running"
"""


def test_the_tripwire_fails_a_test_that_starts_an_expensive_thing_unmarked(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    program = bin_dir / ("init" + "db")
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o755)
    monkeypatch.setenv("TIERS_BIN", str(bin_dir))
    pytester.makepyfile(test_starts=STARTS_UNMARKED, test_asks=ASKS_FOR_SPARK)
    result = pytester.runpytest("-p", "tests.tiers", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, failed=2)
    result.stdout.fnmatch_lines([
        "*test_asks_for_the_spark_context_unmarked started spark but is not marked spark*",
        "*test_starts_it_unmarked started postgres but is not marked postgres: give the fixture or module*",
    ])


def test_the_suites_browser_spark_and_cluster_modules_are_tiered() -> None:
    """The module tables on the real suite: what starts a browser, a JVM or the cluster is known without a marker."""
    assert tiers.module_tiers(ROOT / "tests/audit/test_ui.py") >= {"browser"}
    assert tiers.module_tiers(ROOT / "tests/spark_s3a/test_spark_s3a.py") >= {"spark"}
    assert tiers.module_tiers(ROOT / "tests/api/test_import.py") >= {"spark"}
    assert tiers.module_tiers(ROOT / "tests/metastore/test_pg_crash.py") >= {"postgres"}
    assert tiers.module_tiers(ROOT / "tests/cluster/test_harness.py") >= {"cluster"}
    assert tiers.module_tiers(ROOT / "tests/gateway/test_server_mount.py") >= {"fuse"}
    # Modules that only name these things stay in the fast tier.
    assert tiers.module_tiers(ROOT / "tests/test_install.py") == frozenset()
    assert tiers.module_tiers(ROOT / "tests/cli/test_lazy_cli.py") == frozenset()


def test_every_mention_names_an_existing_module_and_a_tier() -> None:
    for rel, named in [*tiers.MENTIONS.items(), *((rel, dict.fromkeys(t, "")) for rel, t in tiers.MODULES.items())]:
        assert os.path.exists(ROOT / rel), rel
        assert set(named) <= set(tiers.SIGNALS), (rel, named)
