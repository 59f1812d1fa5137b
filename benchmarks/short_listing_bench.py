"""A short listing past many staged deletions (stop 54): S3A's directory probe under ``_temporary/``, in one run.

    .venv/bin/python benchmarks/short_listing_bench.py [--deletions 20000] [--limit 3] [--repeat 20]

One embedded store (SQLite) in a temporary ``LAKEMOUNT_HOME``: a live directory marker
``_temporary/0/_temporary/`` and ``--deletions`` files staged under it and deleted again (what a Spark
job's task commits leave: each task attempt's files moved out), then ``Catalog.list`` of that prefix
asking for ``--limit`` results (the gateway asks one more than S3A's ``max-keys`` 1-2), with and
without the delimiter ``/``: milliseconds a listing walking with ``first`` (``FEW`` >= the limit,
the code's default) and with a scan (``FEW`` set to 0, the code before), and their ratio.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lakemount.app import App  # noqa: E402
from lakemount.catalog import catalog as catalog_module  # noqa: E402
from lakemount.config import load  # noqa: E402

PREFIX = "_temporary/0/_temporary/"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--deletions", type=int, default=20_000, help="files staged and deleted under the marker")
    ap.add_argument("--limit", type=int, default=3, help="results each listing asks for (at most FEW to walk with first)")
    ap.add_argument("--repeat", type=int, default=20, help="listings timed per figure")
    a = ap.parse_args()
    if a.limit > catalog_module.FEW:
        ap.error(f"--limit {a.limit} is above FEW ({catalog_module.FEW}): such a listing scans either way")
    home = tempfile.mkdtemp(prefix="lm-short-list-")
    try:
        cat = App(load(env={"LAKEMOUNT_HOME": home, "LAKEMOUNT_CACHE_DISK_BYTES": "0"})).catalog
        cat.create_repository("probe")
        cat.put("probe", "main", PREFIX, b"")
        for i in range(a.deletions):
            cat.put("probe", "main", f"{PREFIX}attempt_{i:06d}/part-0", b"x")
        for i in range(a.deletions):
            cat.delete("probe", "main", f"{PREFIX}attempt_{i:06d}/part-0")
        few = catalog_module.FEW
        ms: dict[tuple[str, str], float] = {}
        for how, value in (("first", few), ("scan", 0)):
            catalog_module.FEW = value
            for delimiter in ("/", ""):
                listed = []
                t = time.perf_counter()
                for _ in range(a.repeat):
                    listed = list(cat.list("probe", "main", PREFIX, delimiter=delimiter, limit=a.limit))
                ms[how, delimiter] = (time.perf_counter() - t) / a.repeat * 1e3
                assert [x.path for x in listed] == [PREFIX], listed
        catalog_module.FEW = few
        print(f"a listing of {PREFIX} asking for {a.limit}, past {a.deletions:,} staged deletions, "
              f"mean of {a.repeat}, load {os.getloadavg()[0]:.1f}:")
        for delimiter in ("/", ""):
            ratio = ms["scan", delimiter] / ms["first", delimiter]
            shown = f"{ratio:.0f}" if ratio >= 10 else f"{ratio:.2f}"
            print(f"  delimiter {delimiter!r:4}: first {ms['first', delimiter]:8.2f} ms, scan {ms['scan', delimiter]:8.2f} ms, "
                  f"scan/first x{shown}")
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
