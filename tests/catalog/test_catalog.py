"""Catalog: content-addressed data with dedup, touch on reuse, listings with delimiters."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

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


def test_put_if_absent_is_decided_where_the_entry_is_staged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``stage_upload(if_absent=True)`` (``If-None-Match: *``): racers that all read the path as absent
    (the early read is made to see nothing, as when every racer reads before any writes) still
    stage exactly one entry; the rest get ``ObjectExists``."""
    import threading

    from lakemount.catalog.model import upload_entry
    from lakemount.errors import ObjectExists

    cat = make_app(tmp_path).catalog
    cat.create_repository("pia")
    entries = [cat.put("pia", "main", f"src{i}", str(i).encode()) for i in range(6)]
    monkeypatch.setattr(cat, "get_optional", lambda *a, **k: None)
    wins: list[int] = []
    refused: list[int] = []
    errors: list[BaseException] = []
    start = threading.Barrier(len(entries))

    def racer(i: int) -> None:
        e = entries[i]
        mine = upload_entry(e.address, e.size, e.etag, "obj", "", ())
        start.wait()
        try:
            cat.stage_upload("pia", "main", "obj", mine, if_absent=True)
            wins.append(i)
        except ObjectExists:
            refused.append(i)
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(len(entries))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    assert len(wins) == 1 and len(refused) == len(entries) - 1
    monkeypatch.undo()
    assert cat.read(cat.repository("pia"), cat.stat("pia", "main", "obj")) == str(wins[0]).encode()


def test_a_short_listing_reads_past_no_staged_deletion_and_lists_what_a_scan_lists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """S3A's directory probe (max-keys 1-2 under ``_temporary/``, after every task's files were moved out) must not
    read each staged deletion: a listing of at most ``FEW`` results walks with ``first``, and lists as a scan does."""
    import random

    from lakemount.catalog import catalog as catalog_module

    cat = make_app(tmp_path).catalog
    cat.create_repository("few")
    rnd = random.Random(54)
    committed = [f"t/{d}/{n:03d}" for d in "abc" for n in range(0, 30, 3)]
    for p in committed:
        cat.put("few", "main", p, p.encode())
    cat.commit("few", "main", "base")
    for p in ("t/", "t/b/", *[f"t/{d}/{n:03d}" for d in "abcd" for n in range(40) if rnd.random() < 0.5]):
        cat.put("few", "main", p, p.encode())
    gone = [p for p in sorted({*committed, *(x.path for x in cat.list("few", "main", "t/"))}) if rnd.random() < 0.7]
    for p in gone:
        cat.delete("few", "main", p)
    cases = [(prefix, delim, after) for prefix in ("", "t/", "t/a/", "t/b", "u/") for delim in ("", "/")
             for after in ("", "t/a/", "t/b/017", "t/c/")]
    want = {(c, n): [(x.path, x.is_prefix) for x in islice_list(cat, *c, limit=None, n=n)] for c in cases for n in (1, 2, 3)}
    scans: list[int] = []
    real = cat.graveler.scan_entries
    monkeypatch.setattr(cat.graveler, "scan_entries", lambda *a, **k: scans.append(1) or real(*a, **k))
    for (c, n), expected in want.items():
        got = [(x.path, x.is_prefix) for x in islice_list(cat, *c, limit=n, n=n)]
        assert got == expected, (c, n)
    assert not scans, "a listing of at most FEW results scanned the staged deletions"
    assert catalog_module.FEW >= 3  # S3A's probes ask for max-keys 1 or 2, and the gateway for one more


def islice_list(cat, prefix: str, delimiter: str, after: str, *, limit: int | None, n: int) -> list:  # type: ignore[no-untyped-def]
    """The first ``n`` of ``cat.list`` (asking for ``limit`` results)."""
    from itertools import islice

    return list(islice(cat.list("few", "main", prefix, delimiter=delimiter, after=after, limit=limit), n))
