"""Spark writing through the mount (issue 36, item 4): a partitioned Parquet dataset into a branch, vs a local folder and S3A.

    .venv/bin/python benchmarks/spark_mount_bench.py [--big 200] [--big-mib 8] [--small 20000] [--small-kib 8]
        [--committer 1,2] [--writeback] [--s3a] [--spark32] [--targets local,mount,s3a] [--warm-files N]
        [--kernel-passthrough]

One PySpark session (``local[2]``; benchmarks/spark_bench_job.py in a process of its own)
writes the same dataset, FileOutputCommitter algorithm v1 and v2, to each target in turn:

- ``local``: ``file://`` into a local folder (the baseline: the same disk, no FUSE);
- ``mount``: ``file://`` into ``<mount>/bench/main/...`` (a ``lakemount mount`` of an
  embedded store, with ``--writeback`` when asked), then committed with
  ``echo msg > .lakefs/commit``;
- ``s3a`` (with ``--s3a``): ``s3a://bench/main/...`` through ``lakemount serve`` (two workers)
  on an embedded store of its own, then committed with ``lakemount commit`` (a process of
  its own: its start is in the figure).  Hadoop's S3A needs the hadoop-aws jars, which fit
  the pyspark 3.2.4 of ``.venv-spark32`` (``scripts/install_spark_s3a.sh``), so with
  ``--s3a`` every target is written by that Spark; without it, by the project venv's.

Two datasets: ``--big`` files of about ``--big-mib`` MiB and ``--small`` files of
about ``--small-kib`` KiB (random doubles, one file per partition value: the
dataset is partitioned by ``p``).  Each figure prints seconds, the target/local
ratio (local seconds over target seconds: 1.0 is the local folder's speed), the
Parquet files each target holds (``_temporary`` must be gone), the commit's time and
the load average when the write ended.  The mount's renames are counted in its
``.lakefs/stats`` (the committers' moves out of ``_temporary``: metadata only), and so are, per
Parquet file written to it, its lookups (and those that found nothing), flushes and saves.
``--spark32`` writes with the pyspark 3.2.4 of ``.venv-spark32`` also without ``--s3a``.
``--kernel-passthrough`` adds a target ``mount-pt``: a second mount (a home of its own) with
``mount.passthrough`` on (stop 54: the kernel writes the temp files, no request per 4 KiB write),
written right after ``mount``, for an A/B in one run.
``--targets`` picks which targets are written (``local`` always: it is the baseline of
every ratio; naming ``s3a`` implies ``--s3a``); without it, ``local,mount`` and ``s3a``
with ``--s3a``.  Without ``mount`` nothing is mounted and no mount figures are printed.
``--warm-files N`` makes the untimed warm-up write of each dataset its first ``N`` files
(default: all of them, as before), which at 20,000 small files saves a write as long as
the local one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

from writeback_bench import env_for, lakemount, mounted  # noqa: E402

REPO = "bench"
JOB = os.path.join(HERE, "spark_bench_job.py")
SPARK32 = Path(os.environ.get("SPARK_S3A_VENV", os.path.join(ROOT, ".venv-spark32")))


def parquet_files(root: str) -> int:
    return sum(1 for _d, _s, names in os.walk(root) for n in names if n.endswith(".parquet"))


def mount_commit(home: str, branch: str, label: str, path: str) -> tuple[float, int, bool]:
    """(seconds of ``echo label > .lakefs/commit``, parquet files under ``path`` in the branch, a _temporary left)."""
    t = time.perf_counter()
    subprocess.run(["sh", "-c", f'echo "{label}" > "{branch}/.lakefs/commit"'], check=True, timeout=3600,
                   env=env_for(home))
    seconds = time.perf_counter() - t
    left = any("_temporary" in d for d, _s, _n in os.walk(os.path.join(branch, path)))
    return seconds, parquet_files(os.path.join(branch, path)), left


def gateway_commit(gw: object, label: str, path: str) -> tuple[float, int, bool]:
    """(seconds of ``lakemount commit``, parquet files the commit holds under ``path``, a _temporary left)."""
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "lakemount.cli.main", "commit", f"lakefs://{REPO}/main", "-m", label,
                          "--json"], check=True, capture_output=True, text=True, timeout=3600,
                         env=gw.env)  # type: ignore[attr-defined]
    seconds = time.perf_counter() - t
    commit_id = json.loads(out.stdout)["id"]
    paths = [item.path for item in gw.app().catalog.list(REPO, commit_id, f"{path}/")]  # type: ignore[attr-defined]
    return seconds, sum(p.endswith(".parquet") for p in paths), any("_temporary" in p for p in paths)


def gateway_requests(home: str) -> dict[str, list[float]]:
    """The S3 requests the gateway's workers have answered so far: operation -> [count, seconds, of them >= 400]."""
    from lakemount.serving import metrics

    time.sleep(2 * metrics.PUBLISH_INTERVAL)  # each worker publishes its counters once a second
    out: dict[str, list[float]] = {}
    for snap in metrics.collect(home):
        if snap.get("server") != "s3":
            continue
        for op, status, n in snap["requests"]:
            row = out.setdefault(op, [0, 0.0, 0])
            row[0] += n
            row[2] += n if int(status) >= 400 else 0
        for op, (_counts, seconds) in snap["latency"].items():
            out.setdefault(op, [0, 0.0, 0])[1] += seconds
    return out


