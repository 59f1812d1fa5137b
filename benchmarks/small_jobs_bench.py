"""A small import, export and GC dry run: where the seconds go on Spark, and the in-process engine against it.

    .venv/bin/python benchmarks/small_jobs_bench.py [--repeat 3]

Each figure is a fresh ``lakemount`` process, as a user runs it:

- the start-up of Spark taken apart, in one child process: importing PySpark,
  launching the JVM gateway, creating the SparkContext, creating a
  SparkSession on it (which lakemount used to do, and its RDD jobs never
  need), the first one-task job (Python workers start) and a second one;
- ``lakemount import`` of three objects, ``lakemount export`` of them (the
  imported branch, to a fresh local directory each run) and ``lakemount gc run
  --dry-run`` of the repository they land in, with ``--engine spark`` and
  ``--engine in-process`` (the median of REPEAT runs each), and the ratio: how
  many times faster the in-process engine runs the same job on the same input
  (issue 38 item 9: an export of 3 files took 7.3 s on Spark, a small GC dry
  run 13.5 s).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PHASES = r"""
import json, sys, time
t0 = time.monotonic(); out = {}
def lap(name):
    global t0
    now = time.monotonic(); out[name] = round(now - t0, 2); t0 = now
from lakemount.jobs import session
from pyspark import SparkContext
from pyspark.sql import SparkSession
lap("import pyspark")
# The conf and gateway lakemount builds, timed step by step:
orig = session._launch_gateway
def launch(conf):
    gw = orig(conf); lap("JVM gateway (spark-submit, JVM start)"); return gw
session._launch_gateway = launch
sc = session.get_context("local[*]")
lap("SparkContext")
SparkSession.builder.getOrCreate()
lap("SparkSession (no longer created for jobs)")
sc.parallelize([1], 1).count()
lap("first job (Python worker starts)")
sc.parallelize([1], 1).count()
lap("second job")
print(json.dumps(out))
"""


def lakemount(env: dict[str, str], *args: str) -> tuple[float, dict]:
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "lakemount.cli.main", *args, "--json"], env=env, capture_output=True,
                         text=True, check=True, stdin=subprocess.DEVNULL)
    return time.monotonic() - start, json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="lm-small-jobs-bench-")
    try:
        env = {**os.environ, "LAKEMOUNT_HOME": os.path.join(tmp, "home"), "PYTHONPATH": ROOT,
               "LAKEMOUNT_BLOCKSTORE_LOCAL_IMPORT_ROOTS": tmp}  # the source lies beside the home
        env.pop("LAKEMOUNT_SPARK_MASTER", None)
        src = os.path.join(tmp, "src")
        os.makedirs(src)
        for i in range(3):
            with open(os.path.join(src, f"f{i}.csv"), "w") as f:
                f.write(f"a,b\n{i},2\n")
        subprocess.run([sys.executable, "-m", "lakemount.cli.main", "repo", "create", "lakefs://bench"], env=env,
                       check=True, capture_output=True)
        subprocess.run([sys.executable, "-m", "lakemount.cli.main", "gc", "set-config", "lakefs://bench",
                        "--default-retention-days", "7"], env=env, check=True, capture_output=True)

        phases = json.loads(subprocess.run([sys.executable, "-c", PHASES], env=env, capture_output=True, text=True,
                                           check=True).stdout.strip().splitlines()[-1])
        total = sum(phases.values())
        print(f"Spark start-up, one process ({os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}):")
        for name, seconds in phases.items():
            print(f"  {name:<44} {seconds:6.2f} s  {seconds / total:4.0%}")

        runs = iter(range(1_000_000))
        jobs = {
            "import of 3 objects": lambda: ("import", "--from", src, "--to", "lakefs://bench/main/in/", "--no-progress"),
            "export of 3 objects": lambda: ("export", "lakefs://bench/main/in/", "--to",
                                            os.path.join(tmp, f"out-{next(runs)}"), "--no-progress"),
            "gc run --dry-run": lambda: ("gc", "run", "lakefs://bench", "--dry-run"),
        }
        print(f"Fresh `lakemount` processes, median of {args.repeat}:")
        for label, cmd in jobs.items():
            if label.startswith("export"):  # a branch exports its head commit: the imports' objects committed once
                subprocess.run([sys.executable, "-m", "lakemount.cli.main", "commit", "lakefs://bench/main", "-m",
                                "imported"], env=env, check=True, capture_output=True)
            walls: dict[str, list[float]] = {"spark": [], "in-process": []}
            last: dict[str, dict] = {}
            for _ in range(args.repeat):
                for engine in walls:
                    wall, report = lakemount(env, *cmd(), "--engine", engine)
                    assert report["engine"] == engine, report
                    walls[engine].append(wall)
                    last[engine] = report
            spark, local = statistics.median(walls["spark"]), statistics.median(walls["in-process"])
            t = last["spark"]["timings"]
            inside = ", ".join(f"{k} {v:.2f}" for k, v in t.items() if k != "total")
            print(f"  {label:<20} spark {spark:6.2f} s (inside: {inside} s)")
            print(f"  {label:<20} in-process {local:6.2f} s: {spark / local:5.1f}x faster")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
