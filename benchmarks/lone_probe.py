"""Where a lone writer's time goes, per file, ``staging.backend`` lsm vs sql (issue 26's lone-writer line).

One writer host ``w1`` with two mounts (``/lake-sql``, ``/lake-lsm``) over PostgreSQL
(``db``) and moto (``s3``, counting its requests).  A Python loop creates ``--files``
1 KiB files (open/write/close) in a new directory of each mount, alternating rounds;
per file: PostgreSQL statements by text (``pg_stat_statements``), transactions,
object-store requests, the mount's per-operation handler time (``.lakefs/stats``),
the mount process's CPU, and the loop's wall time.

Run as root: ``PYTHONPATH=. python benchmarks/lone_probe.py [--files 300] [--rounds 2]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import cluster_bench  # noqa: E402
from tests.cluster.harness import PYTHON, Cluster, Host, available, cluster, remove_stale  # noqa: E402

BACKENDS = ("sql", "lsm")

LOOP = r"""
import json, os, sys, time
root, n = sys.argv[1], int(sys.argv[2])
os.mkdir(root)
t = time.perf_counter()
for i in range(n):
    with open(f"{root}/f{i:05d}", "wb") as f:
        f.write((b"%s %d " % (root.encode(), i) + b"z" * 1024)[:1024])