def chosen_targets(parser: argparse.ArgumentParser, spec: str | None, s3a: bool) -> list[str]:
    """The targets to write, in the order they are written: ``local`` first (the ratios' baseline)."""
    if spec is None:
        return ["local", "mount", *(["s3a"] if s3a else [])]
    names = [n.strip() for n in spec.split(",") if n.strip()]
    unknown = sorted(set(names) - {"local", "mount", "s3a"})
    if unknown or "local" not in names or len(set(names)) != len(names):
        parser.error(f"--targets {spec!r}: name each of local, mount, s3a at most once, local among them")
    return [n for n in ("local", "mount", "s3a") if n in names]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--big", type=int, default=200, help="files of the large dataset (default 200)")
    parser.add_argument("--big-mib", type=int, default=8)
    parser.add_argument("--small", type=int, default=20_000, help="files of the small dataset (default 20,000)")
    parser.add_argument("--small-kib", type=int, default=8)
    parser.add_argument("--committer", default="1,2", help="FileOutputCommitter algorithm versions to run")
    parser.add_argument("--writeback", action="store_true", help="mount with --writeback")
    parser.add_argument("--kernel-passthrough", action="store_true",
                        help="a target mount-pt: a second mount with mount.passthrough on")
    parser.add_argument("--s3a", action="store_true", help="a third target: s3a:// through the gateway (Spark 3.2.4)")
    parser.add_argument("--dir", default=".", help="where the run's temporary directory goes")
    parser.add_argument("--spark32", action="store_true",
                        help="write with the pyspark 3.2.4 of .venv-spark32 also without --s3a (its Hadoop 3.3.1 "
                             "spawns chmod per file and directory it makes)")
    parser.add_argument("--targets", help="comma-separated targets to write, local always among them "
                        "(default local,mount, plus s3a with --s3a; s3a implies --s3a)")
    parser.add_argument("--warm-files", type=int, default=0,
                        help="files of each dataset written untimed to warm up (default 0: all of them)")
    args = parser.parse_args()
    targets = chosen_targets(parser, args.targets, args.s3a)
    args.s3a = "s3a" in targets
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a kill stops Spark, the gateway and the mount too
    python = sys.executable
    if args.spark32 and not args.s3a:
        python = str(SPARK32 / "bin" / "python")
        if not os.path.exists(python):
            raise SystemExit(f"--spark32 needs {SPARK32}: run scripts/install_spark_s3a.sh")
    if args.s3a:
        python = str(SPARK32 / "bin" / "python")
        if not os.path.exists(python) or len(
            [j for j in ("hadoop-aws-3.3.1.jar", "aws-java-sdk-bundle-1.11.901.jar") if (SPARK32 / "jars" / j).exists()]
        ) < 2:
            raise SystemExit(f"--s3a needs {SPARK32} with its jars: run scripts/install_spark_s3a.sh")
    root = tempfile.mkdtemp(prefix="sparkbench-", dir=args.dir)
    home, mp, local = (os.path.join(root, n) for n in ("home", "mnt", "local"))
    os.makedirs(home, mode=0o700)
    os.makedirs(local)
    lakemount(home, "repo", "create", f"lakefs://{REPO}")
    branch = os.path.join(mp, REPO, "main")
    mounts: dict[str, tuple[str, str, str, dict[str, str]]] = {}  # target -> (home, mountpoint, branch dir, environment)
    if "mount" in targets:
        mounts["mount"] = (home, mp, branch, {})
    if args.kernel_passthrough:
        home_pt, mp_pt = os.path.join(root, "home-pt"), os.path.join(root, "mnt-pt")
        os.makedirs(home_pt, mode=0o700)
        lakemount(home_pt, "repo", "create", f"lakefs://{REPO}")
        mounts["mount-pt"] = (home_pt, mp_pt, os.path.join(mp_pt, REPO, "main"), {"LAKEMOUNT_MOUNT_PASSTHROUGH": "on"})
    cfg: dict[str, object] = {
        "targets": {"local": f"file://{local}", **{name: f"file://{m[2]}" for name, m in mounts.items()}},
        "warm": f"file://{local}/warm",
        "warm_files": args.warm_files,
        "sets": [[n, f, s] for n, f, s in (("big", args.big, args.big_mib << 20), ("small", args.small, args.small_kib << 10))
                 if f],
        "committers": [int(c) for c in args.committer.split(",")],
    }
    results: list[dict[str, object]] = []
    with contextlib.ExitStack() as stack:
        for m_home, m_mp, _branch, m_env in mounts.values():
            stack.enter_context(mounted(m_home, m_mp, ["--writeback"] if args.writeback else [], **m_env))
        gw, gw_home = None, ""
        if args.s3a:
            from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET, running_gateway

            gw = stack.enter_context(running_gateway(Path(root) / "gw"))
            gw_home = str(gw.home)
            lakemount(str(gw.home), "repo", "create", f"lakefs://{REPO}")
            cfg["targets"]["s3a"] = f"s3a://{REPO}/main"  # type: ignore[index]
            cfg["s3a"] = {"endpoint": gw.url, "key": ADMIN_KEY, "secret": ADMIN_SECRET, "jars": str(SPARK32 / "jars")}
        env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "SPARK_HOME", "VIRTUAL_ENV")}
        env.update(PYSPARK_PYTHON=python, PATH=f"{os.path.dirname(python)}:{env.get('PATH', '/usr/bin:/bin')}")
        job = subprocess.Popen([python, JOB, json.dumps(cfg)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                               env=env, cwd=root)
        stack.callback(lambda: (job.kill(), job.wait()) if job.poll() is None else None)
        assert job.stdin is not None and job.stdout is not None
        spark = "?"
        before: dict[str, list[float]] = {}
        for line in job.stdout:
            if not line.startswith("{"):
                continue
            done = json.loads(line)
            if "spark" in done:
                spark = done["spark"]
                continue
            done["load"] = os.getloadavg()[0]
            label = f"{done['set']} v{done['committer']} {done['target']}"
            if done["target"] == "s3a":  # what S3A asked of the gateway for this write (the commit below is not S3)
                after = gateway_requests(gw_home)
                done["requests"] = {op: [a - b for a, b in zip(row, before.get(op, [0, 0.0, 0]), strict=True)]
                                    for op, row in after.items() if row[0] > before.get(op, [0])[0]}
            if done["target"] in mounts:
                m_home, _mp, m_branch, _env = mounts[str(done["target"])]
                done["commit"], done["files"], left = mount_commit(m_home, m_branch, label, str(done["path"]))
            elif done["target"] == "s3a":
                done["commit"], done["files"], left = gateway_commit(gw, label, str(done["path"]))
            else:
                done["commit"], left = 0.0, False
                done["files"] = parquet_files(os.path.join(local, str(done["path"])))
            assert not left, f"{label}: the committer left _temporary"
            results.append(done)
            print(f"  {label}: {done['seconds']:.1f} s, {done['files']} files, commit {done['commit']:.2f} s, "
                  f"load {done['load']:.1f}", flush=True)
            if args.s3a and done["target"] != "s3a":  # s3a is written last of each round: the count before it
                before = gateway_requests(gw_home)
            job.stdin.write("next\n")
            job.stdin.flush()
        assert job.wait() == 0, f"the Spark job exited {job.returncode}"
        stats: list[str] = []
        if "mount" in targets:
            with open(os.path.join(mp, ".lakefs", "stats")) as f:
                stats = [line.strip() for line in f if not line.startswith("#")]
        renames = [line for line in stats if 'op="rename"' in line and "_total" in line]
        pt_opens = pt_writes = 0.0
        if args.kernel_passthrough:
            with open(os.path.join(mounts["mount-pt"][1], ".lakefs", "stats")) as f:
                for line in f:
                    if line.startswith("lakemount_fuse_passthrough_opens_total"):
                        pt_opens = float(line.split()[-1])
                    elif line.startswith('lakemount_fuse_ops_total{op="write"}'):
                        pt_writes = float(line.split()[-1])
        counted = {name: next((float(line.split()[-1]) for line in stats if line.startswith(prefix)), 0.0)
                   for name, prefix in (("lookups", 'lakemount_fuse_ops_total{op="lookup"}'),
                                        ("absent", 'lakemount_fuse_op_errors_total{op="lookup",errno="ENOENT"}'),
                                        ("flushes", 'lakemount_fuse_ops_total{op="flush"}'),
                                        ("saves", "lakemount_fuse_saved_files_total"))}
    mode = "no mount" if "mount" not in targets else "mount: write-back" if args.writeback else "mount: no write-back"
    print(f"\nPySpark {spark} local[2] writing partitioned Parquet ({mode}), one run, {os.cpu_count()} cores:")
    print(f"  {'dataset':<34} {'target':<6} {'seconds':>8} {'local/target':>13} {'files':>7} {'commit':>8} {'load':>5}")
    sizes = {"big": f"{args.big} x {args.big_mib} MiB", "small": f"{args.small} x {args.small_kib} KiB"}
    for r in results:
        base = next(b for b in results if b["set"] == r["set"] and b["committer"] == r["committer"] and b["target"] == "local")
        ratio = float(base["seconds"]) / float(r["seconds"])  # type: ignore[arg-type]
        print(f"  {sizes[str(r['set'])] + ', committer v' + str(r['committer']):<34} {r['target']:<6} "
              f"{r['seconds']:7.1f}s {ratio:12.2f}x {r['files']:>7} {r['commit']:7.2f}s {r['load']:5.1f}")
    for r in results:
        if "requests" in r:  # renames through S3A are a copy and a delete per object
            reqs = sorted(r["requests"].items(), key=lambda kv: -kv[1][0])  # type: ignore[attr-defined]
            print(f"  S3 requests of {sizes[str(r['set'])]}, committer v{r['committer']} through the gateway "
                  f"(count, seconds answering, of them errors; per Parquet file): "
                  + "; ".join(f"{op} {int(n)}, {sec:.1f} s, {int(err)} err, {n / max(1, int(r['files'])):.2f}/file"  # type: ignore[call-overload]
                              for op, (n, sec, err) in reqs))
    if args.kernel_passthrough:
        print(f"  mount-pt: passthrough opens {pt_opens:.0f}, WRITE requests {pt_writes:.0f}")
    if "mount" in targets:
        print(f"  the mount's renames (the committers' moves out of _temporary): {'; '.join(renames) or 'none counted'}")
        # Over the whole run (each dataset once per committer, and the untimed first write); a file is a Parquet
        # file and its .crc, which Hadoop's local file system writes beside it.
        parquet = sum(int(r["files"]) for r in results if r["target"] == "mount")  # type: ignore[call-overload]
        print("  the mount's requests per Parquet file written to it: "
              + ", ".join(f"{name} {n / max(1, parquet):.2f}" for name, n in counted.items()))
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
