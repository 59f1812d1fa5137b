"""Catalog: content-addressed data with dedup, touch on reuse, listings with delimiters."""

from __future__ import annotations

import os
import time
from pathlib import Path

from lakemount.app import App
from lakemount.config import load


def make_app(tmp_path: Path) -> App:
    return App(load(env={"LAKEMOUNT_HOME": str(tmp_path / "home"), "LAKEMOUNT_CACHE_DISK_BYTES": "0"}))


def test_same_bytes_are_stored_once_and_touched_on_reuse(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    cat = app.catalog
    cat.create_repository("dedup")
    e1 = cat.put("dedup", "main", "a.bin", b"same bytes")
    repo = cat.repository("dedup")
    path = app.blockstore.adapter_for(cat.physical_url(repo, e1.address)).path_of(cat.physical_url(repo, e1.address))  # type: ignore[attr-defined]
    os.utime(path, (1000, 1000))
    e2 = cat.put("dedup", "main", "b/c.bin", b"same bytes")
    assert e1.address == e2.address and e1.etag == e2.etag
    assert os.stat(path).st_mtime > time.time() - 60, "reuse must refresh the mtime so a running GC keeps it"
    data_files = [f for _r, _d, fs in os.walk(tmp_path / "home" / "data" / "dedup" / "data") for f in fs]
    assert len(data_files) == 1


def test_delimiter_listing_with_markers_and_pagination(tmp_path: Path) -> None:
    cat = make_app(tmp_path).catalog
    cat.create_repository("lst")
    for p in ("a/1", "a/2", "b/x/1", "c", "d/"):
        cat.put("lst", "main", p, p.encode())
    top = [(x.path, x.is_prefix) for x in cat.list("lst", "main", "", delimiter="/")]
    assert top == [("a/", True), ("b/", True), ("c", False), ("d/", True)]
    page1 = [x.path for x in cat.list("lst", "main", "", delimiter="/", limit=2)]
    page2 = [x.path for x in cat.list("lst", "main", "", delimiter="/", after=page1[-1])]
    assert page1 + page2 == ["a/", "b/", "c", "d/"]
    assert [x.path for x in cat.list("lst", "main", "a/")] == ["a/1", "a/2"]


def test_apply_if_is_a_compare_and_set_that_one_of_racing_writers_wins(tmp_path: Path) -> None:
    """``apply_if`` stages only over the entry the caller read: from staging, from history after a
    commit, absent; of eight threads expecting the same entry exactly one stages."""
    import threading

    import pytest

    from lakemount.errors import PreconditionFailed

    cat = make_app(tmp_path).catalog
    cat.create_repository("cas")
    cat.apply_if("cas", "main", [("t/ptr", cat.put("cas", "main", "x", b"0"))], [("t/ptr", None)])
    first = cat.stat("cas", "main", "t/ptr")
    with pytest.raises(PreconditionFailed, match="t/ptr"):
        cat.apply_if("cas", "main", [("t/ptr", first)], [("t/ptr", None)])  # it exists now
    cat.commit("cas", "main", "history")  # the expected entry now lies in the committed tree
    second = cat.put("cas", "main", "y", b"1")
    cat.apply_if("cas", "main", [("t/ptr", second)], [("t/ptr", first)])
    assert cat.stat("cas", "main", "t/ptr") == second
    with pytest.raises(PreconditionFailed):
        cat.apply_if("cas", "main", [("t/ptr", first)], [("t/ptr", first)])  # stale expectation

    wins: list[int] = []
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def writer(i: int) -> None:
        mine = cat.put("cas", "main", f"w{i}", str(i).encode())
        start.wait()
        try:
            cat.apply_if("cas", "main", [("t/ptr", mine)], [("t/ptr", second)])
            wins.append(i)
        except PreconditionFailed:
            pass
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(wins) == 1, wins
    assert cat.stat("cas", "main", "t/ptr").address == cat.stat("cas", "main", f"w{wins[0]}").address
