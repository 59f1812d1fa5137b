"""The model-based tests of the core (no kernel): random POSIX operations vs. a local directory, and the same
with commits and resets between them (a directory rename is a move record until the commit materialises it)."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable

# Imported before any draw: a commit's background work (the audit's Parquet writer) imports numpy in another
# thread, and hypothesis's sampled_from looks numpy up in sys.modules, half-imported then.
import numpy  # noqa: F401
import pytest
from hypothesis import HealthCheck, assume, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule, run_state_machine_as_test

from lakemount.app import App
from lakemount.fuse import namespace
from lakemount.graveler import moves
from lakemount.graveler.model import Branch
from tests.budget import examples
from tests.fuse.conftest import make_fs
from tests.fuse.model import CoreDriver, FsModel, Node, OsDriver, paths
from tests.fuse.pathfs import PathFS


def test_core_behaves_like_a_local_directory(app: App, home: str, tmp_path: os.PathLike[str]) -> None:
    counter = itertools.count()

    def machine() -> FsModel:
        n = next(counter)
        repo = f"model{n:04d}"
        app.catalog.create_repository(repo)
        fs = make_fs(app, home, f"model-{n}", head_ttl=0.5)
        reference = tempfile.mkdtemp(prefix="ref-", dir=os.fspath(tmp_path))

        def check_persisted() -> None:
            # A fresh core (a remount) must see the same tree: everything was staged.
            try:
                fresh = make_fs(app, home, f"model-{n}-fresh")
                try:
                    assert CoreDriver(PathFS(fresh), f"/{repo}/main").tree() == OsDriver(reference).tree()
                finally:
                    fresh.close()
            finally:
                fs.close()

        return FsModel(CoreDriver(PathFS(fs), f"/{repo}/main"), OsDriver(reference), check_persisted)

    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=int(os.environ.get("LAKEMOUNT_MODEL_EXAMPLES", examples(40))),
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )


class VersionedFsModel(FsModel):
    """:class:`FsModel` with ``.lakefs/commit`` and ``.lakefs/reset`` among the operations: a commit keeps a
    copy of the reference (``cp -a``: hard links stay links) and must hold the tree (``committed()`` reads
    ``main@`` through a fresh core: this one keeps a ref expression it resolved for its head TTL); a reset
    puts that copy back."""

    def __init__(
        self, pfs: PathFS, root: str, reference: str, on_teardown: Callable[[], None],
        committed: Callable[[], dict[str, Node]],
    ) -> None:
        super().__init__(CoreDriver(pfs, root), OsDriver(reference), on_teardown)
        self.pfs, self.root, self.committed = pfs, root, committed
        self.snapshot = reference + ".committed"
        os.mkdir(self.snapshot)
        self.commits = 0

    def _control(self, name: str, text: str) -> None:
        with self.pfs.opened(f"{self.root}/.lakefs/{name}", os.O_WRONLY | os.O_TRUNC) as fh:
            self.pfs.pwrite(fh, 0, text.encode())

    @rule()
    def commit(self) -> None:
        self.commits += 1
        try:
            self._control("commit", f"commit {self.commits}")
        except OSError:
            assert self.reference.tree() == OsDriver(self.snapshot).tree(), "a commit failed with changes to commit"
            return
        shutil.rmtree(self.snapshot)
        subprocess.run(["cp", "-a", self.reference.root, self.snapshot], check=True)
        assert self.committed() == self.reference.tree()

    @initialize(committed=st.booleans())
    def some_directories(self, committed: bool) -> None:
        """Directories with something in them to rename from the first step, committed or only staged."""
        for path in ("a", "a/b", "b"):
            self.both("mkdir", path, 0o755)
        for path in ("a/c", "a/b/c", "c"):
            self.both("write_file", path, path.encode(), 0o644)
        if committed:
            self.commit()

    @rule(data=st.data(), dst=paths)
    def rename_directory(self, data: st.DataObject, dst: str) -> None:
        """A directory (with what it holds) renamed: the move record's case, more often than ``rename`` draws it."""
        dirs = sorted(p for p, node in self.reference.tree().items() if node.kind == "dir")
        assume(bool(dirs))
        src = data.draw(st.sampled_from(dirs), label="directory")
        assume(not self._through_symlink(src, final=False) and not self._through_symlink(dst, final=False))
        self.both("rename", src, dst)

    @rule()
    def reset(self) -> None:
        self._control("reset", "--all")
        shutil.rmtree(self.reference.root)
        subprocess.run(["cp", "-a", self.snapshot, self.reference.root], check=True)


def test_core_with_commits_and_resets_behaves_like_a_local_directory(app: App, home: str, tmp_path: os.PathLike[str]) -> None:
    run_versioned_model(app, home, tmp_path, "versioned")


def test_renames_past_the_pending_moves_limit_behave_like_a_local_directory(
    app: App, home: str, tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same with a branch taking at most 1 pending move record (``MAX_MOVES`` is 32): from the second
    directory rename before a commit, a rename stages per key, reading what it moves (and each link group's
    names) through the moves still pending, as a rename past the 32nd does."""
    monkeypatch.setattr(moves, "MAX_MOVES", 1)
    monkeypatch.setattr(namespace, "PER_KEY_RENAME", 0)  # the model's directories are small: moves all the same
    staged_per_key: list[int] = []
    core = app.catalog.graveler  # the facade hands out its roles' verbs (graveler/graveler.py): patch the one it gives
    real = core.move

    def counted(repo: str, branch: str, old: bytes, new: bytes) -> tuple[Branch, Branch] | None:
        done = real(repo, branch, old, new)
        if done is None:
            staged_per_key.append(1)
        return done

    monkeypatch.setattr(core, "move", counted)
    run_versioned_model(app, home, tmp_path, "limited", RenamingFsModel)
    assert staged_per_key, "no rename went past the limit: the per-key fallback was never tried"


class RenamingFsModel(VersionedFsModel):
    """:class:`VersionedFsModel` renaming directories more often, to fresh names as often as not (so several
    renames wait for one commit)."""

    @rule(data=st.data(), dst=st.sampled_from(["m1", "m2", "a/m3", "b/m4", "m1/m5"]))
    def rename_directory_to_a_fresh_name(self, data: st.DataObject, dst: str) -> None:
        self.rename_directory(data, dst)

    @rule(data=st.data(), dst=st.sampled_from(["n1", "a/n2", "n1/n3"]))
    def rename_directory_once_more(self, data: st.DataObject, dst: str) -> None:
        self.rename_directory(data, dst)


def run_versioned_model(
    app: App, home: str, tmp_path: os.PathLike[str], name: str, model: type[VersionedFsModel] = VersionedFsModel,
) -> None:
    """Run ``model``'s machine, each example on a repository of its own named ``name``."""
    counter = itertools.count()

    def machine() -> FsModel:
        n = next(counter)
        repo = f"{name}{n:04d}"
        app.catalog.create_repository(repo)
        fs = make_fs(app, home, f"{name}-{n}", head_ttl=0.5)
        reference = tempfile.mkdtemp(prefix="ref-", dir=os.fspath(tmp_path))

        def committed() -> dict[str, Node]:
            fresh = make_fs(app, home, f"{name}-{n}-fresh")
            try:
                return CoreDriver(PathFS(fresh), f"/{repo}/main@").tree()
            finally:
                fresh.close()

        return model(PathFS(fs), f"/{repo}/main", reference, fs.close, committed)

    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=int(os.environ.get("LAKEMOUNT_MODEL_EXAMPLES", examples(40))),
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
