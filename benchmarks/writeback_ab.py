"""Write-back A/B through the kernel, two source trees in one run (issue 36, stop 50).

    PYTHONPATH=. .venv/bin/python benchmarks/writeback_ab.py --files 10000 --rounds 3 A_TREE B_TREE   # as root

``A_TREE`` and ``B_TREE`` are checkouts (e.g. ``git worktree add --detach /tmp/base REV``, with this
checkout's ``lakemount/*/*.so`` copied in).  One embedded store; each round copies the same
``--files`` 1 KiB files with ``cp -r`` into benchmarks/passthrough_fs.py (the ceiling, measured in
that round) and then into a ``lakemount mount --writeback`` of each tree (``PYTHONPATH`` set to it;
the order alternates per round, so what changes over the minutes lands on both).  Prints files/s,
the ratio to the round's passthrough, the mount's CPU per file (``/proc``), the kernel requests its
Python handlers answered per file (``.lakefs/stats``) and files whose bytes the branch does not hold (0
expected).

Stop 52: ``--plain`` mounts without ``--writeback``; ``--env-a``/``--env-b KEY=VALUE`` set a variable for
that arm's mount process only (``KFLAGS_FAST=calls`` or ``off``: the shim's fast path without its drain, or
none, for an A/B of one tree against itself); each line also gives the requests the shim answered in C from
the adapter's fast methods per file (``fast``) and those its drains read (``drained``).  Stop 57: with the drain's
wait for the next request (``KFLAGS_DRAIN_WAIT_US``, 0: none), the waits a request ended and all waits per file.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import writeback_bench as wb  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a_tree")
    parser.add_argument("b_tree")
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--plain", action="store_true", help="mount without --writeback")
    parser.add_argument("--env-a", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--env-b", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    envs = {"A": dict(e.split("=", 1) for e in args.env_a), "B": dict(e.split("=", 1) for e in args.env_b)}
    mode = "plain" if args.plain else "writeback"
    n, trees = args.files, {"A": os.path.abspath(args.a_tree), "B": os.path.abspath(args.b_tree)}
    root = tempfile.mkdtemp(prefix="wbab-")
    home = os.path.join(root, "home")
    os.makedirs(home, mode=0o700)
    try:
        src = wb.make_source(root, n, 1024)
        wb.lakemount(home, "repo", "create", f"lakefs://{wb.REPO}")
        k = 0
        for r in range(args.rounds):
            with wb.passthrough(os.path.join(root, f"pt-backing{r}"), os.path.join(root, f"pt{r}")):
                pt = n / wb.cp(src, os.path.join(root, f"pt{r}", "src"))
            print(f"round {r + 1}: passthrough {pt:,.0f} files/s  load {os.getloadavg()[0]:.1f}", flush=True)
            for label in ("A", "B") if r % 2 == 0 else ("B", "A"):
                k += 1
                branch = f"b{k}"
                wb.lakemount(home, "branch", "create", f"lakefs://{wb.REPO}/{branch}", "--source", f"lakefs://{wb.REPO}/main")
                # The mount process imports that tree's lakemount: ``python -m`` puts its working directory before
                # PYTHONPATH, so it starts in the tree (before stop 51 it started here, and both arms ran this checkout).
                os.environ["PYTHONPATH"] = trees[label]
                mp = os.path.join(root, f"mnt{k}")
                here = os.getcwd()
                os.chdir(trees[label])
                try:
                    with wb.mounted(home, mp, [] if args.plain else ["--writeback"], **envs[label]):
                        os.chdir(here)
                        with open(wb.runner.pid_file(home, mp)) as f:
                            pid = int(f.read())
                        loaded = _tree_loaded(pid)
                        assert loaded == trees[label], f"the {label} mount runs {loaded}, not {trees[label]}"
                        before = _cpu(pid)
                        asked, shim = _requests(mp), _shim(mp)
                        took = wb.cp(src, os.path.join(mp, wb.REPO, branch, "src"))
                        cpu = _cpu(pid) - before
                        asked = _requests(mp) - asked
                        shim = {k: v - shim.get(k, 0) for k, v in _shim(mp).items()}
                finally:
                    os.chdir(here)
                    os.environ.pop("PYTHONPATH", None)
                wrong = wb.check(home, branch, src)
                fast = sum(v for k, v in shim.items() if k.startswith("fast_") and k != "fast_failed")
                print(f"round {r + 1}: {label} {mode} {n / took:,.0f} files/s (x{n / took / pt:.2f} of passthrough), "
                      f"mount CPU {cpu / n * 1000:.2f} ms/file, requests reaching Python {asked / n:.2f}/file "
                      f"(fast {fast / n:.2f}, drained {shim.get('drained', 0) / n:.2f}"
                      + (f", waited {shim['drain_waited'] / n:.2f} of {shim['drain_waits'] / n:.2f} waits"
                         if shim.get("drain_waits") else "")
                      + f"), wrong {wrong}, "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _tree_loaded(pid: int) -> str:
    """The checkout whose lakemount process ``pid`` imported, from where its open-reply shim is mapped."""
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            path = line.split()[-1]
            if "/lakemount/fuse/_kflags" in path:
                return path.split("/lakemount/fuse/_kflags")[0]
    return "?"


def _requests(mp: str) -> int:
    """Kernel requests the mount's handlers answered so far (its ``.lakefs/stats``; the shim's answers in C apart)."""
    with open(os.path.join(mp, ".lakefs", "stats")) as f:
        return sum(int(line.rsplit(" ", 1)[1]) for line in f if line.startswith("lakemount_fuse_ops_total{"))


def _shim(mp: str) -> dict[str, int]:
    """The shim's fast-path counters (``lakemount_fuse_kernel_fast_*``, ``..._drained``...; none before stop 52)."""
    out = {}
    with open(os.path.join(mp, ".lakefs", "stats")) as f:
        for line in f:
            name, value = line.rsplit(" ", 1)
            if name.startswith(("lakemount_fuse_kernel_fast_", "lakemount_fuse_kernel_declined_", "lakemount_fuse_kernel_drain")):
                out[name.removeprefix("lakemount_fuse_kernel_")] = int(value)
    return out


def _cpu(pid: int) -> float:
    """User + system seconds of process ``pid`` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    main()
