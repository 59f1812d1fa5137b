"""The Spark side of the S3A end-to-end test; runs INSIDE .venv-spark32 (pyspark 3.2.4).

Not a test module: tests/spark_s3a/test_spark_s3a.py runs it as a subprocess with
``.venv-spark32/bin/python s3a_job.py PHASE --endpoint ... --bucket B --ref R ...``.
Everything goes through Hadoop's S3A connector (hadoop-aws 3.3.1, AWS SDK 1.11.901)
configured only with the settings DESIGN §4 promises: ``fs.s3a.endpoint``,
``fs.s3a.path.style.access=true``, ``fs.s3a.access.key``/``secret.key`` and
``fs.s3a.connection.ssl.enabled=false``.

Phases (``s3a://B/R/`` is the root; R is a branch, or for ``read`` possibly a commit id):

``write``  read ``input/data.csv``; write it as parquet with the default
           FileOutputCommitter to ``out/`` (partitioned by ``category``); mkdirs
           ``made/empty`` and ``made/dir/sub``; create ``made/dir/a.txt`` and
           ``made/dir/sub/b.txt``, rename the file ``made/dir/a.txt`` ->
           ``made/renamed.txt`` and the directory ``made/dir`` -> ``made/moved``;
           create ``made/doomed.txt`` and the directory ``made/gone/`` and delete both;
           write ``made/big.bin`` (12 MiB, a 3-part multipart upload); then check
           everything through S3A, including reading ``out/`` back.
``read``   read ``out/`` and ``made/`` back (used on the commit after the test commits the
           branch) and check rows, values, files and directories.
``all``    ``write`` then ``read`` in one JVM; with ``--read-ref -`` the job stops between the
           two, prints ``{"await_ref": true, ...}`` and reads from stdin the ref to read back
           (the caller commits the branch meanwhile and sends the commit id): one JVM start
           instead of two.

The last stdout line is a JSON summary. A failed check raises (exit status 1) with a message
saying what differed. ``--s3-log`` turns on DEBUG logging of every S3 request the AWS SDK
sends and the status it got (``com.amazonaws.request``) plus S3A's own, on stderr;
``SPARK_S3A_LOG4J`` names a log4j 1.x properties file for the driver (the test uses one that
does this from the start and adds thread names, so requests and responses can be paired).
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import sys
import time

JAVA17_OPENS = [
    "java.base/java.lang",
    "java.base/java.lang.invoke",
    "java.base/java.lang.reflect",
    "java.base/java.io",
    "java.base/java.net",
    "java.base/java.nio",
    "java.base/java.util",
    "java.base/java.util.concurrent",
    "java.base/java.util.concurrent.atomic",
    "java.base/sun.nio.ch",
    "java.base/sun.nio.cs",
    "java.base/sun.security.action",
    "java.base/sun.util.calendar",
]
# C1-only JIT and the serial GC: a short job on a small machine spends less CPU compiling/collecting.
JAVA_OPTS = " ".join(f"--add-opens={m}=ALL-UNNAMED" for m in JAVA17_OPENS) + (
    " -Djava.net.preferIPv4Stack=true -XX:+UseSerialGC -XX:TieredStopAtLevel=1"
)

BIG_SIZE = 12 * 1024 * 1024  # > 2 parts of fs.s3a.multipart.size=5M
BIG_SEED = b"lakemount-spark-s3a"

TEXTS = {
    "made/renamed.txt": "file a, renamed\n",
    "made/moved/sub/b.txt": "file b, inside a renamed directory\n",
}


CATEGORIES = ["alpha", "beta", "gamma delta", "ünï"]  # a space and non-ASCII in partition keys
N_ROWS = 1000


def rows() -> list[tuple[int, str, str, int, float]]:
    """The input table: (id, category, name, qty, price), deterministic."""
    out = []
    for i in range(N_ROWS):
        name = f"item {i}" if i % 7 else f'item, "{i}" – é'  # quoting, commas, non-ASCII
        out.append((i, CATEGORIES[i % len(CATEGORIES)], name, (i * 37) % 101, round((i * 7919 % 10007) / 100.0, 2)))
    return out


def csv_bytes() -> bytes:
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["id", "category", "name", "qty", "price"])
    for r in rows():
        w.writerow([r[0], r[1], r[2], r[3], f"{r[4]:.2f}"])
    return buf.getvalue().encode()


def big_bytes() -> bytes:
    block = hashlib.sha256(BIG_SEED).digest() * (1 << 15)  # 1 MiB of a repeating pattern
    out = bytearray()
    i = 0
    while len(out) < BIG_SIZE:
        out += bytes([i % 251]) + block[1:]
        i += 1
    return bytes(out[:BIG_SIZE])


class Check(Exception):
    pass


def check(cond: bool, what: str) -> None:
    if not cond:
        raise Check(what)


def session(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from pyspark.sql import SparkSession

    jars = sorted(glob.glob(os.path.join(args.jars, "*.jar")))
    names = {os.path.basename(j) for j in jars}
    need = {"hadoop-aws-3.3.1.jar", "aws-java-sdk-bundle-1.11.901.jar"}
    if not need <= names:
        raise SystemExit(f"missing {sorted(need - names)} in {args.jars}: run scripts/install_spark_s3a.sh")
    cp = ":".join(jars)
    java_opts = JAVA_OPTS
    log4j_file = os.environ.get("SPARK_S3A_LOG4J")
    if log4j_file:  # a log4j 1.x properties file (Spark 3.2 uses log4j 1.2)
        java_opts += f" -Dlog4j.configuration=file:{log4j_file}"
    b = (
        SparkSession.builder.master("local[2]")
        .appName("lakemount-s3a-e2e")
        .config("spark.driver.extraJavaOptions", java_opts)
        .config("spark.executor.extraJavaOptions", java_opts)
        .config("spark.driver.extraClassPath", cp)
        .config("spark.executor.extraClassPath", cp)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        # the 30 KB CSV becomes two input splits, so two tasks write and commit in parallel (no shuffle)
        .config("spark.sql.files.maxPartitionBytes", "20k")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        # The S3A settings DESIGN §4 promises to honour:
        .config("spark.hadoop.fs.s3a.endpoint", args.endpoint)
        .config("spark.hadoop.fs.s3a.path.style.access", "true")
        .config("spark.hadoop.fs.s3a.access.key", args.access_key)
        .config("spark.hadoop.fs.s3a.secret.key", args.secret_key)
        .config("spark.hadoop.fs.s3a.connection.ssl.enabled", "false")
        # Test hygiene, not gateway requirements: use only the keys above (no env/instance
        # metadata probing), fail fast instead of retrying for minutes (with S3A's defaults one
        # retried DeleteObjects error costs ~2 min per file written; the test fails on the WARN
        # lines S3A logs for such errors instead), make 12 MiB a multipart upload.
        .config("spark.hadoop.fs.s3a.aws.credentials.provider", "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider")
        .config("spark.hadoop.fs.s3a.attempts.maximum", "2")
        .config("spark.hadoop.fs.s3a.retry.limit", "2")
        .config("spark.hadoop.fs.s3a.retry.interval", "100ms")
        .config("spark.hadoop.fs.s3a.connection.establish.timeout", "5000")
        .config("spark.hadoop.fs.s3a.connection.timeout", "20000")
        .config("spark.hadoop.fs.s3a.multipart.size", "5M")
        .config("spark.hadoop.fs.s3a.multipart.threshold", "5M")
    )
    spark = b.getOrCreate()
    if args.s3_log or not log4j_file:
        log4j = spark.sparkContext._jvm.org.apache.log4j
        if not log4j_file:
            log4j.LogManager.getRootLogger().setLevel(log4j.Level.WARN)
        if args.s3_log:
            for name in ("com.amazonaws.request", "org.apache.hadoop.fs.s3a"):
                log4j.LogManager.getLogger(name).setLevel(log4j.Level.DEBUG)
    return spark


class FS:
    """Hadoop FileSystem calls through py4j on ``s3a://bucket/ref/``."""

    def __init__(self, spark, root: str) -> None:  # type: ignore[no-untyped-def]
        self.jvm = spark.sparkContext._jvm
        self.conf = spark.sparkContext._jsc.hadoopConfiguration()
        self.root = root.rstrip("/")
        self.fs = self.path("").getFileSystem(self.conf)

    def path(self, rel: str):  # type: ignore[no-untyped-def]
        return self.jvm.org.apache.hadoop.fs.Path(f"{self.root}/{rel}" if rel else self.root + "/")

    def write(self, rel: str, data: bytes) -> None:
        out = self.fs.create(self.path(rel), True)
        step = 1 << 20
        for i in range(0, len(data), step):
            out.write(bytearray(data[i : i + step]))
        out.close()

    def read(self, rel: str) -> bytes:
        inp = self.fs.open(self.path(rel))
        try:
            return bytes(self.jvm.org.apache.commons.io.IOUtils.toByteArray(inp))  # py4j: byte[] -> bytes
        finally:
            inp.close()

    def exists(self, rel: str) -> bool:
        return bool(self.fs.exists(self.path(rel)))

    def is_dir(self, rel: str) -> bool:
        return bool(self.fs.getFileStatus(self.path(rel)).isDirectory())

    def ls(self, rel: str) -> list[str]:
        return sorted(
            str(s.getPath().getName()) + ("/" if s.isDirectory() else "") for s in self.fs.listStatus(self.path(rel))
        )

    def walk(self, rel: str) -> list[str]:
        """Every file under rel, relative to rel (S3A's recursive listFiles: one flat listing)."""
        base = str(self.path(rel)).rstrip("/") + "/"
        it = self.fs.listFiles(self.path(rel), True)
        out = []
        while it.hasNext():
            p = str(it.next().getPath())
            out.append(p[len(base) :] if p.startswith(base) else p)
        return sorted(out)


