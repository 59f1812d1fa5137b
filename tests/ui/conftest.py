"""The web UI tests' server: one live ``lakemount serve`` (temp LAKEMOUNT_HOME, free port, stopped even on
failure) shared by the modules of tests/ui that need nothing of their own (each test makes its own repository
and users); the browser (``chromium``, ``browser``) is the run's one, tests/chromium.py."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.api.conftest import Served, running

# Where each step's screenshot goes: docs/screenshots/ when LAKEMOUNT_UI_SCREENSHOTS=docs (how the committed
# ones were made), else a temporary directory, so a test run leaves the tree clean.
DOCS_SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
_where = os.environ.get("LAKEMOUNT_UI_SCREENSHOTS", "")
SCREENSHOTS = DOCS_SCREENSHOTS if _where == "docs" else Path(_where or tempfile.mkdtemp(prefix="lm-ui-shots-"))


@pytest.fixture(scope="package")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with running(tmp_path_factory.mktemp("ui")) as s:
        yield s
        log = s.gateway.log()
    assert "unexpected error serving" not in log, log[-5000:]
