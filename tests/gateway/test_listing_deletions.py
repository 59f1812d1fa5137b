"""The gateway's ListObjectsV2 past staged deletions (stop 55): S3A's job commit lists a dataset's root with
max-keys 1000 and delimiter ``/`` past every task attempt's files moved out of ``_temporary/``; the page costs
the same statements and reads no more deletions past 6,000 of them than past 400 (a run longer than the one a scan reads before it seeks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakemount.app import App
from lakemount.config import load
from lakemount.gateway.buckets import Target
from lakemount.gateway.listing import list_page
from lakemount.graveler import reads as reads_module
from lakemount.graveler.model import Entry
from tests.catalog._listing import counting

R = "job"


def page_costs(home: Path, deletions: int, monkeypatch: pytest.MonkeyPatch) -> dict[str, tuple[int, int]]:
    """(statements, deletions read) of ListObjectsV2 of ``main/ds/`` (a bucket whose first key segment names
    the ref), max-keys 1000, with and without the delimiter."""
    cat = App(load(env={"LAKEMOUNT_HOME": str(home), "LAKEMOUNT_CACHE_DISK_BYTES": "0"})).catalog
    cat.create_repository(R)
    value = Entry("data/x", 1, etag="x").value()
    cat.stage_records(R, "main", [(f"ds/part-{i:05d}".encode(), value) for i in range(0, 1200, 2)])
    cat.commit(R, "main", "base")
    attempts = [f"ds/_temporary/0/_temporary/attempt_{i:06d}/part-0".encode() for i in range(deletions)]
    cat.stage_records(R, "main", [(b"ds/_temporary/0/_temporary/", value), *((k, value) for k in attempts)])
    cat.stage_records(R, "main", [*((f"ds/part-{i:05d}".encode(), value) for i in range(1, 1200, 2)), *((k, None) for k in attempts)])
    target = Target("bucket", cat.kept_repository(R), None)
    out: dict[str, tuple[int, int]] = {}
    for delimiter in ("/", ""):
        list_page(cat, target, "main/ds/", delimiter, "", 1000)  # the branch and the tree are known to the process
        with counting(cat, monkeypatch) as seen:
            page = list_page(cat, target, "main/ds/", delimiter, "", 1000)
        first = "main/ds/_temporary/" if delimiter else "main/ds/_temporary/0/_temporary/"
        assert [k for k, _ in page.items] == [first, *(f"main/ds/part-{i:05d}" for i in range(999))]
        assert page.truncated and (page.items[0][1] is None) == bool(delimiter)
        out[delimiter] = (seen.calls, seen.deletions)
    return out


def test_list_objects_v2_costs_the_same_past_thousands_of_staged_deletions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    few = page_costs(tmp_path / "few", 400, monkeypatch)
    many = page_costs(tmp_path / "many", 6000, monkeypatch)
    for delimiter in ("/", ""):
        (calls_few, _), (calls_many, read_many) = few[delimiter], many[delimiter]
        assert read_many <= reads_module.SEEK_AFTER + reads_module.SCAN_PAGE_FIRST, (delimiter, few, many)
        assert calls_many <= calls_few + 2, (delimiter, few, many)