SCHEMA_DDL = "id INT, category STRING, name STRING, qty INT, price DOUBLE"


def check_rows(got: list, what: str) -> None:  # type: ignore[type-arg]
    want = rows()
    got = sorted((r["id"], r["category"], r["name"], r["qty"], r["price"]) for r in got)
    check(len(got) == len(want), f"{what}: {len(got)} rows, want {len(want)}")
    for g, w in zip(got, want):
        check(g == w, f"{what}: row {g!r} != expected {w!r}")


def phase_write(spark, fs: FS, root: str, report: dict) -> None:  # type: ignore[no-untyped-def]
    t = time.monotonic()
    df = spark.read.csv(f"{root}/input/data.csv", header=True, schema=SCHEMA_DDL, escape='"')
    collected = df.collect()
    check_rows(collected, "csv read through s3a")
    report["csv_rows"] = len(collected)
    report["csv_partitions"] = df.rdd.getNumPartitions()

    out = f"{root}/out"
    check(not fs.exists("out"), "out/ exists before the write")
    df.write.partitionBy("category").parquet(out)  # default mode: error if it exists
    names = fs.ls("out")
    check("_SUCCESS" in names, f"no _SUCCESS in out/: {names}")
    check("_temporary/" not in names, f"FileOutputCommitter left out/_temporary: {names}")
    want_dirs = {f"category={c}/" for c in CATEGORIES}
    check(want_dirs <= set(names), f"out/ lists {names}, want the partitions {sorted(want_dirs)}")
    report["parquet_write_s"] = round(time.monotonic() - t, 2)

    # mkdirs
    check(bool(fs.fs.mkdirs(fs.path("made/empty"))), "mkdirs made/empty returned false")
    check(bool(fs.fs.mkdirs(fs.path("made/dir/sub"))), "mkdirs made/dir/sub returned false")
    check(fs.is_dir("made/empty") and fs.is_dir("made/dir/sub"), "mkdirs: not directories")
    check(fs.ls("made/empty") == [], f"made/empty not empty: {fs.ls('made/empty')}")

    # rename a file, then a directory
    fs.write("made/dir/a.txt", b"file a, renamed\n")
    fs.write("made/dir/sub/b.txt", TEXTS["made/moved/sub/b.txt"].encode())
    check(bool(fs.fs.rename(fs.path("made/dir/a.txt"), fs.path("made/renamed.txt"))), "rename of a file returned false")
    check(not fs.exists("made/dir/a.txt"), "renamed file still at its source")
    check(fs.read("made/renamed.txt") == TEXTS["made/renamed.txt"].encode(), "renamed file content differs")
    check(bool(fs.fs.rename(fs.path("made/dir"), fs.path("made/moved"))), "rename of a directory returned false")
    check(not fs.exists("made/dir"), "renamed directory still at its source")
    check(fs.is_dir("made/moved/sub"), "renamed directory: made/moved/sub is not a directory")

    # delete a file, then a directory tree
    fs.write("made/doomed.txt", b"short-lived")
    check(fs.exists("made/doomed.txt"), "made/doomed.txt not there after create")
    check(bool(fs.fs.delete(fs.path("made/doomed.txt"), False)), "delete of a file returned false")
    fs.write("made/gone/x/f.txt", b"f")
    check(bool(fs.fs.mkdirs(fs.path("made/gone/y"))), "mkdirs made/gone/y returned false")
    check(bool(fs.fs.delete(fs.path("made/gone"), True)), "recursive delete returned false")
    check(not fs.exists("made/doomed.txt") and not fs.exists("made/gone"), "deleted paths still exist")

    # a multipart upload (12 MiB in 5 MiB parts)
    fs.write("made/big.bin", big_bytes())
    report["write_s"] = round(time.monotonic() - t, 2)


