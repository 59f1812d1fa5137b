"""No thread pool or limiter is created when a module is imported (issue 10): importing starts nothing.

Every module of lakemount outside ``gateway/`` (the gateway's own helper owns
that package) is imported in a fresh interpreter with the constructors of
``ThreadPoolExecutor``, ``ProcessPoolExecutor``, ``threading.Thread`` and
trio's ``CapacityLimiter`` replaced by ones that record their caller.
"""

from __future__ import annotations

import subprocess
import sys

SCRIPT = r"""
import concurrent.futures, importlib, pkgutil, sys, threading, traceback
made = []
def spy(cls):
    init = cls.__init__
    def __init__(self, *a, **k):
        made.append((cls.__name__, "".join(traceback.format_stack(limit=4)[:-1])))
        init(self, *a, **k)
    cls.__init__ = __init__
for cls in (concurrent.futures.ThreadPoolExecutor, concurrent.futures.ProcessPoolExecutor, threading.Thread):
    spy(cls)
try:
    import trio
    spy(trio.CapacityLimiter)
except ImportError:
    pass
import lakemount
skipped = ("lakemount.gateway",)
for info in pkgutil.walk_packages(lakemount.__path__, "lakemount."):
    if info.name.startswith(skipped) or info.name.endswith("__main__"):
        continue
    try:
        importlib.import_module(info.name)
    except ImportError as exc:  # optional extras (pyfuse3, pyspark) may be missing
        print(f"skip {info.name}: {exc}", file=sys.stderr)
for name, where in made:
    print(f"{name} created at import:\n{where}")
sys.exit(1 if made else 0)
"""


def test_importing_lakemount_creates_no_pool() -> None:
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
