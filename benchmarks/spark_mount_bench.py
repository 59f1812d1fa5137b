"""Spark writing through the mount (issue 36, item 4): a partitioned Parquet dataset into a branch, vs a local folder.

    .venv/bin/python benchmarks/spark_mount_bench.py [--big 200] [--big-mib 8] [--small 20000] [--small-kib 8]
        [--committer 1,2] [--writeback]

One PySpark session (``local[2]``, the venv's Spark) writes the same dataset with
``file://`` paths, FileOutputCommitter algorithm v1 and v2, into

- a local folder (the baseline: the same disk, no FUSE), and
- ``<mount>/bench/main/...`` (a ``lakemount mount`` of an embedded store, with
  ``--writeback`` when asked), then commits it with ``echo msg > .lakefs/commit``.

Two datasets: ``--big`` files of about ``--big-mib`` MiB and ``--small`` files of
about ``--small-kib`` KiB (random doubles, one file per partition value: the
dataset is partitioned by ``p``).  Each figure prints seconds and the mount/local
ratio measured in this run, the mount's count of staged files against Spark's
(``_temporary`` must be gone: its renames are metadata only, counted in the
mount's ``.lakefs/stats``), and the commit's time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from writeback_bench import env_for, lakemount, mounted  # noqa: E402

from tests.fuse.test_spark_mount import JAVA_OPTS  # noqa: E402

REPO = "bench"


def session() -> object:
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return (
        SparkSession.builder.master("local[2]")
        .appName("lakemount-spark-mount-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "2g")
        .config("spark.driver.extraJavaOptions", JAVA_OPTS)
        .config("spark.sql.parquet.compression.codec", "none")
        .getOrCreate()
    )


def dataset(spark: object, files: int, file_bytes: int) -> object:
    """``files`` partitions of ~``file_bytes`` each: rows of four random doubles, partition value ``p``."""
    from pyspark.sql import functions as F  # noqa: N812

    rows_per_file = max(1, file_bytes // 32)
    df = spark.range(files * rows_per_file)  # type: ignore[attr-defined]
    df = df.select((F.col("id") % files).alias("p"), *[F.rand(seed).alias(f"c{seed}") for seed in range(4)])
    return df.repartition(files, "p")


def write(df: object, path: str, committer: int) -> float:
    spark = df.sparkSession  # type: ignore[attr-defined]
    spark.conf.set("spark.hadoop.mapreduce.fileoutputcommitter.algorithm.version", str(committer))
    t = time.perf_counter()
    df.write.partitionBy("p").mode("overwrite").parquet(f"file://{path}")  # type: ignore[attr-defined]
    return time.perf_counter() - t


def parquet_files(root: str) -> int:
    return sum(1 for _d, _s, names in os.walk(root) for n in names if n.endswith(".parquet"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--big", type=int, default=200, help="files of the large dataset (default 200)")
    parser.add_argument("--big-mib", type=int, default=8)
    parser.add_argument("--small", type=int, default=20_000, help="files of the small dataset (default 20,000)")
    parser.add_argument("--small-kib", type=int, default=8)
    parser.add_argument("--committer", default="1,2", help="FileOutputCommitter algorithm versions to run")
    parser.add_argument("--writeback", action="store_true", help="mount with --writeback")
    parser.add_argument("--dir", default=".", help="where the run's temporary directory goes")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="sparkbench-", dir=args.dir)
    home, mp, local = (os.path.join(root, n) for n in ("home", "mnt", "local"))
    os.makedirs(home, mode=0o700)
    os.makedirs(local)
    lakemount(home, "repo", "create", f"lakefs://{REPO}")
    spark = session()
    results: list[tuple[str, float, float, int, int, float]] = []
    try:
        with mounted(home, mp, ["--writeback"] if args.writeback else []):
            branch = os.path.join(mp, REPO, "main")
            sets = [("big", args.big, args.big_mib << 20), ("small", args.small, args.small_kib << 10)]
            for name, files, size in sets:
                if not files:
                    continue
                df = dataset(spark, files, size).cache()
                df.count()  # built once, before any timed write
                write(df, os.path.join(local, f"warm-{name}"), 1)  # the JVM's first write of a kind is slow: untimed
                for committer in (int(c) for c in args.committer.split(",")):
                    label = f"{name} {files} x {size >> 10} KiB, committer v{committer}"
                    target = f"ds/{name}-v{committer}"
                    t_local = write(df, os.path.join(local, target), committer)
                    t_mount = write(df, os.path.join(branch, target), committer)
                    t = time.perf_counter()
                    subprocess.run(["sh", "-c", f'echo "{label}" > "{branch}/.lakefs/commit"'], check=True, timeout=3600,
                                   env=env_for(home))
                    t_commit = time.perf_counter() - t
                    staged = parquet_files(os.path.join(branch, target))
                    assert "_temporary" not in os.listdir(os.path.join(branch, target)), "the committer left _temporary"
                    results.append((label, t_local, t_mount, parquet_files(os.path.join(local, target)), staged, t_commit))
                    print(f"  {label}: local {t_local:.1f} s, mount {t_mount:.1f} s (x{t_local / t_mount:.2f}), "
                          f"commit {t_commit:.2f} s", flush=True)
                df.unpersist()
            with open(os.path.join(mp, ".lakefs", "stats")) as f:
                renames = [line.strip() for line in f if not line.startswith("#") and 'op="rename"' in line
                           and "_total" in line]
    finally:
        spark.stop()  # type: ignore[attr-defined]
    mode = "write-back" if args.writeback else "no write-back"
    print(f"\nPySpark local[2] writing partitioned Parquet with file:// (mount: {mode}), one run, "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores:")
    print(f"  {'dataset':<40} {'local':>8} {'mount':>8} {'mount/local':>12} {'files local/mount':>18} {'commit':>8}")
    for label, t_local, t_mount, n_local, n_mount, t_commit in results:
        print(f"  {label:<40} {t_local:7.1f}s {t_mount:7.1f}s {t_local / t_mount:11.2f}x {n_local:>8} / {n_mount:<8} {t_commit:7.2f}s")
    print(f"  the mount's renames (the committers' moves out of _temporary): {'; '.join(renames) or 'none counted'}")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
