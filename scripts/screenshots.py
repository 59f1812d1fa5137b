"""Photograph every page of the web UI, light and dark, into docs/screenshots/pages/ (``<name>-light.png``,
``<name>-dark.png``).

Starts a throwaway ``lakemount serve`` (temporary LAKEMOUNT_HOME, stopped at the end), seeds one repository with
something on every page (``tests/ui/tour.py``, the same tour the accessibility test walks) and drives Debian's
chromium with playwright, the system's colour scheme emulated. Relative dates ("3 min ago") make reruns differ
a little; the pages do not.

Usage: ``.venv/bin/python scripts/screenshots.py [--out DIR]`` (from the repository's root).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.api.conftest import running  # noqa: E402 - after the path above
from tests.chromium import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET  # noqa: E402
from tests.ui.tour import login_page, seed_tour, tour_pages, visit  # noqa: E402

VIEWPORT = {"width": 1000, "height": 640}
MAX_BYTES = 200 * 1024  # each picture stays small enough to keep in git


def main() -> None:
    """Seed a throwaway server and write every page's light and dark picture (see the module's docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "screenshots" / "pages"), help="where the PNGs go")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="lm-shots-") as tmp, running(Path(tmp)) as served:
        tour = seed_tour(served)
        pw = sync_playwright().start()
        try:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            for scheme in ("light", "dark"):
                ctx = browser.new_context(viewport=VIEWPORT, color_scheme=scheme)
                ctx.set_default_timeout(20_000)
                page = ctx.new_page()
                page.goto(served.api + "/login")
                page.wait_for_selector("#login")
                shots = [("login", page.screenshot())]
                login_page(page, served.api, ADMIN_KEY, ADMIN_SECRET)
                for name, route, ready in tour_pages(tour):
                    visit(page, served.api, name, route, ready)
                    page.mouse.move(0, 0)
                    shots.append((name, page.screenshot()))
                for name, png in shots:
                    path = out / f"{name}-{scheme}.png"
                    path.write_bytes(png)
                    if len(png) > MAX_BYTES:
                        raise SystemExit(f"{path.name} is {len(png)} bytes (> {MAX_BYTES}): make the page or viewport smaller")
                    print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path} {len(png) // 1024} KiB")
                ctx.close()
            browser.close()
        finally:
            pw.stop()


if __name__ == "__main__":
    main()
