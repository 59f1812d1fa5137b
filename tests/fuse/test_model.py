"""The model-based test of the core (no kernel): random POSIX operations vs. a local directory."""

from __future__ import annotations

import itertools
import os
import tempfile

from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from lakemount.app import App
from tests.fuse.conftest import make_fs
from tests.fuse.model import CoreDriver, FsModel, OsDriver
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
            max_examples=int(os.environ.get("LAKEMOUNT_MODEL_EXAMPLES", "40")),
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
