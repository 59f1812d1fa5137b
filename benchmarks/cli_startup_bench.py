"""CLI start-up benchmark (issues 10 and 41): how long ``lakemount --help``, ``fs ls``, ``fs cat``, ``log`` and ``commit`` take.

    .venv/bin/python benchmarks/cli_startup_bench.py [--runs 10] [--warmup 3] [--vs REV_OR_TREE]

Creates a throwaway LAKEMOUNT_HOME on the embedded store (SQLite + local block
store) holding the ``demo`` repository (``lakemount up --no-services``), then
runs hyperfine (Debian package ``hyperfine``) on, in one run: ``python -c pass``
(the interpreter's own start-up, the floor), ``lakemount --help``, ``fs ls``
and ``fs cat`` on ``demo/main``, ``log`` of ``demo/main`` and ``commit
--allow-empty`` on it (a whole commit: hooks looked up, the commit and branch
rows written, the feed appended).  Prints each command's median against its
target (issue 41: --help <= 0.05 s, the others <= 0.15 s), its mean and spread,
its CPU time (user + system, which other load on the machine disturbs less) and
its ratio to the bare interpreter.

``--vs`` times the same commands on another version of the code in the same
run, each command's series on the other version right after this tree's (so
load that drifts during the run weighs on both alike): a directory holding a
``lakemount`` package (another worktree), or a git revision, which is exported
to a temporary directory (``git archive``) with this tree's compiled extensions
copied in.  It prints the ratio this tree / the other per command.

Both sides run the console script of this interpreter's environment with
PYTHONPATH naming their tree, and with bytecode kept under one temporary
PYTHONPYCACHEPREFIX (written during the warm-up runs), so neither tree is
written to and neither pays for compiling, whatever PYTHONDONTWRITEBYTECODE says.
``python -X importtime -m lakemount.cli.main fs ls lakefs://demo/main/`` shows what
a start still imports; ``tests/cli/test_import_budget.py`` keeps the set small.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VERBS = {  # name -> (label, lakemount arguments, target seconds)
    "help": ("lakemount --help", ["--help"], 0.05),
    "ls": ("lakemount fs ls", ["fs", "ls", "lakefs://demo/main/"], 0.15),
    "cat": ("lakemount fs cat", ["fs", "cat", "lakefs://demo/main/README.md"], 0.15),
    "log": ("lakemount log", ["log", "lakefs://demo/main", "--amount", "10"], 0.15),
    "commit": ("lakemount commit", ["commit", "lakefs://demo/main", "-m", "bench", "--allow-empty"], 0.15),
}


def lakemount_command() -> list[str]:
    """The ``lakemount`` console script next to this interpreter (what users run), else ``python -m``."""
    script = os.path.join(os.path.dirname(sys.executable), "lakemount")
    if os.access(script, os.X_OK):
        return [script]
    return [sys.executable, "-m", "lakemount.cli.main"]


def other_tree(spec: str, scratch: str) -> str:
    """The directory holding the ``lakemount`` package of ``--vs``: ``spec`` itself, or git revision ``spec`` exported."""
    if os.path.isdir(os.path.join(spec, "lakemount")):
        return os.path.abspath(spec)
    tree = os.path.join(scratch, "vs")
    os.makedirs(tree)
    archive = subprocess.run(["git", "-C", HERE, "archive", spec, "lakemount"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", tree], input=archive, check=True)
    for built in glob.glob(os.path.join(HERE, "lakemount", "**", "*.so"), recursive=True):
        target = os.path.join(tree, os.path.relpath(built, HERE))
        if not os.path.exists(target):
            shutil.copy2(built, target)
    return tree


def cpu(result: dict[str, float]) -> float:
    """Mean CPU time of one run (user + system): less disturbed than wall time on a busy machine."""
    return result["user"] + result["system"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--vs", metavar="REV_OR_TREE", help="also time this git revision or source tree (the baseline)")
    args = ap.parse_args()
    if shutil.which("hyperfine") is None:
        raise SystemExit("cli_startup_bench: hyperfine is not installed (apt-get install hyperfine)")
    scratch = tempfile.mkdtemp(prefix="lm-cli-bench-")
    home = os.path.join(scratch, "home")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEMOUNT_") and k != "PYTHONDONTWRITEBYTECODE"}
    env["LAKEMOUNT_HOME"] = home
    env["PYTHONPYCACHEPREFIX"] = os.path.join(scratch, "pycache")
    lm = lakemount_command()
    try:
        trees = {"": HERE}
        if args.vs:
            trees["vs "] = other_tree(args.vs, scratch)
        subprocess.run([*lm, "up", "--no-services"], env={**env, "PYTHONPATH": HERE}, check=True, stdout=subprocess.DEVNULL)
        commands = {"python": [sys.executable, "-c", "pass"]}
        for tree in trees.values():
            run = ["env", f"PYTHONPATH={tree}", *lm]
            expected = subprocess.run([*run, *VERBS["cat"][1]], env=env, check=True, capture_output=True).stdout
            if not expected.startswith(b"# demo"):
                raise SystemExit(f"cli_startup_bench: fs cat ({tree}) returned {expected[:60]!r}")
        for name, (_, argv, _) in VERBS.items():
            for side, tree in trees.items():
                commands[side + name] = ["env", f"PYTHONPATH={tree}", *lm, *argv]
        out = os.path.join(scratch, "hyperfine.json")
        named = [arg for name, cmd in commands.items() for arg in ("-n", name, " ".join(cmd))]
        subprocess.run(
            ["hyperfine", "--shell=none", "--style=none", "--warmup", str(args.warmup), "--runs", str(args.runs),
             "--export-json", out, *named],
            env=env, check=True, stdout=subprocess.DEVNULL,
        )
        with open(out) as f:
            results = {r["command"]: r for r in json.load(f)["results"]}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    base = results["python"]
    load = os.getloadavg()[0]
    print(f"cli start-up, {args.runs} runs each (hyperfine; wall median, mean ± stddev, and CPU user+sys mean; "
          f"load average {load:.1f} on {os.cpu_count()} CPUs):")
    print(f"  {'python -c pass:':<22} median {base['median']:.3f} s  mean {base['mean']:.3f} ± {base['stddev']:.3f}  "
          f"cpu {cpu(base):.3f} s")
    for side, tree in trees.items():
        print(f"{'this tree' if not side else 'vs ' + args.vs} ({tree}):")
        for name, (label, _, target) in VERBS.items():
            r = results[side + name]
            med = statistics.median(r["times"])
            verdict = "ok" if med <= target else "MISSED"
            line = (f"  {label + ':':<22} median {med:.3f} s  mean {r['mean']:.3f} ± {r['stddev']:.3f}  "
                    f"cpu {cpu(r):.3f} s  = {med / target:.2f} x target {target:.2f} s ({verdict}); "
                    f"{med / base['median']:.1f} x python -c pass")
            if side:
                mine = results[name]
                line += (f"; this tree / vs: wall {statistics.median(mine['times']) / med:.2f}, "
                         f"cpu {cpu(mine) / cpu(r):.2f}")
            print(line)


if __name__ == "__main__":
    main()
