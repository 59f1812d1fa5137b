"""Browser fixtures: a live ``lakemount serve`` (temp LAKEMOUNT_HOME, free port, stopped even on failure) and
Debian's chromium driven by playwright by executable path (playwright's own download is unreachable), with a
fresh profile, closed in ``finally``."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.api.conftest import Served, running

CHROMIUM = os.environ.get("LAKEMOUNT_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# Where each step's screenshot goes: docs/screenshots/ when LAKEMOUNT_UI_SCREENSHOTS=docs (how the committed
# ones were made), else a temporary directory, so a test run leaves the tree clean.
DOCS_SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
_where = os.environ.get("LAKEMOUNT_UI_SCREENSHOTS", "")
SCREENSHOTS = DOCS_SCREENSHOTS if _where == "docs" else Path(_where or tempfile.mkdtemp(prefix="lm-ui-shots-"))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with running(tmp_path_factory.mktemp("ui")) as s:
        yield s
        log = s.gateway.log()
    assert "unexpected error serving" not in log, log[-5000:]


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """Debian's chromium (playwright gives each launch a fresh temporary ``--user-data-dir``)."""
    if not shutil.which(CHROMIUM) and not os.path.exists(CHROMIUM):
        pytest.fail(f"chromium not found at {CHROMIUM} (scripts/install.sh --test installs Debian's chromium)")
    from playwright.sync_api import sync_playwright

    pw = sync_playwright().start()
    browser = None
    try:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
    finally:
        try:
            if browser is not None:
                browser.close()
        finally:
            pw.stop()


@pytest.fixture
def browser(chromium: Any) -> Iterator[Any]:
    """A fresh browser context (own cookies), closed after the test."""
    ctx = chromium.new_context(viewport={"width": 1100, "height": 700})
    ctx.set_default_timeout(15_000)
    try:
        yield ctx
    finally:
        ctx.close()
