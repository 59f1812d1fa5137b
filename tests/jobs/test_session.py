"""The shared Spark session and the translation of executor-side errors."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import Any

import pytest

from lakemount.errors import Corrupt, NotFound, ObjectNotFound, Unavailable
from lakemount.jobs.session import get_spark, translated

pytestmark = [pytest.mark.spark]


def _fail(kind: str) -> Any:
    if kind == "missing":
        raise ObjectNotFound("mem://x/y")
    if kind == "corrupt":
        raise Corrupt("range r is damaged")
    raise RuntimeError("plain bug")


def test_one_session_per_process(spark: Any) -> None:
    assert get_spark() is spark and get_spark("local[2]") is spark
    assert spark.sparkContext.getConf().get("spark.ui.enabled") == "false"


@pytest.mark.parametrize(("kind", "error", "text"), [
    ("missing", NotFound, "object not found: mem://x/y"),
    ("corrupt", Corrupt, "range r is damaged"),
    ("bug", Unavailable, "Spark job failed"),
])
def test_executor_errors_come_back_as_lakemount_errors(spark: Any, kind: str, error: type[Exception], text: str) -> None:
    with pytest.raises(error, match=text), translated():
        spark.sparkContext.parallelize([kind], 1).map(_fail).collect()


_COUNT = "from lakemount.jobs.session import get_spark; print(get_spark('local[1]').range(7).count())"


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare for a UTS namespace")
def test_spark_starts_where_the_hostname_does_not_resolve() -> None:
    # A container or chroot whose hostname is in no /etc/hosts: the JVM used to
    # die at start-up ("Java gateway process exited"), and with it gc and import.
    name = f"lm-unresolvable-{os.getpid()}"
    script = f"hostname {name} && exec {sys.executable} -c \"{_COUNT}\""
    env = {k: v for k, v in os.environ.items() if k != "SPARK_LOCAL_IP"}
    out = subprocess.run(["unshare", "--uts", "sh", "-c", script], capture_output=True, text=True, timeout=300,
                         env=env, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "7"
