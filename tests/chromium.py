"""One browser per test run, a fresh context per test (a plugin loaded by tests/conftest.py).

Debian's chromium driven by playwright by executable path (playwright's own download is unreachable).
Launching it costs seconds; a context (own cookies, own storage) costs milliseconds, so the browser is
launched once, the first time a test asks for it (tests/ui, tests/audit/test_ui.py), and closed at the
end of the session even when a test fails. A plugin rather than tests/ui's conftest, so that the audit
page's tests share the same browser.

The tests that use it run last, together: between two of its calls playwright's sync API leaves its
event loop marked as running on the main thread, so a test after the first browser test that calls
``asyncio.run`` (tests/serving) would be refused while the browser lives. With xdist's workers each worker
launches its own browser, and tests/workers.py hands out the browser's modules last, so in every worker too
they come after the rest.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

CHROMIUM = os.environ.get("LAKEMOUNT_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Move the tests that use the browser to the end of the run, in their order."""
    uses = [item for item in items if "chromium" in getattr(item, "fixturenames", ())]
    if uses:
        chosen = set(map(id, uses))
        items[:] = [item for item in items if id(item) not in chosen] + uses


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    """Debian's chromium (playwright gives the launch a fresh temporary ``--user-data-dir``)."""
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
    """A fresh browser context (own cookies and storage), closed after the test."""
    ctx = chromium.new_context(viewport={"width": 1100, "height": 700})
    ctx.set_default_timeout(15_000)
    try:
        yield ctx
    finally:
        ctx.close()
