"""Writes into a local folder and into mounts of several code trees, in one run, interleaved (issue 36, stop 50).

    .venv/bin/python benchmarks/tree_write_ab.py [--mib 256] [--rounds 2] [--figs dd4k,dd1M,cp,cp+sync] \\
        [--passthrough] NAME=TREE[:wbc|:pt=on|:pt=off|:wb|:wb+pt|:wbs|:wbs+pt] ...   # as root

Each ``NAME=TREE`` is a checkout (``git worktree add --detach /tmp/base REV``, its C extensions built
with ``setup.py build_ext --inplace``): its mount runs that tree's lakemount (started from the tree, and
``python -m`` puts the working directory first on ``sys.path``).  All mounts are up before the first
figure; each figure is written into the local folder and then into every mount, in reverse order every
other round.  ``benchmarks/ab_revs.py`` refuses revisions whose C sources differ; this does not.
``:wbc`` puts ``LM36_EXP_WBC=1`` in that mount's environment, which only an experiment build reads (stop
50 measured the kernel's writeback cache with one).  ``:pt=on`` / ``:pt=off`` sets that mount's ``mount.passthrough`` (stop 54: FUSE passthrough of
write-only opens); ``:wb`` turns that mount's ``mount.writeback`` on (stop 55), ``:wb+pt`` with passthrough on too, ``:wbs`` and ``:wbs+pt`` the same with ``mount.journal_fsync`` (a close syncs what it journals).  ``--passthrough`` adds ``benchmarks/passthrough_fs.py``
(the pyfuse3 ceiling).  Figures: ``dd`` of zeros with ``bs=4k`` and ``bs=1M``, ``conv=fsync``, and
``dd4k-close``: ``bs=4k`` without the fsync (a close is what makes it durable through the mount); ``cp`` of a
random file; that ``cp`` then ``sync FILE``; ``cp+fsync``: that ``cp`` then an ``fsync`` of the file by this
script, into the local folder only (stop 55: the *durable ceiling*, the least any close that makes the copy
durable on this disk can cost; with it in ``--figs`` each mount's ``cp`` is also printed as x of it); ``cpr4k``: ``cp -r`` of 1,000 4 KiB files (stop 51: what
small files pay; its MB/s counts the files' bytes); ``readback``: a file written with ``dd bs=1M`` (not
timed), then read whole with ``dd`` (timed).  Each line prints MB/s and local/mount; then the best of the
rounds, the CPU seconds each figure cost (stop 51: the writer's, from ``RUSAGE_CHILDREN``, plus the mount
process's own, all its threads, from ``/proc/PID/stat``; summed over the rounds, so less moved by the load
than a wall time), and the FUSE requests each mount counted (``.lakefs/stats``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from large_write_bench import REPO, MiB, mounted, prepare_store, remove, timed  # noqa: E402
from writeback_bench import passthrough  # noqa: E402

SMALL_FILES = 1000  # the ``cpr4k`` figure: ``cp -r`` of a directory of this many 4 KiB random files


def figures(mib: int, src: str, small: str) -> dict[str, Callable[[str], float]]:
    def dd(bs: str, count: int, *conv: str) -> Callable[[str], float]:
        return lambda p: timed(["dd", "if=/dev/zero", f"of={p}", f"bs={bs}", f"count={count}", *conv])

    def readback(p: str) -> float:
        """Written (not timed), then read back whole: what a read right after a large write costs."""
        subprocess.run(["dd", "if=/dev/zero", f"of={p}", "bs=1M", f"count={mib}"], check=True, capture_output=True)
        return timed(["dd", f"if={p}", "of=/dev/null", "bs=1M"])

    return {
        "dd4k": dd("4k", mib * 256, "conv=fsync"),
        "dd4k-close": dd("4k", mib * 256),  # 4 KiB writes, then close (Hadoop's local file system; stop 54)
        "dd1M": dd("1M", mib, "conv=fsync"),
        "cp": lambda p: timed(["cp", src, p]),
        "cp+sync": lambda p: timed(["cp", src, p]) + timed(["sync", p]),
        "cp+fsync": lambda p: timed(["cp", src, p]) + fsync_timed(p),
        "cpr4k": lambda p: timed(["cp", "-r", small, p]),
        "readback": readback,
    }


def fsync_timed(path: str) -> float:
    """Seconds an ``fsync`` of the file at ``path`` takes (its open and close included)."""
    t = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - t


LOCAL_ONLY = {"cp+fsync"}  # figures that are a ceiling of the local disk: not written into the mounts


def check_and_remove(fig: str, path: str, mib: int, where: str) -> None:
    """The figure wrote everything it should have (a whole file, or every small file); then it is removed."""
    if fig == "cpr4k":
        names = os.listdir(path)
        assert len(names) == SMALL_FILES and all(os.stat(os.path.join(path, n)).st_size == 4096 for n in names), where
        shutil.rmtree(path)
        return
    assert os.stat(path).st_size == mib * MiB, (where, os.stat(path).st_size)
    remove(path)


def requests(mp: str) -> dict[str, int]:
    out = {}
    with open(os.path.join(mp, ".lakefs", "stats")) as f:
        for line in f:
            if line.startswith("lakemount_fuse_ops_total"):
                key, value = line.split()
                out[key.split('"')[1]] = int(float(value))
    return out


def cpu_of(pid: int) -> float:
    """CPU seconds (user + system, every thread) process ``pid`` used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def durable_ceiling(best: dict[tuple[str, str], float], others: list[str]) -> None:
    """Print each target's ``cp`` as x of the local ``cp`` (the issue's ratio) and as x of the local ``cp`` then
    ``fsync`` (the durable ceiling: what a close that makes the copy durable on this disk pays at least)."""
    cp, ceiling = best["cp", "local"], best["cp+fsync", "local"]
    print(f"  durable ceiling: the local cp then fsync is x{cp / ceiling:.3f} of the local cp"
          + (" (below the issue's x0.5: a limit of this disk, not of the mount)" if cp / ceiling < 0.5 else ""))
    for w in others:
        print(f"  cp into {w}: x{cp / best['cp', w]:.2f} of the local cp, x{ceiling / best['cp', w]:.2f} of the durable ceiling")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=256, help="size of each file in MiB")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--figs", default="dd4k,dd1M,cp", help="of dd4k, dd4k-close, dd1M, cp, cp+sync, cp+fsync, cpr4k, readback")
    parser.add_argument("--dir", default="/tmp", help="where the run's files and mounts go (its filesystem is the disk)")
    parser.add_argument("--passthrough", action="store_true", help="add the minimal pyfuse3 passthrough")
    parser.add_argument("trees", nargs="+", help="NAME=TREE, NAME=TREE:wbc, NAME=TREE:pt=on|off, NAME=TREE:wb|wb+pt|wbs|wbs+pt")
    args = parser.parse_args()
    base = tempfile.mkdtemp(prefix="tree-write-ab-", dir=args.dir)
    src = os.path.join(base, "source.bin")
    with open(src, "wb") as f:
        for _ in range(args.mib):
            f.write(os.urandom(MiB))
    small = os.path.join(base, "small")
    if "cpr4k" in args.figs:
        os.makedirs(small)
        for i in range(SMALL_FILES):
            with open(os.path.join(small, f"f{i:04d}"), "wb") as f:
                f.write(os.urandom(4096))
    figs = figures(args.mib, src, small)
    names = args.figs.split(",")
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, base, ignore_errors=True)  # last, once every mount is down: GiBs of files
        targets = {"local": os.path.join(base, "local")}
        os.makedirs(targets["local"])
        if args.passthrough:
            stack.enter_context(passthrough(os.path.join(base, "pt-backing"), os.path.join(base, "pt")))
            targets["passthrough"] = os.path.join(base, "pt")
        mounts = {}
        pids: dict[str, int] = {}
        here = os.getcwd()
        for spec in args.trees:
            name, _, rest = spec.partition("=")
            tree, _, mode = rest.partition(":")
            env = prepare_store(name, base, None) | {"PYTHONPATH": os.path.abspath(tree), "LM36_EXP_WBC": "1" if mode == "wbc" else "0"}
            if mode.startswith("pt="):  # mount.passthrough (stop 54); a tree without that setting refuses the variable
                env["LAKEMOUNT_MOUNT_PASSTHROUGH"] = mode.removeprefix("pt=")
            if mode in ("wb", "wb+pt", "wbs", "wbs+pt"):  # mount.writeback (stop 55); wbs: with mount.journal_fsync
                env["LAKEMOUNT_MOUNT_WRITEBACK"] = "true"
                env["LAKEMOUNT_MOUNT_PASSTHROUGH"] = "on" if mode.endswith("+pt") else "off"
                env["LAKEMOUNT_MOUNT_JOURNAL_FSYNC"] = "true" if mode.startswith("wbs") else "false"
            mp = os.path.join(base, f"mnt-{name}")
            os.chdir(tree)
            try:
                pids[name] = stack.enter_context(mounted(env, mp)).pid
            finally:
                os.chdir(here)
            targets[name], mounts[name] = os.path.join(mp, REPO, "main"), mp
        print(f"{args.mib} MiB per file, {args.rounds} round(s), in {base}; load {os.getloadavg()[0]:.1f}", flush=True)
        best: dict[tuple[str, str], float] = {}
        cpu: dict[tuple[str, str], tuple[float, float]] = {}  # (figure, target) -> (writer's, mount's) CPU seconds
        written = {fig: SMALL_FILES * 4096 if fig == "cpr4k" else args.mib * MiB for fig in names}
        for r in range(args.rounds):
            order = list(targets)[1:] if r % 2 == 0 else list(targets)[:0:-1]
            for fig in names:
                took = {}
                for where in ["local"] if fig in LOCAL_ONLY else ["local", *order]:
                    path = os.path.join(targets[where], f"{fig}-{r}")
                    writer, mount = children_cpu(), cpu_of(pids[where]) if where in pids else 0.0
                    took[where] = figs[fig](path)
                    was = cpu.get((fig, where), (0.0, 0.0))
                    cpu[fig, where] = (was[0] + children_cpu() - writer,
                                       was[1] + (cpu_of(pids[where]) - mount if where in pids else 0.0))
                    check_and_remove(fig, path, args.mib, where)
                    best[fig, where] = min(best.get((fig, where), took[where]), took[where])
                shown = " ".join(f"{w}={written[fig] / took[w] / 1e6:.0f}MB/s" for w in targets if w in took)
                ratios = " ".join(f"{w}=x{took['local'] / took[w]:.2f}" for w in targets if w != "local" and w in took)
                print(f"  round {r + 1} {fig:8} {shown} | local/target {ratios} | load {os.getloadavg()[0]:.1f}", flush=True)
        print("best of the rounds:")
        for fig in names:
            print(f"  {fig:8}", " ".join(f"{w}={written[fig] / best[fig, w] / 1e6:.0f}MB/s(x{best[fig, 'local'] / best[fig, w]:.2f})"
                                       for w in targets if (fig, w) in best))
        if "cp" in names and "cp+fsync" in names:
            durable_ceiling(best, [w for w in targets if w != "local"])
        print(f"CPU seconds per round, the mean of {args.rounds} (writer + mount process):")
        for fig in names:
            print(f"  {fig:8}", " ".join(
                f"{w}={cpu[fig, w][0] / args.rounds:.2f}+{cpu[fig, w][1] / args.rounds:.2f}" for w in targets if (fig, w) in cpu))
        for name, mp in mounts.items():
            print(f"  requests counted by {name}: {requests(mp)}")


if __name__ == "__main__":
    main()