def phase_read(spark, fs: FS, root: str, report: dict) -> None:  # type: ignore[no-untyped-def]
    t = time.monotonic()
    df = spark.read.parquet(f"{root}/out")
    collected = df.collect()
    check_rows(collected, "parquet read back through s3a")
    counts: dict[str, int] = {}
    for r in collected:
        counts[r["category"]] = counts.get(r["category"], 0) + 1
    want = {c: sum(1 for r in rows() if r[1] == c) for c in CATEGORIES}
    check(counts == want, f"rows per category {counts}, want {want}")
    report["parquet_rows"] = sum(counts.values())
    report["per_category"] = counts

    files = fs.walk("out")
    check("_SUCCESS" in files, f"no out/_SUCCESS: {files}")
    check(not any("_temporary" in f for f in files), f"out/ has _temporary files: {files}")
    parts = [f for f in files if f.endswith(".parquet")]
    check(len(parts) >= len(CATEGORIES), f"too few parquet files under out/: {files}")
    report["out_files"] = len(files)

    made = fs.ls("made")
    check(made == ["big.bin", "empty/", "moved/", "renamed.txt"], f"made/ lists {made}")
    check(fs.is_dir("made/empty") and fs.ls("made/empty") == [], "made/empty is not an empty directory")
    for rel, text in TEXTS.items():
        check(fs.read(rel) == text.encode(), f"{rel}: content differs")
    for gone in ("made/dir", "made/dir/a.txt", "made/doomed.txt", "made/gone", "made/gone/x/f.txt"):
        check(not fs.exists(gone), f"{gone} exists")
    big = fs.read("made/big.bin")
    check(
        hashlib.sha256(big).digest() == hashlib.sha256(big_bytes()).digest(), f"made/big.bin differs ({len(big)} bytes)"
    )
    report["read_s"] = round(time.monotonic() - t, 2)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("phase", choices=["write", "read", "all"])
    ap.add_argument("--endpoint", required=True, help="fs.s3a.endpoint, e.g. http://127.0.0.1:8000")
    ap.add_argument("--access-key", default=os.environ.get("S3A_ACCESS_KEY"))
    ap.add_argument("--secret-key", default=os.environ.get("S3A_SECRET_KEY"))
    ap.add_argument("--bucket", required=True)
    ap.add_argument("--ref", required=True, help="the first path component: a branch, or a commit id to read")
    ap.add_argument(
        "--read-ref",
        help="with phase all: the ref to read back (default: --ref); '-' prints a JSON line with "
        '"await_ref": true after the write and reads the ref from stdin (the caller commits meanwhile)',
    )
    ap.add_argument("--jars", default=os.path.join(sys.prefix, "jars"))
    ap.add_argument("--s3-log", action="store_true", help="DEBUG-log every S3 request and response status")
    args = ap.parse_args(argv)
    if not args.access_key or not args.secret_key:
        ap.error("credentials: --access-key/--secret-key or S3A_ACCESS_KEY/S3A_SECRET_KEY")

    t0 = time.monotonic()
    spark = session(args)
    report: dict = {"phase": args.phase, "ref": args.ref, "startup_s": round(time.monotonic() - t0, 2)}
    root = f"s3a://{args.bucket}/{args.ref}"
    try:
        fs = FS(spark, root)
        if args.phase in ("write", "all"):
            phase_write(spark, fs, root, report)
        if args.phase == "all" and args.read_ref and args.read_ref != args.ref:
            read_ref = args.read_ref
            if read_ref == "-":
                print(json.dumps({**report, "await_ref": True}, ensure_ascii=False), flush=True)
                read_ref = sys.stdin.readline().strip()
                check(bool(read_ref), "no ref to read on stdin")
            report["read_ref"] = read_ref
            root = f"s3a://{args.bucket}/{read_ref}"
            fs = FS(spark, root)
        if args.phase in ("read", "all"):
            phase_read(spark, fs, root, report)
        report["ok"] = True
    except Check as e:
        report.update(ok=False, error=str(e))
    except Exception as e:  # a Java exception through py4j: keep its first line in the summary
        java = getattr(e, "java_exception", None)
        msg = str(java.toString()) if java is not None else f"{type(e).__name__}: {e}"
        report.update(ok=False, error=msg.strip().splitlines()[0] if msg.strip() else type(e).__name__)
        import traceback

        traceback.print_exc()
    finally:
        report["total_s"] = round(time.monotonic() - t0, 2)
        spark.stop()
    print(json.dumps(report, ensure_ascii=False), flush=True)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
