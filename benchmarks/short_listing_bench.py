"""A short listing past many staged deletions (stop 54): S3A's directory probe under ``_temporary/``, in one run.

    .venv/bin/python benchmarks/short_listing_bench.py [--deletions 20000] [--limit 3] [--repeat 20]

One embedded store (SQLite) in a temporary ``LAKEMOUNT_HOME``: a live directory marker
``_temporary/0/_temporary/`` and ``--deletions`` files staged under it and deleted again (what a Spark
job's task commits leave: each task attempt's files moved out), then ``Catalog.list`` of that prefix
asking for ``--limit`` results (the gateway asks one more than S3A's ``max-keys`` 1-2), with and
without the delimiter ``/``: milliseconds a listing walking with ``first`` (``FEW`` >= the limit,
the code's default) and with a scan (``FEW`` set to 0, the code before), and their ratio.

Then (stop 55) the long listings of S3A's job commit: a dataset ``ds/`` of 400 part files (200 committed, 200
staged) beside ``ds/_temporary/0/_temporary/`` and ``--long-deletions`` files staged and deleted under it,
listed asking for ``--long-limit`` results (the gateway's max-keys 1000, plus one) with the delimiter ``/`` (the
dataset's root) and without (everything below it), on each staging backend of ``--backends``: milliseconds a
listing with the scan that seeks past a run of deletions (the code) and with the scan before stop 55 (each
staged deletion read; ``Reads._paged_branch`` made to decline), the two timed alternately in one run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lakemount.app import App  # noqa: E402
from lakemount.catalog import catalog as catalog_module  # noqa: E402
from lakemount.config import load  # noqa: E402
from lakemount.graveler.model import Entry  # noqa: E402
from lakemount.graveler.reads import Reads  # noqa: E402

PREFIX = "_temporary/0/_temporary/"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--deletions", type=int, default=20_000, help="files staged and deleted under the marker")
    ap.add_argument("--limit", type=int, default=3, help="results each listing asks for (at most FEW to walk with first)")
    ap.add_argument("--repeat", type=int, default=20, help="listings timed per figure")
    ap.add_argument("--long-deletions", default="0,100,20000", help="deletions under ds/_temporary/ for the long listings")
    ap.add_argument("--long-limit", type=int, default=1001, help="results a long listing asks for")
    ap.add_argument("--backends", default="sql,lsm,lsm+compacted",
                    help="staging backends of the long listings (lsm+compacted: lsm, its files compacted into one first)")
    ap.add_argument("--only-long", action="store_true", help="skip the short listings")
    a = ap.parse_args()
    if a.limit > catalog_module.FEW:
        ap.error(f"--limit {a.limit} is above FEW ({catalog_module.FEW}): such a listing scans either way")
    if not a.only_long:
        short(a)
    long(a)


def short(a: argparse.Namespace) -> None:
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


def long(a: argparse.Namespace) -> None:
    print(f"a listing of ds/ asking for {a.long_limit}, median of {a.repeat} (before and after alternately), "
          f"load {os.getloadavg()[0]:.1f}:")
    decline = lambda self, *args: None  # noqa: E731  (the scan before stop 55: every staged entry read)
    seeking = Reads._paged_branch
    for backend in a.backends.split(","):
        for n in (int(x) for x in a.long_deletions.split(",")):
            home = tempfile.mkdtemp(prefix="lm-long-list-")
            try:
                cat = App(load(env={"LAKEMOUNT_HOME": home, "LAKEMOUNT_CACHE_DISK_BYTES": "0",
                                    "LAKEMOUNT_STAGING_BACKEND": backend.split("+")[0], "LAKEMOUNT_AUDIT_ENABLED": "false"})).catalog
                cat.create_repository("job")
                value = Entry("data/x", 1, etag="x").value()
                cat.stage_records("job", "main", [(f"ds/part-{i:05d}".encode(), value) for i in range(0, 400, 2)])
                cat.commit("job", "main", "base")
                attempts = [f"ds/_temporary/0/_temporary/attempt_{i:06d}/part-0".encode() for i in range(n)]
                cat.stage_records("job", "main", [(b"ds/_temporary/0/_temporary/", value), *((k, value) for k in attempts)])
                cat.stage_records("job", "main", [*((f"ds/part-{i:05d}".encode(), value) for i in range(1, 400, 2)),
                                                  *((k, None) for k in attempts)])
                if backend == "lsm+compacted":  # the deletions merged over their PUTs, as compaction leaves them
                    token = cat.graveler.get_branch("job", "main").staging_token
                    assert cat.graveler.staging.compact(token, minimum=2)  # type: ignore[attr-defined]
                for delimiter in ("/", ""):
                    want = ["ds/_temporary/" if delimiter else "ds/_temporary/0/_temporary/",
                            *(f"ds/part-{i:05d}" for i in range(400))]
                    times: dict[str, list[float]] = {"before": [], "after": []}
                    for _ in range(a.repeat):
                        for how in ("before", "after"):
                            Reads._paged_branch = decline if how == "before" else seeking  # type: ignore[method-assign]
                            t = time.perf_counter()
                            listed = [x.path for x in cat.list("job", "main", "ds/", delimiter=delimiter, limit=a.long_limit)]
                            times[how].append((time.perf_counter() - t) * 1e3)
                            assert listed == want, (how, listed[:3])
                    Reads._paged_branch = seeking  # type: ignore[method-assign]
                    ms = {how: statistics.median(t) for how, t in times.items()}
                    ratio = ms["before"] / ms["after"]
                    print(f"  {backend:13} {n:6,} deletions, delimiter {delimiter!r:4}: before {ms['before']:8.2f} ms, "
                          f"after {ms['after']:8.2f} ms, before/after x{ratio:.2f}")
            finally:
                Reads._paged_branch = seeking  # type: ignore[method-assign]
                shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
