"""Web UI bench: time to a rendered first page of a 100,000-entry directory and of a 10,000-change commit diff,
cold and warm.

Measured in Debian's chromium driven by playwright: from the navigation's
start (``performance.timeOrigin``) to the listing element (``#listing`` /
``#diff tr.change``) being in the DOM, read in the page as
``performance.now()`` when the element appears (a ``MutationObserver``
installed before the page's script runs).  The data is staged at catalog
level: 100,000 and 10,000 entries pointing at one stored object, committed,
not uploaded one by one.

Two figures per page, printed apart (they differ several-fold):

- cold: a new user's first visit after ``lakemount api`` started: a fresh server
  process (no imports done, no caches) and a fresh browser context (empty HTTP
  cache, no earlier page); the session cookie is made from the server key, so the
  measured navigation is the first request the server serves after its health
  check.  Repeated ``--cold-runs`` times, each on a new server and context.
- warm: the same page loaded again ``--runs`` times in the last cold run's
  context and server (after one more unmeasured load), caches filled.

Targets (2 cores): listing <= 300 ms, diff <= 1 s, both for the warm load and
reported for the cold one too; the cold/warm ratio is printed.
Usage: ``python benchmarks/ui_bench.py [--runs 7] [--cold-runs 3]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

KEY, SECRET = "AKIAUIBENCH000000000", "uibenchsecretuibenchsecretuibenchsecret0"
REPO = "uibench"
DIR_N = 100_000
DIFF_N = 10_000
CHROMIUM = os.environ.get("LAKEMOUNT_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# Records when a selector first matches, in page time (ms since navigation start).
OBSERVER = """
window.__seen = {};
new MutationObserver(() => {
  for (const sel of ['#listing', '#diff tr.change']) {
    if (!(sel in window.__seen) && document.querySelector(sel)) window.__seen[sel] = performance.now();
  }
}).observe(document, {childList: true, subtree: true});
"""


def prepare(home: str) -> tuple[str, float]:
    """The bench user and repository; returns the id of the 10,000-change commit and the seconds staging took."""
    from lakemount.app import App
    from lakemount.config import load

    env = {"LAKEMOUNT_HOME": home}
    app = App(load(None, env=env))
    app.auth.create_user("bench")
    app.auth.attach_policy("bench", "Admin")
    app.auth.create_credentials("bench", KEY, SECRET)
    cat = app.catalog
    t0 = time.perf_counter()
    cat.create_repository(REPO)
    cat.put(REPO, "main", "one/object.csv", b"id,value\n1,2\n")
    entry = cat.stat(REPO, "main", "one/object.csv")
    for start in range(0, DIR_N, 20_000):
        cat.apply(REPO, "main", [(f"big/part-{i:06d}.csv", entry) for i in range(start, min(start + 20_000, DIR_N))])
    cat.commit(REPO, "main", "100,000 entries")
    cat.apply(REPO, "main", [(f"changes/c-{i:05d}.csv", entry) for i in range(DIFF_N)])
    commit = cat.commit(REPO, "main", "10,000 changes").commit.id
    took = time.perf_counter() - t0
    app.release_connections()
    return commit, took


def start(home: str) -> tuple[subprocess.Popen[str], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEMOUNT_")}
    env["LAKEMOUNT_HOME"] = home
    proc = subprocess.Popen([sys.executable, "-m", "lakemount.cli.main", "api", "--listen", "127.0.0.1:0"], env=env,
                            stdout=subprocess.PIPE, stderr=open(os.path.join(home, "api.log"), "w"), text=True,
                            start_new_session=True)
    assert proc.stdout is not None
    api = proc.stdout.readline().split("listening on ", 1)[1].split()[0].removesuffix("/api/v1")
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(api + "/api/v1/healthcheck", timeout=5)
            return proc, api
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("the API did not answer") from None
            time.sleep(0.2)


def measure(page: object, url: str, selector: str) -> float:
    """Milliseconds from navigation start to ``selector`` in the DOM."""
    page.goto("about:blank")  # type: ignore[attr-defined]
    page.goto(url)  # type: ignore[attr-defined]
    page.wait_for_selector(selector, state="attached", timeout=60_000)  # type: ignore[attr-defined]
    return float(page.evaluate(f"window.__seen[{selector!r}]"))  # type: ignore[attr-defined]


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def session_cookie(home: str) -> str:
    """A session token for the bench user, signed with the install's server key (as ``POST /auth/login`` makes
    one), so a cold context needs no login request before the measured page."""
    from lakemount.api.auth import issue_token, signing_key
    from lakemount.api.handler import server_key
    from lakemount.app import App
    from lakemount.config import load

    app = App(load(None, env={"LAKEMOUNT_HOME": home}))
    try:
        return issue_token(signing_key(server_key(app)), "bench")[0]
    finally:
        app.release_connections()


def summary(times: list[float]) -> str:
    times = sorted(times)
    return f"median {statistics.median(times):.0f} ms (min {times[0]:.0f}, max {times[-1]:.0f}, {len(times)} runs)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=7, help="warm loads per page")
    ap.add_argument("--cold-runs", type=int, default=3, help="cold loads per page, each on a new server and browser context")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    from lakemount.api.auth import COOKIE

    home = tempfile.mkdtemp(prefix="lm-uibench-")
    proc = None
    pw = browser = ctx = None
    try:
        commit, staged = prepare(home)
        print(f"staged {DIR_N:,} + {DIFF_N:,} entries at catalog level in {staged:.1f} s")
        token = session_cookie(home)
        pw = sync_playwright().start()
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        cases = [
            (f"first page of a {DIR_N:,}-entry directory", f"/#/r/{REPO}/tree/main/big", "#listing", 300.0),
            (f"first page of a {DIFF_N:,}-change commit diff", f"/#/r/{REPO}/commit/{commit}", "#diff tr.change", 1000.0),
        ]
        for name, hash_url, sel, target in cases:
            cold: list[float] = []
            warm: list[float] = []
            rows = 0
            for i in range(args.cold_runs):
                proc, api = start(home)
                ctx = browser.new_context(viewport={"width": 1100, "height": 700})  # empty cache, no cookies
                ctx.add_init_script(OBSERVER)
                ctx.add_cookies([{"name": COOKIE, "value": token, "url": api}])
                page = ctx.new_page()
                cold.append(measure(page, api + hash_url, sel))
                if i == args.cold_runs - 1:
                    measure(page, api + hash_url, sel)  # settle: every worker and cache has served it once
                    warm = [measure(page, api + hash_url, sel) for _ in range(args.runs)]
                    rows = page.locator(sel.split()[0] + " tr").count() - 1
                ctx.close()
                ctx = None
                stop(proc)
                proc = None
            cold_med, warm_med = statistics.median(cold), statistics.median(warm)
            print(f"{name} ({rows} rows rendered), target <= {target:.0f} ms:")
            print(f"  cold (first request after server start, fresh browser context): {summary(cold)}: "
                  f"{'OK' if cold_med <= target else 'MISSED'}")
            print(f"  warm (loaded again, caches filled): {summary(warm)}: {'OK' if warm_med <= target else 'MISSED'}")
            print(f"  cold / warm: {cold_med / warm_med:.1f}x")
    finally:
        try:
            if ctx is not None:
                ctx.close()
            if browser is not None:
                browser.close()
            if pw is not None:
                pw.stop()
        finally:
            if proc is not None:
                stop(proc)
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
