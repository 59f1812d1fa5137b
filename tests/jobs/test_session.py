"""The shared Spark session and the translation of executor-side errors."""

from __future__ import annotations

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
