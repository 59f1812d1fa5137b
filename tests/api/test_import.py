"""Import through the lakefs SDK's ImportManager: start, poll status to the commit, and cancel."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from lakefs.exceptions import ImportManagerException

from tests.api.conftest import Served, running

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A server whose imports may read the test run's temporary directories (where each test makes its source)."""
    roots = str(tmp_path_factory.getbasetemp())
    with running(tmp_path_factory.mktemp("api"), env={"LAKEMOUNT_BLOCKSTORE_LOCAL_IMPORT_ROOTS": roots}) as s:
        yield s


def source_dir(tmp_path: Path, n: int) -> Path:
    src = tmp_path / "source"
    for i in range(n):
        p = src / f"d{i % 3}" / f"f{i:03d}.txt"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(f"file {i}\n".encode())
    return src


def test_import_commits_objects_in_place(repo: Any, tmp_path: Path) -> None:
    src = source_dir(tmp_path, 30)
    main = repo.branch("main")
    mgr = main.import_data(commit_message="import thirty", metadata={"from": "test"})
    status = mgr.prefix(f"local://{src}/", destination="imported/").run(poll_interval=timedelta(seconds=0.5))
    assert status.completed and status.error is None
    assert status.ingested_objects == 30
    assert status.commit.message == "import thirty"
    assert main.head.id == status.commit.id
    paths = [o.path for o in main.objects(prefix="imported/")]
    assert len(paths) == 30 and paths[0] == "imported/d0/f000.txt"
    assert main.object("imported/d1/f001.txt").reader().read() == b"file 1\n"
    assert main.object("imported/d1/f001.txt").stat().physical_address == f"local://{src}/d1/f001.txt"


def test_import_cancel_and_refusals(repo: Any, tmp_path: Path) -> None:
    src = source_dir(tmp_path, 5)
    main = repo.branch("main")
    head = main.head.id
    mgr = main.import_data(commit_message="never").prefix(f"local://{src}/", destination="x/")
    mgr.start()
    mgr.cancel()
    status = mgr.status()
    assert not status.completed and status.error is not None
    assert status.error.message == "Canceled"  # lakeFS's word
    assert main.head.id == head
    with pytest.raises(ImportManagerException):
        mgr.start()  # an import manager runs once
    from lakefs.exceptions import BadRequestException

    with pytest.raises(BadRequestException):
        main.import_data(commit_message="m").prefix("ftp://host/x/", destination="y/").start()
    with pytest.raises(BadRequestException, match="not a regular file"):
        main.import_data(commit_message="m").prefix(f"local://{src}/", destination="a/").object(
            f"local://{src}/d0", destination="b").start()
    # Every source is asked of the confinement rule: one outside the import roots refuses the import.
    with pytest.raises(BadRequestException, match="import_roots"):
        main.import_data(commit_message="m").prefix(f"local://{src}/", destination="a/").object(
            "local:///etc/hostname", destination="b").start()
    assert main.head.id == head


def test_import_of_several_prefixes_and_objects_is_one_commit(repo: Any, tmp_path: Path) -> None:
    src = source_dir(tmp_path, 9)
    other = tmp_path / "other"
    other.mkdir()
    (other / "one.csv").write_bytes(b"a,b\n")
    (other / "two.csv").write_bytes(b"c,d\n")
    main = repo.branch("main")
    head = main.head.id
    mgr = (
        main.import_data(commit_message="three sources")
        .prefix(f"local://{src}/d0/", destination="p0/")
        .prefix(f"local://{src}/d1/", destination="p1/")
        .object(f"local://{other}/one.csv", destination="single/first.csv")
    )
    status = mgr.run(poll_interval=timedelta(seconds=0.5))
    assert status.completed and status.error is None, status.error
    assert status.ingested_objects == 7
    c = main.get_commit()
    assert c.id == status.commit.id and c.parents == [head] and c.message == "three sources"
    paths = {o.path for o in main.objects()}
    assert paths == {f"p0/f{i:03d}.txt" for i in (0, 3, 6)} | {f"p1/f{i:03d}.txt" for i in (1, 4, 7)} | {"single/first.csv"}
    assert main.object("single/first.csv").reader().read() == b"a,b\n"
    assert main.object("single/first.csv").stat().physical_address == f"local://{other}/one.csv"


def test_import_whose_destinations_overlap_fails_and_stages_nothing(repo: Any, tmp_path: Path) -> None:
    src = source_dir(tmp_path, 3)
    main = repo.branch("main")
    head = main.head.id
    mgr = (
        main.import_data(commit_message="overlap")
        .prefix(f"local://{src}/d0/", destination="x/")
        .object(f"local://{src}/d1/f001.txt", destination="x/inside.txt")
    )
    with pytest.raises(ImportManagerException, match="import destinations overlap: x/inside.txt and x/"):
        mgr.run(poll_interval=timedelta(seconds=0.5))
    assert main.head.id == head and list(main.uncommitted()) == []