print(json.dumps({"seconds": time.perf_counter() - t}))
"""


def env(c: Cluster, host: Host, backend: str) -> dict[str, str]:
    home = f"{host.home}/{backend}"
    os.makedirs(home, mode=0o700, exist_ok=True)
    return Cluster.env(c, host, LAKEMOUNT_HOME=home, LAKEMOUNT_STAGING_BACKEND=backend)


def statements(c: Cluster) -> dict[str, tuple[float, float]]:
    out = c.pg_query(c["db"], "SELECT query, calls, total_exec_time FROM pg_stat_statements s JOIN pg_database d "
                     "ON d.oid = s.dbid WHERE d.datname = 'lake' AND s.query NOT LIKE '%pg_stat%'")
    res: dict[str, tuple[float, float]] = {}
    for line in out.splitlines():
        parts = line.rsplit("|", 2)
        if len(parts) == 3:
            q = " ".join(parts[0].split())[:150]
            a, b = res.get(q, (0.0, 0.0))
            res[q] = (a + float(parts[1]), b + float(parts[2]))
    return res


def xacts(c: Cluster) -> float:
    return float(c.pg_query(c["db"], "SELECT pg_stat_clear_snapshot(), xact_commit FROM pg_stat_database WHERE datname = 'lake'")
                 .split("|")[1])


def fuse(host: Host, mnt: str) -> tuple[dict[str, tuple[float, float]], str]:
    """Per operation (seconds in the handlers, calls) from the mount's ``.lakefs/stats``, and the stats' text."""
    out: dict[str, tuple[float, float]] = {}
    text = host.run("cat", f"{mnt}/.lakefs/stats").stdout
    for line in text.splitlines():
        for kind, i in (("lakemount_fuse_op_seconds_sum{", 0), ("lakemount_fuse_op_seconds_count{", 1)):
            if line.startswith(kind):
                op = line.split('op="', 1)[1].split('"', 1)[0]
                v = list(out.get(op, (0.0, 0.0)))
                v[i] += float(line.rsplit(" ", 1)[1])
                out[op] = (v[0], v[1])
    return out, text


def cpu(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def mount_processes() -> list[tuple[int, list[bytes]]]:
    """(pid, argv) of every Python process running ``lakemount mount``."""
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                cmd = Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"mount" in cmd and b"python" in cmd[0]:
                out.append((int(p), cmd))
    return out


def mount_pid(mnt: str) -> int:
    for pid, cmd in mount_processes():
        if mnt.encode() in cmd:
            return pid
    raise RuntimeError(f"no mount process for {mnt}")


def all_mounts(prefix: str) -> list[int]:
    return [pid for pid, cmd in mount_processes() if any(x.startswith(prefix.encode()) for x in cmd)]


def store(c: Cluster) -> dict[str, float]:
    code = "import sys, urllib.request\nprint(urllib.request.urlopen(sys.argv[1] + '/__counts', timeout=30).read().decode())"
    return {k: float(v) for k, v in json.loads(c["w1"].python(code, c.s3_endpoint, timeout=60).strip().splitlines()[-1]).items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--stats", action="store_true", help="print the lsm mount's .lakefs/stats at the end")
    ap.add_argument("--others", type=int, default=0, help="idle hosts with both mounts too (their CPU is reported)")
    a = ap.parse_args()
    why = available()
    if why:
        raise SystemExit(why)
    remove_stale()
    others = [f"o{i}" for i in range(a.others)]
    with cluster(["db", "w1", *others], deadline=3000) as c:
        w1 = c["w1"]
        cluster_bench.start_moto(c, w1)
        pids = {}
        for backend in BACKENDS:
            w1.run(PYTHON, "-m", "lakemount.cli.main", "repo", "create", f"lakefs://r{backend}", timeout=120,
                   env=env(c, w1, backend))
            base = c.env
            c.env = lambda h, _b=backend, **extra: env(c, h, _b) | extra  # type: ignore[method-assign]
            try:
                c.add_mount(w1, ["--head-ttl", "1"], mountpoint=f"/lake-{backend}", timeout=120)
            finally:
                c.env = base  # type: ignore[method-assign]
            pids[backend] = mount_pid(f"/lake-{backend}")
            for o in others:
                c.env = lambda h, _b=backend, **extra: env(c, h, _b) | extra  # type: ignore[method-assign]
                try:
                    c.add_mount(c[o], ["--head-ttl", "1"], mountpoint=f"/lake-{backend}", timeout=120)
                finally:
                    c.env = base  # type: ignore[method-assign]
            w1.python(LOOP, f"/lake-{backend}/r{backend}/main/warm", "20", timeout=600)
        for rnd in range(a.rounds):
            for backend in BACKENDS:
                mnt = f"/lake-{backend}"
                time.sleep(1.2)
                rest = [p for p in all_mounts("/lake-") if p not in pids.values()]
                r0 = {p: cpu(p) for p in rest}
                s0, x0, f0, c0, o0 = statements(c), xacts(c), fuse(w1, mnt)[0], cpu(pids[backend]), store(c)
                spies = []
                if os.environ.get("SPY"):
                    import subprocess
                    for p in [pids[backend], *rest]:
                        spies.append(subprocess.Popen([os.environ["SPY"], "record", "-p", str(p), "-d", "12", "-r", "200", "-f", "raw", *os.environ.get("SPYARGS", "").split(),
                                                       "-o", f"/tmp/spy-{backend}-{rnd}-{p}.txt"],
                                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                wall = json.loads(w1.python(LOOP, f"{mnt}/r{backend}/main/d{rnd}", str(a.files), timeout=1800)
                                  .strip().splitlines()[-1])["seconds"]
                c1 = cpu(pids[backend])
                for sp in spies:
                    sp.wait()
                r1 = {p: cpu(p) - r0[p] for p in rest}
                time.sleep(1.2)
                s1, x1, f1, o1 = statements(c), xacts(c), fuse(w1, mnt)[0], store(c)
                n = a.files
                print(f"== {backend} round {rnd}: {n / wall:.1f} files/s, wall {wall * 1e3 / n:.1f} ms/file, mount CPU "
                      f"{(c1 - c0) * 1e3 / n:.1f} ms/file, xacts {(x1 - x0) / n:.2f}/file, load {os.getloadavg()[0]:.2f}")
                print("   other mounts' CPU ms/file: " + ", ".join(f"{p}:{v * 1e3 / n:.1f}" for p, v in r1.items()))
                print("   s3 per file: " + ", ".join(f"{k} {(o1.get(k, 0) - o0.get(k, 0)) / n:.2f}" for k in sorted(o1)))
                print("   fuse ms/file (calls/file): " + ", ".join(
                    f"{op} {(v[0] - f0.get(op, (0, 0))[0]) * 1e3 / n:.2f} ({(v[1] - f0.get(op, (0, 0))[1]) / n:.2f})"
                    for op, v in sorted(f1.items()) if v[1] - f0.get(op, (0, 0))[1] > 0))
                tot = 0.0
                for q, (calls, ms) in sorted(s1.items(), key=lambda kv: -(kv[1][0] - s0.get(kv[0], (0, 0))[0])):
                    d = calls - s0.get(q, (0, 0))[0]
                    if d > 0:
                        tot += d
                        print(f"   {d / n:6.2f} stmts/file {(ms - s0.get(q, (0, 0))[1]) / d:6.3f} ms  {q}")
                print(f"   total statements/file {tot / n:.2f}")
        if a.stats:
            print(fuse(w1, "/lake-lsm")[1])


if __name__ == "__main__":
    main()
