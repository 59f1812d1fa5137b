"""tests/cpu.py: each test's CPU with its children's, the commands it started, and the report over them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests import cpu


def test_commands_are_named_by_program_and_verb() -> None:
    assert cpu._command([sys.executable, "-m", "lakemount.cli.main", "serve", "--listen", "x"]) == "lakemount.cli.main serve"
    assert cpu._command(["/usr/bin/git", "rev-parse", "HEAD"]) == "git rev-parse HEAD"
    assert cpu._command(["git", "-C", "/tmp/x", "commit"]) == "git"  # an option ends the verb
    assert cpu._command(["/usr/bin/sort", "-o", "/tmp/d"]) == "sort"
    assert cpu._command([sys.executable, "-c", "print(1)"]).endswith(" -c")
    assert cpu._command("ls") == "ls"


def test_a_run_records_its_childrens_cpu_and_starts_and_the_report_sums_them(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test that burns CPU in a child process is charged for it (children), one that burns none is not."""
    pytester.makepyfile(
        test_burn="""
        import subprocess, sys

        def test_child_burns():
            subprocess.run([sys.executable, "-c", "sum(i * i for i in range(3_000_000))"], check=True)

        def test_idle():
            pass
        """
    )
    target = tmp_path / "cpu"
    monkeypatch.setenv("LAKEMOUNT_TEST_CPU", str(target))
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # the plugin under test only (~3 s of CPU less)
    result = pytester.runpytest_subprocess("-p", "tests.cpu", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    lines = {line["nodeid"]: line for line in cpu.read([f"{target}.main"])}
    burn, idle = lines["test_burn.py::test_child_burns"], lines["test_burn.py::test_idle"]
    assert burn["children"] > 0.05 and burn["started"] == [cpu._command([sys.executable, "-c", ""])], burn
    assert idle["children"] == 0 and idle["started"] == [], idle
    report = cpu.report(list(lines.values()), top=5)
    assert "2 tests:" in report and "1 processes started" in report
    assert f"| `{cpu._command([sys.executable, '-c', ''])}` | 1 |" in report
    assert json.loads((target.parent / "cpu.main").read_text().splitlines()[0])["nodeid"].startswith("test_burn.py::")
