"""The Spark side of benchmarks/spark_mount_bench.py: one PySpark session writes the same dataset to each target.

Runs in whichever venv has the Spark to measure (the project's ``.venv``, or
``.venv-spark32`` when one target is ``s3a://``: that venv's pyspark 3.2.4 is the
one the hadoop-aws jars fit), so it imports nothing from lakemount.  Started as

    PYTHON spark_bench_job.py CONFIG_JSON

where CONFIG_JSON holds ``targets`` (name -> URL of a writable root: ``file:///...``
or ``s3a://bucket/branch``), ``sets`` ([name, files, bytes per file]),
``committers`` ([1, 2]), optionally ``s3a`` (endpoint, key, secret, jars) and
``memory`` (the driver's) and ``warm_files``.  For each set it builds the dataset once (cached),
writes it (its first ``warm_files`` files, when that is set) untimed to ``warm`` (the JVM's
first write of a kind is slow), then for each committer
writes it to every target in turn, each time printing one JSON line
``{"set", "committer", "target", "path", "seconds"}`` and waiting for a line on stdin
(the caller commits the branch meanwhile, so a commit never overlaps a write).
"""

from __future__ import annotations

import glob
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.spark_s3a.s3a_job import JAVA_OPTS  # noqa: E402


def session(cfg: dict) -> object:  # type: ignore[type-arg]
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    b = (
        SparkSession.builder.master("local[2]")
        .appName("lakemount-spark-mount-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", cfg.get("memory", "2g"))
        .config("spark.driver.extraJavaOptions", JAVA_OPTS)
        .config("spark.sql.parquet.compression.codec", "none")
    )
    if s3a := cfg.get("s3a"):
        cp = ":".join(sorted(glob.glob(os.path.join(s3a["jars"], "*.jar"))))
        # S3A's defaults otherwise: only what it needs to find and sign for the gateway.
        b = (
            b.config("spark.driver.extraClassPath", cp)
            .config("spark.hadoop.fs.s3a.endpoint", s3a["endpoint"])
            .config("spark.hadoop.fs.s3a.path.style.access", "true")
            .config("spark.hadoop.fs.s3a.access.key", s3a["key"])
            .config("spark.hadoop.fs.s3a.secret.key", s3a["secret"])
            .config("spark.hadoop.fs.s3a.connection.ssl.enabled", "false")
            .config("spark.hadoop.fs.s3a.aws.credentials.provider", "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider")
        )
    return b.getOrCreate()


def dataset(spark: object, files: int, file_bytes: int) -> object:
    """``files`` partitions of ~``file_bytes`` each: rows of four random doubles, partition value ``p``.

    Built without a shuffle: ``range`` cuts its ids into ``files`` equal runs, one per Spark
    partition, and ``p`` is the run's number, so each task holds exactly one value of ``p`` and
    writes one file (as ``repartition(files, "p")`` gave, whose shuffle into 20,000 partitions
    took 13 minutes on this machine before any write began).
    """
    from pyspark.sql import functions as F  # noqa: N812

    rows_per_file = max(1, file_bytes // 32)
    df = spark.range(0, files * rows_per_file, 1, files)  # type: ignore[attr-defined]
    return df.select(F.floor(F.col("id") / rows_per_file).alias("p"), *[F.rand(seed).alias(f"c{seed}") for seed in range(4)])


def write(spark: object, df: object, url: str, committer: int) -> float:
    spark.conf.set("spark.hadoop.mapreduce.fileoutputcommitter.algorithm.version", str(committer))
    t = time.perf_counter()
    df.write.partitionBy("p").mode("overwrite").parquet(url)  # type: ignore[attr-defined]
    return time.perf_counter() - t


def main() -> None:
    cfg = json.loads(sys.argv[1])
    spark = session(cfg)
    print(json.dumps({"spark": spark.version}), flush=True)  # type: ignore[attr-defined]
    try:
        small = dataset(spark, 4, 1024)
        for url in cfg["targets"].values():  # each target's first write (class loading, connections): untimed
            write(spark, small, f"{url}/warm/first", 1)
        for set_name, files, size in cfg["sets"]:
            df = dataset(spark, files, size).cache()  # type: ignore[attr-defined]
            df.count()  # built once, before any timed write
            warm = int(cfg.get("warm_files") or 0)  # its first files only (p counts the files from 0), or all
            write(spark, df.where(df.p < warm) if 0 < warm < files else df, f"{cfg['warm']}/{set_name}", 1)  # type: ignore[attr-defined]
            for committer in cfg["committers"]:
                for name, url in cfg["targets"].items():
                    path = f"ds/{set_name}-v{committer}"
                    seconds = write(spark, df, f"{url}/{path}", committer)
                    print(json.dumps({"set": set_name, "committer": committer, "target": name, "path": path,
                                      "seconds": seconds}), flush=True)
                    if not sys.stdin.readline():
                        raise SystemExit("the caller went away")
            df.unpersist()  # type: ignore[attr-defined]
    finally:
        spark.stop()  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
