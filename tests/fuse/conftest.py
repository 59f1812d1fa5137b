"""Fixtures for the mount's tests: a throwaway LAKEMOUNT_HOME, an App on it, cores over it, and kernel mounts."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest

from lakemount.app import App
from lakemount.fuse.core import FileSystem, MountOptions
from tests.fuse.mounting import Mount, mount_set
from tests.fuse.pathfs import PathFS

REPO = "repo"


@pytest.fixture(scope="session", autouse=True)
def no_mount_left_behind(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """After the whole session: no FUSE mount may remain under the session's temporary directories."""
    yield
    base = str(tmp_path_factory.getbasetemp())
    with open("/proc/self/mountinfo") as f:
        left = [line.split()[4] for line in f if " - fuse" in line and line.split()[4].startswith(base)]
    assert not left, f"mounts left behind: {left}"


@pytest.fixture
def home(tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh LAKEMOUNT_HOME for this test; nothing touches ~/.lakemount."""
    path = os.path.join(os.fspath(tmp_path), "home")
    os.makedirs(path, mode=0o700)  # as lakemount makes it (an open one is tightened with a warning)
    monkeypatch.setenv("LAKEMOUNT_HOME", path)
    monkeypatch.delenv("LAKEMOUNT_CONFIG", raising=False)
    monkeypatch.setenv("LAKEMOUNT_CACHE_RAM_BYTES", str(64 << 20))
    return path


@pytest.fixture
def app(home: str) -> App:
    """An App on the test's home with repository ``repo`` (branch ``main``)."""
    app = App.from_config()
    app.catalog.create_repository(REPO)
    return app


def make_fs(app: App, home: str, name: str = "core", **options: object) -> FileSystem:
    cache = app.cache
    opts = MountOptions(spool_dir=os.path.join(home, "spool", name), recovered_dir=os.path.join(home, "recovered"), **options)  # type: ignore[arg-type]
    return FileSystem(app.catalog, app.adapter, cache.ram, cache.disk, opts, cache_stats=cache.stats)


@pytest.fixture
def fs_factory(app: App, home: str) -> Iterator[Callable[..., FileSystem]]:
    """Build cores (each one a "mount") on the test's App; all are closed at teardown."""
    made: list[FileSystem] = []

    def factory(name: str = "core", **options: object) -> FileSystem:
        fs = make_fs(app, home, f"{name}-{len(made)}", **options)
        made.append(fs)
        return fs

    yield factory
    for fs in made:
        fs.close()


@pytest.fixture
def fs(fs_factory: Callable[..., FileSystem]) -> FileSystem:
    return fs_factory(head_ttl=0.2)


@pytest.fixture
def pfs(fs: FileSystem) -> PathFS:
    return PathFS(fs)


@pytest.fixture
def mounts(home: str, tmp_path: os.PathLike[str]) -> Iterator[Callable[..., Mount]]:
    """Mounts through the kernel under the test's tmp_path, each stopped (and none left mounted) pass or fail."""
    with mount_set(home, os.fspath(tmp_path)) as make:
        yield make
