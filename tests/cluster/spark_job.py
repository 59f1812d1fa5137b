"""The Spark job a user runs on the cluster; executed by the driver host (``client``) of the harness.

``python spark_job.py MASTER_URL OUT_URL [--commit ROOT] [--merge-into ROOT]``: executors
(on w1 and w2) write a partitioned Parquet dataset to ``OUT_URL`` with the default
FileOutputCommitter (task files written on one host, renamed by the job commit on
the driver's host), then the driver commits the branch by writing to
``ROOT/.lakefs/commit`` and merges it into the branch at ``--merge-into`` through
that branch's ``.lakefs/merge``, and reads the dataset back through the executors.
The last stdout line is JSON: rows written and read, seconds, the commit id.
"""

from __future__ import annotations

import argparse
import json
import os
import time

ROWS = 20_000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("master")
    ap.add_argument("out")
    ap.add_argument("--commit", default="")
    ap.add_argument("--merge-into", default="")
    ap.add_argument("--driver-host", required=True)
    ap.add_argument("--s3a", default="", help="endpoint,access_key,secret_key: write through S3A")
    ap.add_argument("--jars", default="", help="directory of extra jars (hadoop-aws) for driver and executors")
    a = ap.parse_args()
    from pyspark.sql import SparkSession

    b = (
        SparkSession.builder.master(a.master)
        .appName("lakemount-cluster-etl")
        .config("spark.driver.host", a.driver_host)
        .config("spark.driver.bindAddress", a.driver_host)
        .config("spark.executor.memory", "512m")
        .config("spark.cores.max", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
    )
    if a.jars:
        import glob

        from tests.spark_s3a.s3a_job import JAVA_OPTS

        cp = ":".join(sorted(glob.glob(os.path.join(a.jars, "*.jar"))))
        b = (
            b.config("spark.driver.extraJavaOptions", JAVA_OPTS)
            .config("spark.executor.extraJavaOptions", JAVA_OPTS)
            .config("spark.driver.extraClassPath", cp)
            .config("spark.executor.extraClassPath", cp)
        )
    if a.s3a:
        endpoint, key, secret = a.s3a.split(",")
        b = (
            b.config("spark.hadoop.fs.s3a.endpoint", endpoint)
            .config("spark.hadoop.fs.s3a.path.style.access", "true")
            .config("spark.hadoop.fs.s3a.access.key", key)
            .config("spark.hadoop.fs.s3a.secret.key", secret)
            .config("spark.hadoop.fs.s3a.connection.ssl.enabled", "false")
            .config("spark.hadoop.fs.s3a.aws.credentials.provider", "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider")
        )
    spark = b.getOrCreate()
    t0 = time.monotonic()
    df = spark.range(0, ROWS, numPartitions=4).selectExpr(
        "id", "cast(id % 4 as int) as part", "sha2(cast(id as string), 256) as digest"
    )
    df.write.partitionBy("part").parquet(a.out)
    wrote = time.monotonic() - t0
    commit = ""
    if a.commit:
        with open(os.path.join(a.commit, ".lakefs/commit"), "w") as f:
            f.write("etl: partitioned parquet\n")
        with open(os.path.join(a.commit, ".lakefs/head")) as f:
            commit = f.read().strip()
    if a.merge_into:
        with open(os.path.join(a.merge_into, ".lakefs/merge"), "w") as f:
            f.write(os.path.basename(a.commit.rstrip("/")) + "\n")
    back = spark.read.parquet(a.out)
    n = back.count()
    bad = back.filter("sha2(cast(id as string), 256) != digest or part != id % 4").count()
    hosts = sorted({e.host() for e in spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()} - {a.driver_host})
    spark.stop()
    print(json.dumps({"rows": n, "bad": bad, "seconds": time.monotonic() - t0, "write_seconds": wrote,
                      "commit": commit, "executor_hosts": hosts}))


if __name__ == "__main__":
    main()
