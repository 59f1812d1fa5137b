"""Directory listings of a mounted branch (lakemount/fuse/listing.py): what a stale listing costs to list again."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from lakemount.app import App
from lakemount.catalog.model import Entry
from lakemount.fuse import listing
from lakemount.fuse.core import FileSystem
from tests.fuse.conftest import REPO
from tests.fuse.pathfs import PathFS

MAIN = f"/{REPO}/main"


def test_a_stale_listing_is_listed_again_decoding_only_what_changed(
    fs_factory: Callable[..., FileSystem], app: App, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A directory a copy writes into is listed again every ``head_ttl``: the names whose stored values
    are unchanged keep their decoded children, so a relist decodes only the new and the changed ones --
    and still shows what another process staged meanwhile."""
    fs = fs_factory(head_ttl=1.0)
    clock = [1000.0]
    monkeypatch.setattr(fs.state, "now", lambda: clock[0])
    pfs = PathFS(fs)
    for name in ("a", "b", "c", "d"):
        app.catalog.put(REPO, "main", f"dir/{name}", name.encode())
    assert pfs.listdir(f"{MAIN}/dir") == ["a", "b", "c", "d"]

    decoded: list[bytes] = []
    real = listing.decode_value

    def counted(value: bytes) -> Entry:
        decoded.append(value)
        return real(value)

    monkeypatch.setattr(listing, "decode_value", counted)
    app.catalog.put(REPO, "main", "dir/b", b"changed elsewhere")  # another process's writes, staged
    app.catalog.put(REPO, "main", "dir/e", b"new elsewhere")
    assert pfs.listdir(f"{MAIN}/dir") == ["a", "b", "c", "d"], "the listing is fresh: no relist within head_ttl"
    assert decoded == []

    clock[0] += 1.5  # past head_ttl: the next listing asks the catalog again
    assert pfs.listdir(f"{MAIN}/dir") == ["a", "b", "c", "d", "e"]
    assert len(decoded) == 2, f"decoded {len(decoded)} values: only dir/b (changed) and dir/e (new) were expected"
    assert pfs.lstat(f"{MAIN}/dir/b").size == len(b"changed elsewhere")
    assert pfs.read_file(f"{MAIN}/dir/b") == b"changed elsewhere"
    assert pfs.read_file(f"{MAIN}/dir/a") == b"a"


def test_a_directory_whose_subdirectory_was_emptied_lists_at_the_same_cost(
    fs_factory: Callable[..., FileSystem], app: App, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Spark's output directory after its job: ``_temporary/`` left with thousands of staged deletions (each task
    attempt's files moved out) beside the part files.  Its readdir reads no more of them past 6,000 than past
    400, in as many statements (stop 55: the scan seeks past a run of deletions; before, it read each)."""
    from lakemount.graveler import reads as reads_module
    from lakemount.graveler.model import DIR_MODE
    from tests.catalog._listing import counting

    cat = app.catalog
    value = Entry("data/x", 1, etag="x").value()
    cat.stage_records(REPO, "main", [(f"ds/part-{i:05d}".encode(), value) for i in range(300)])
    marker = Entry("", 0, mode=DIR_MODE).value()  # what S3A's mkdir and the mount's leave
    cat.stage_records(REPO, "main", [(b"ds/_temporary/0/_temporary/", marker)])
    costs = []
    for run, n in enumerate((400, 6000)):
        attempts = [f"ds/_temporary/0/_temporary/attempt_{run}_{i:06d}/part-0".encode() for i in range(n)]
        cat.stage_records(REPO, "main", [(k, value) for k in attempts])
        cat.stage_records(REPO, "main", [(k, None) for k in attempts])
        pfs = PathFS(fs_factory())  # a fresh core: nothing listed before
        with counting(cat, monkeypatch) as seen:
            names = pfs.listdir(f"{MAIN}/ds")
        assert names == ["_temporary", *(f"part-{i:05d}" for i in range(300))]
        costs.append((seen.calls, seen.deletions))
    (calls_few, _), (calls_many, read_many) = costs
    assert read_many <= reads_module.SEEK_AFTER + reads_module.SCAN_PAGE_FIRST, costs
    assert calls_many <= calls_few + 2, costs
