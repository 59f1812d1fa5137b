"""A new file's create waits for its first close (fuse/held.py): one staging per new file, never lost or late."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from lakemount.app import App
from lakemount.errors import Unavailable
from lakemount.fuse import held as held_module
from lakemount.fuse.core import FileSystem
from tests.fuse.pathfs import PathFS
from tests.fuse.test_core import MAIN, staged


@pytest.fixture
def stagings(app: App, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[str]]]:
    """Every staging transaction of the catalog meanwhile, as the paths it staged."""
    seen: list[list[str]] = []
    catalog = app.catalog
    apply, put_entry, apply_if = catalog.apply, catalog.put_entry, catalog.apply_if

    def spy_apply(repo: str, ref: object, changes: list[tuple[str, object]]) -> None:
        seen.append([p for p, _ in changes])
        apply(repo, ref, changes)  # type: ignore[arg-type]

    def spy_put(repo: str, ref: object, path: str, entry: object) -> None:
        seen.append([path])
        put_entry(repo, ref, path, entry)  # type: ignore[arg-type]

    def spy_if(repo: str, ref: object, changes: list[tuple[str, object]], expected: object) -> None:
        seen.append([p for p, _ in changes])
        apply_if(repo, ref, changes, expected)  # type: ignore[arg-type]

    monkeypatch.setattr(catalog, "apply", spy_apply)
    monkeypatch.setattr(catalog, "put_entry", spy_put)
    monkeypatch.setattr(catalog, "apply_if", spy_if)
    yield seen


def test_a_new_file_written_and_closed_is_one_staging(pfs: PathFS, app: App, stagings: list[list[str]]) -> None:
    pfs.mkdir(f"{MAIN}/d")
    stagings.clear()
    for i in range(5):
        pfs.write_file(f"{MAIN}/d/f{i}", b"content %d" % i)
    # Before: a create and a close each, 10.  The first file's create also deleted mkdir's marker: with it.
    assert stagings == [["d/", "d/f0"], *([f"d/f{i}"] for i in range(1, 5))]
    assert staged(app, "d/") is None
    for i in range(5):
        e = staged(app, f"d/f{i}")
        assert e is not None and app.catalog.read(app.catalog.repository("repo"), e) == b"content %d" % i


def test_a_file_created_and_closed_unwritten_is_staged_at_its_close(pfs: PathFS, app: App, stagings: list[list[str]]) -> None:
    fh = pfs.open(f"{MAIN}/touched", os.O_WRONLY | os.O_CREAT)
    assert staged(app, "touched") is None and pfs.exists(f"{MAIN}/touched")
    pfs.close(fh)
    e = staged(app, "touched")
    assert e is not None and e.size == 0
    assert stagings == [["touched"]]


def test_a_file_kept_open_is_staged_after_hold_max(pfs: PathFS, fs: FileSystem, app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    fh = pfs.open(f"{MAIN}/lock", os.O_WRONLY | os.O_CREAT)
    fs.poll_heads()
    assert staged(app, "lock") is None  # not due yet
    monkeypatch.setattr(held_module, "HOLD_MAX", 0.0)
    fs.poll_heads()  # the mount's periodic task
    e = staged(app, "lock")
    assert e is not None and e.size == 0  # other hosts see it while it is still open
    pfs.pwrite(fh, 0, b"held")
    pfs.close(fh)
    e = staged(app, "lock")
    assert e is not None and e.size == 4


def test_a_staging_that_fails_puts_the_create_back(pfs: PathFS, fs: FileSystem, app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    fh = pfs.open(f"{MAIN}/x", os.O_WRONLY | os.O_CREAT)
    monkeypatch.setattr(held_module, "HOLD_MAX", 0.0)
    calls: list[int] = []
    apply = app.catalog.apply

    def down(*args: object) -> None:
        calls.append(1)
        raise Unavailable("the ref store is down (test)")

    monkeypatch.setattr(app.catalog, "apply", down)
    fs.poll_heads()
    assert calls == [1]  # the fault happened
    assert staged(app, "x") is None
    monkeypatch.setattr(app.catalog, "apply", apply)
    fs.poll_heads()  # held again, staged on the next round
    e = staged(app, "x")
    assert e is not None
    pfs.close(fh)


def test_other_changes_and_reads_of_the_branch_stage_what_is_held_first(pfs: PathFS, app: App, stagings: list[list[str]]) -> None:
    fh = pfs.open(f"{MAIN}/open-new", os.O_WRONLY | os.O_CREAT)
    pfs.mkdir(f"{MAIN}/other")  # a change staged by this mount: the held create goes with it, first
    assert stagings == [["open-new", "other/"]]
    assert staged(app, "open-new") is not None
    pfs.close(fh)
    fh = pfs.open(f"{MAIN}/second", os.O_WRONLY | os.O_CREAT)
    stagings.clear()
    # Another new file's first close stages that file alone: a file still open keeps its hold (its empty entry
    # staged here would cost its own close a read and a compare-and-set of its own: closes.py).
    pfs.write_file(f"{MAIN}/gone", b"g")
    assert stagings == [["gone"]] and staged(app, "second") is None and pfs.exists(f"{MAIN}/second")
    fh3 = pfs.open(f"{MAIN}/third", os.O_WRONLY | os.O_CREAT)
    stagings.clear()
    pfs.unlink(f"{MAIN}/gone")  # a name removed: what the branch says of the names includes the held creates
    assert stagings == [["second", "third"], ["gone"]] and staged(app, "third") is not None
    pfs.close(fh)
    pfs.close(fh3)


def test_a_commit_through_the_control_file_holds_a_file_still_open(pfs: PathFS, app: App) -> None:
    fh = pfs.open(f"{MAIN}/in-commit", os.O_WRONLY | os.O_CREAT)
    pfs.write_file(f"{MAIN}/.lakefs/commit", b"with an open new file")
    head = app.catalog.get_branch("repo", "main").commit_id
    assert app.catalog.get_optional("repo", head, "in-commit") is not None
    pfs.close(fh)


def test_an_unlinked_open_new_file_is_never_staged(pfs: PathFS, app: App, stagings: list[list[str]]) -> None:
    fh = pfs.open(f"{MAIN}/tmp", os.O_WRONLY | os.O_CREAT)
    pfs.pwrite(fh, 0, b"scratch")
    pfs.unlink(f"{MAIN}/tmp")
    stagings.clear()
    pfs.close(fh)
    assert stagings == [] and staged(app, "tmp") is None


def test_a_rename_of_an_open_new_file_lands_under_the_new_name(pfs: PathFS, app: App) -> None:
    fh = pfs.open(f"{MAIN}/part.tmp", os.O_WRONLY | os.O_CREAT)
    pfs.pwrite(fh, 0, b"renamed while open")
    pfs.rename(f"{MAIN}/part.tmp", f"{MAIN}/part")
    pfs.close(fh)
    assert staged(app, "part.tmp") is None
    e = staged(app, "part")
    assert e is not None and app.catalog.read(app.catalog.repository("repo"), e) == b"renamed while open"


def test_another_mount_sees_a_new_file_at_its_close(fs_factory: Callable[..., FileSystem], app: App) -> None:
    one, two = PathFS(fs_factory(head_ttl=0.0)), PathFS(fs_factory(head_ttl=0.0))
    fh = one.open(f"{MAIN}/shared", os.O_WRONLY | os.O_CREAT)
    one.pwrite(fh, 0, b"close-to-open")
    assert one.exists(f"{MAIN}/shared") and not two.exists(f"{MAIN}/shared")
    one.close(fh)
    assert two.read_file(f"{MAIN}/shared") == b"close-to-open"


def test_unmount_stages_what_is_held(fs_factory: Callable[..., FileSystem], app: App) -> None:
    fs = fs_factory()
    pfs = PathFS(fs)
    pfs.open(f"{MAIN}/at-unmount", os.O_WRONLY | os.O_CREAT)  # never closed: the mount goes first
    assert staged(app, "at-unmount") is None
    fs.close()
    assert staged(app, "at-unmount") is not None


class _Watched:
    """A reentrant lock that says when a thread other than its holder starts waiting for it."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.waiting = threading.Event()

    def __enter__(self) -> None:
        if not self._lock.acquire(blocking=False):
            self.waiting.set()
            self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def test_a_held_create_staged_by_the_timer_never_lands_after_the_files_close(
    pfs: PathFS, fs: FileSystem, app: App, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The timer's thread takes the held create and stages it while the file's close stages its content: the
    close must wait, or the empty entry committed last would replace the content (a lost write)."""
    fh = pfs.open(f"{MAIN}/raced", os.O_WRONLY | os.O_CREAT)
    pfs.pwrite(fh, 0, b"the content")
    monkeypatch.setattr(held_module, "HOLD_MAX", 0.0)
    watched = _Watched()
    monkeypatch.setattr(fs.state, "settling", watched)
    in_apply, release, close_staged = threading.Event(), threading.Event(), threading.Event()
    apply, put_entry = app.catalog.apply, app.catalog.put_entry

    def slow_apply(repo: str, ref: object, changes: list[tuple[str, object]]) -> None:
        if threading.current_thread().name == "timer":
            in_apply.set()
            assert release.wait(30), "the test never released the timer's staging"
        apply(repo, ref, changes)  # type: ignore[arg-type]

    def seen_put(*args: object) -> None:
        close_staged.set()
        put_entry(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(app.catalog, "apply", slow_apply)
    monkeypatch.setattr(app.catalog, "put_entry", seen_put)
    timer = threading.Thread(target=fs.poll_heads, name="timer")
    timer.start()
    assert in_apply.wait(30), "the timer never staged the held create"
    closer = threading.Thread(target=pfs.close, args=(fh,), name="closer")
    closer.start()
    deadline = time.monotonic() + 30
    while not (watched.waiting.is_set() or close_staged.is_set()):  # the close waits for the lock, or (the bug) stages
        assert time.monotonic() < deadline, "the close neither waited nor staged"
        time.sleep(0.005)
    release.set()
    timer.join(30)
    closer.join(30)
    e = staged(app, "raced")
    assert e is not None and app.catalog.read(app.catalog.repository("repo"), e) == b"the content"
