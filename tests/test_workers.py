"""The parallel workers' units (tests/workers.py): a module whole on one worker, the Spark tests together."""

from __future__ import annotations

import pytest

from tests.workers import SHARED, scope_of

WHO = """
import os

def record(name):
    with open(os.path.join({out!r}, name + "-" + os.environ["PYTEST_XDIST_WORKER"]), "w"):
        pass
"""

MODULE = """
import pytest
from record import record

@pytest.mark.parametrize("i", range(6))
def test_{name}(i):
    record("{name}-" + str(i))
"""


def test_a_unit_is_its_module_or_its_shared_directory() -> None:
    assert scope_of("tests/api/test_http.py::test_x[a]") == "tests/api/test_http.py"
    assert scope_of("tests/graveler/test_state_machine.py::TestGravelerModel::runTest") == "tests/graveler/test_state_machine.py"
    assert SHARED["tests/jobs/"] == SHARED["tests/fuse/test_spark_mount.py"] == "spark"  # one JVM
    assert scope_of("tests/jobs/test_import.py::test_y") == scope_of("tests/jobs/test_gc.py::test_z") == "spark"
    assert scope_of("tests/fuse/test_spark_mount.py::test_w") == "spark"
    assert scope_of("tests/fuse/test_mount.py::test_w") == "tests/fuse/test_mount.py"


def test_each_module_runs_whole_on_one_worker(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    out = pytester.mkdir("out")
    pytester.makepyfile(record=WHO.format(out=str(out)))
    pytester.makepyfile(**{f"test_{name}": MODULE.format(name=name) for name in ("a", "b", "c", "d")})
    # xdist's default (--dist load) would spread each module's six tests over both workers
    # Only the plugins under test (xdist and tests.workers): the run and each worker spent ~3 s of CPU importing the
    # others installed (schemathesis, hypothesis, the browser driver...), which decide nothing here.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    result = pytester.runpytest_subprocess("-p", "xdist.plugin", "-p", "tests.workers", "-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=24)
    ran = [p.name.split("-") for p in out.iterdir()]
    assert len(ran) == 24
    workers = {name: {w for n, _, w in ran if n == name} for name in "abcd"}
    assert all(len(w) == 1 for w in workers.values()), workers
    assert len(set().union(*workers.values())) == 2, workers  # and both workers had work
