"""First closes of new files in flight on one branch share one staging (fuse/closes.py)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from lakemount.app import App
from lakemount.catalog.crowd import HORIZON_S
from lakemount.fuse.core import FileSystem
from tests.fuse.pathfs import PathFS
from tests.fuse.test_core import MAIN, staged
from tests.fuse.test_held import stagings  # noqa: F401  (the fixture)

KEY = ("repo", "main")


class Held:
    """The catalog's first staging once ``armed`` is held until ``release`` (the others pass), so closes gather."""

    def __init__(self, app: App, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entered, self.release = threading.Event(), threading.Event()
        self.armed = False
        catalog = app.catalog
        put_entry, apply = catalog.put_entry, catalog.apply

        def hold() -> None:
            if self.armed:
                self.armed = False
                self.entered.set()
                assert self.release.wait(60), "the test never released the first staging"

        def held_put(*args: object) -> None:
            hold()
            put_entry(*args)  # type: ignore[arg-type]

        def held_apply(*args: object) -> None:
            hold()
            apply(*args)  # type: ignore[arg-type]

        # Patched over the ``stagings`` spies, which count each call once.
        monkeypatch.setattr(catalog, "put_entry", held_put)
        monkeypatch.setattr(catalog, "apply", held_apply)


@pytest.fixture
def held_first(app: App, monkeypatch: pytest.MonkeyPatch, stagings: list[list[str]]) -> Iterator[Held]:  # noqa: F811
    yield Held(app, monkeypatch)


def _wait(what: str, cond: Callable[[], bool], seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not cond():
        assert time.monotonic() < deadline, f"{what} never happened within {seconds:.0f} s"
        time.sleep(0.005)


def _close_all(pfs: PathFS, fhs: list[int]) -> tuple[list[threading.Thread], list[BaseException]]:
    errors: list[BaseException] = []

    def close(fh: int) -> None:
        try:
            pfs.close(fh)
        except BaseException as exc:  # re-raised by the test
            errors.append(exc)

    threads = [threading.Thread(target=close, args=(fh,)) for fh in fhs]
    for t in threads:
        t.start()
    return threads, errors


def test_first_closes_in_flight_share_one_staging(
    pfs: PathFS, fs: FileSystem, app: App, stagings: list[list[str]], held_first: Held,  # noqa: F811
) -> None:
    """Eight writers' new files close while the first close's staging is in flight: the other seven go
    together in the next staging (before: one staging each, under the scope's mutex, and the first close
    staged the seven others' empty creates, so each of their closes read the branch and staged alone)."""
    pfs.mkdir(f"{MAIN}/d")
    fhs = []
    for i in range(8):
        fh = pfs.open(f"{MAIN}/d/f{i}", os.O_WRONLY | os.O_CREAT)
        pfs.pwrite(fh, 0, b"content %d" % i)
        fhs.append(fh)
    stagings.clear()
    held_first.armed = True
    first, first_errors = _close_all(pfs, fhs[:1])
    assert held_first.entered.wait(60), "the first close never staged"
    rest, errors = _close_all(pfs, fhs[1:])
    _wait("seven closes gathering behind the first", lambda: fs.saver.closes.gathering(KEY) == 7)
    held_first.release.set()
    for t in first + rest:
        t.join(60)
    assert not [t for t in first + rest if t.is_alive()], "a close never returned"
    assert first_errors + errors == []
    assert stagings[0] == ["d/", "d/f0"]  # mkdir's marker goes with the first file in it
    assert sorted(stagings[1]) == [f"d/f{i}" for i in range(1, 8)] and len(stagings) == 2, stagings
    for i in range(8):
        e = staged(app, f"d/f{i}")
        assert e is not None and app.catalog.read(app.catalog.repository("repo"), e) == b"content %d" % i
    assert fs.saver.closes.groups == 2 and fs.saver.closes.closes == 8


def test_a_lone_writer_s_close_is_staged_at_once(pfs: PathFS, fs: FileSystem, stagings: list[list[str]]) -> None:  # noqa: F811
    """Nothing in flight: a close goes alone, one staging each, never waiting for company."""
    pfs.mkdir(f"{MAIN}/d")
    stagings.clear()
    for i in range(5):
        pfs.write_file(f"{MAIN}/d/f{i}", b"x")
    assert stagings == [["d/", "d/f0"], *([f"d/f{i}"] for i in range(1, 5))]
    assert fs.saver.closes.groups == 5



def test_a_staging_waits_for_the_closes_storing_their_data_beside_it(
    pfs: PathFS, fs: FileSystem, app: App, stagings: list[list[str]], monkeypatch: pytest.MonkeyPatch,  # noqa: F811
) -> None:
    """Two writers close at about the same time; one still stores its data when the other may stage: the
    staging waits for it (``GATHER_S`` at most, raised here so the test does not race the clock), and both
    files go in one staging (before: the first staged alone and the second after it, two stagings)."""
    from lakemount.fuse import closes, saving

    monkeypatch.setattr(closes, "GATHER_S", 60.0)
    storing, release = threading.Event(), threading.Event()
    store_bytes = saving.store_bytes

    def slow_store(catalog: object, repo: str, data: bytes, digests: tuple[int, str, str]) -> object:
        if data == b"slow":
            storing.set()
            assert release.wait(60), "the test never let the slow close store its data"
        return store_bytes(catalog, repo, data, digests)  # type: ignore[arg-type]

    monkeypatch.setattr(saving, "store_bytes", slow_store)
    fhs = []
    for name in ("slow", "quick"):
        fh = pfs.open(f"{MAIN}/{name}", os.O_WRONLY | os.O_CREAT)
        pfs.pwrite(fh, 0, name.encode())
        fhs.append(fh)
    stagings.clear()
    slow, slow_errors = _close_all(pfs, fhs[:1])
    assert storing.wait(60), "the slow close never stored its data"
    quick, errors = _close_all(pfs, fhs[1:])
    _wait("the quick close leading a staging that gathers", lambda: fs.saver.closes.gathering(KEY) == 1)
    assert stagings == []  # it waits for the slow close
    release.set()
    for t in slow + quick:
        t.join(60)
    assert slow_errors + errors == []
    assert [sorted(s) for s in stagings] == [["quick", "slow"]]
    for name in ("slow", "quick"):
        assert app.catalog.read(app.catalog.repository("repo"), staged(app, name)) == name.encode()  # type: ignore[arg-type]


def test_a_staging_waits_for_the_closes_storing_when_it_led_not_for_later_ones(
    pfs: PathFS, fs: FileSystem, app: App, stagings: list[list[str]], monkeypatch: pytest.MonkeyPatch,  # noqa: F811
) -> None:
    """A leader waits for the closes that were storing their data when it led, however long their PUT takes (up
    to ``GATHER_S``), but not for a close that began storing after it: that one goes in the next staging.  Before,
    it waited while any close stored, so writers that keep storing kept it waiting the whole ``GATHER_S``, which
    is why that had to be 20 ms, shorter than a PUT to S3, and groups held only the closes whose PUT ended in it."""
    from lakemount.fuse import closes, saving

    monkeypatch.setattr(closes, "GATHER_S", 60.0)
    entered = {name: threading.Event() for name in ("slow", "later")}
    released = {name: threading.Event() for name in ("slow", "later")}
    store_bytes = saving.store_bytes

    def slow_store(catalog: object, repo: str, data: bytes, digests: tuple[int, str, str]) -> object:
        name = data.decode()
        if name in entered:
            entered[name].set()
            assert released[name].wait(60), f"the test never let the {name} close store its data"
        return store_bytes(catalog, repo, data, digests)  # type: ignore[arg-type]

    monkeypatch.setattr(saving, "store_bytes", slow_store)
    fhs = {}
    for name in ("slow", "quick", "later"):
        fh = pfs.open(f"{MAIN}/{name}", os.O_WRONLY | os.O_CREAT)
        pfs.pwrite(fh, 0, name.encode())
        fhs[name] = fh
    stagings.clear()
    threads, errors = _close_all(pfs, [fhs["slow"]])
    assert entered["slow"].wait(60), "the slow close never stored its data"
    more, more_errors = _close_all(pfs, [fhs["quick"]])
    _wait("the quick close leading a staging that waits for the slow one", lambda: fs.saver.closes.gathering(KEY) == 1)
    later, later_errors = _close_all(pfs, [fhs["later"]])
    assert entered["later"].wait(60), "the later close never stored its data"
    assert stagings == []
    released["slow"].set()
    # 30 s: well inside GATHER_S (60 s here), which a leader waiting for the later close would sit out.
    _wait("the staging of the quick and the slow close (not waiting for the later one)", lambda: len(stagings) == 1, 30.0)
    assert sorted(stagings[0]) == ["quick", "slow"] and not released["later"].is_set()
    released["later"].set()
    for t in threads + more + later:
        t.join(60)
    assert not [t for t in threads + more + later if t.is_alive()], "a close never returned"
    assert errors + more_errors + later_errors == []
    assert [sorted(s) for s in stagings] == [["quick", "slow"], ["later"]]
    for name in ("slow", "quick", "later"):
        assert app.catalog.read(app.catalog.repository("repo"), staged(app, name)) == name.encode()  # type: ignore[arg-type]


def _crowd_behind_a_held_staging(pfs: PathFS, fs: FileSystem, held_first: Held) -> tuple[list[threading.Thread], list[BaseException]]:
    """Four writers close at once while the first close's staging is held: ``a1`` stages alone, ``a2``,
    ``b1`` and ``b2`` gather behind it (four closes in flight at once: the crowd a staging may hope for)."""
    fhs = []
    for name in ("a1", "a2", "b1", "b2"):
        fh = pfs.open(f"{MAIN}/{name}", os.O_WRONLY | os.O_CREAT)
        pfs.pwrite(fh, 0, name.encode())
        fhs.append(fh)
    held_first.armed = True
    first, errors = _close_all(pfs, fhs[:1])
    assert held_first.entered.wait(60), "the first close never staged"
    rest, more_errors = _close_all(pfs, fhs[1:])
    _wait("three closes gathering behind the first", lambda: fs.saver.closes.gathering(KEY) == 3)
    return first + rest, errors + more_errors


def test_a_staging_waits_for_the_crowd_s_writers_to_come_back(
    pfs: PathFS, fs: FileSystem, app: App, stagings: list[list[str]], held_first: Held,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Four closes were in flight at once; the staging after the first holds three of them, so its leader waits
    (``RETURN_S`` at most, raised here so the test does not race the clock) for the first one's writer, which,
    acknowledged, closes its next file: the four go in one staging.  Before, the three staged at once and the
    returning writer's file alone after them: with 16 writers on one host the crowd split into two halves that
    took turns, 8.1 closes a staging (docs/SCALE.md, stop 52)."""
    from lakemount.fuse import closes

    monkeypatch.setattr(closes, "RETURN_S", 60.0)
    stagings.clear()
    threads, errors = _crowd_behind_a_held_staging(pfs, fs, held_first)
    held_first.release.set()
    threads[0].join(60)
    assert not threads[0].is_alive(), "the first close never returned"
    assert stagings == [["a1"]]
    time.sleep(0.2)
    assert stagings == [["a1"]], "the three staged without waiting for the crowd's fourth writer"
    pfs.write_file(f"{MAIN}/c", b"c")  # a1's writer, back with its next file
    for t in threads:
        t.join(60)
    assert not [t for t in threads if t.is_alive()], "a close never returned"
    assert errors == []
    assert [sorted(s) for s in stagings] == [["a1"], ["a2", "b1", "b2", "c"]]
    assert fs.saver.closes.returns == 1
    for name in ("a1", "a2", "b1", "b2", "c"):
        assert app.catalog.read(app.catalog.repository("repo"), staged(app, name)) == name.encode()  # type: ignore[arg-type]


def test_a_staging_waits_for_the_crowd_at_most_return_s_and_not_once_it_is_gone(
    pfs: PathFS, fs: FileSystem, stagings: list[list[str]], held_first: Held,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No writer comes back: the three go ``RETURN_S`` after the first of them arrived (a few ms before the held
    staging ends here), not later; once the crowd is gone (``HORIZON_S`` twice) a lone writer's close goes at once
    again, waiting for nobody."""
    from lakemount.fuse import closes

    monkeypatch.setattr(closes, "RETURN_S", 0.3)
    stagings.clear()
    threads, errors = _crowd_behind_a_held_staging(pfs, fs, held_first)
    t = time.monotonic()
    held_first.release.set()
    _wait("the three closes' staging", lambda: len(stagings) == 2, 30.0)
    waited = time.monotonic() - t
    assert waited >= 0.2, f"the leader did not wait for the crowd ({waited:.3f} s)"
    for th in threads:
        th.join(60)
    assert errors == [] and not [th for th in threads if th.is_alive()]
    assert [sorted(s) for s in stagings] == [["a1"], ["a2", "b1", "b2"]]
    assert fs.saver.closes.returns == 1
    time.sleep(2 * HORIZON_S + 0.05)
    pfs.write_file(f"{MAIN}/alone", b"alone")
    assert stagings[-1] == ["alone"] and fs.saver.closes.returns == 1  # it waited for no crowd


def test_a_group_that_gathered_behind_a_long_staging_waits_for_nobody_more(
    pfs: PathFS, fs: FileSystem, stagings: list[list[str]], held_first: Held,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``RETURN_S`` counts from the group's first close: three closes that waited longer than that behind the
    staging in flight go as soon as it ends, without waiting for the crowd's fourth writer (its wait would be
    on top of theirs, and a slow staging under load is when a close can least afford it)."""
    from lakemount.fuse import closes

    monkeypatch.setattr(closes, "RETURN_S", 0.3)
    stagings.clear()
    threads, errors = _crowd_behind_a_held_staging(pfs, fs, held_first)
    time.sleep(0.4)  # the staging in flight takes longer than RETURN_S
    held_first.release.set()
    for t in threads:
        t.join(60)
    assert errors == [] and not [t for t in threads if t.is_alive()]
    assert [sorted(s) for s in stagings] == [["a1"], ["a2", "b1", "b2"]]
    assert fs.saver.closes.returns == 0, "the group waited for the crowd after waiting RETURN_S behind the staging"
