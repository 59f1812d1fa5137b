"""CLI start-up benchmark (issue 10): how long ``lakemount --help`` and ``lakemount fs cat`` take.

    .venv/bin/python benchmarks/cli_startup_bench.py [--runs 30] [--warmup 3]

Creates a throwaway LAKEMOUNT_HOME on the embedded store (SQLite + local block
store) holding the ``demo`` repository (``lakemount up --no-services``), then
runs hyperfine (Debian package ``hyperfine``) on three commands in one run:
``python -c pass`` (the interpreter's own start-up, the floor), ``lakemount
--help`` and ``lakemount fs cat lakefs://demo/main/README.md``.  Prints each
mean and its ratio against the targets (--help <= 0.15 s, fs cat <= 0.25 s)
and against the bare interpreter, with the CPU time (user + system) of each
command, which other load on the machine disturbs less.  ``python -X importtime -m lakemount.cli.main
--help`` shows what a start-up still imports.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

TARGETS = {"help": 0.15, "cat": 0.25}


def lakemount_command() -> str:
    """The ``lakemount`` console script next to this interpreter (what users run), else ``python -m``."""
    script = os.path.join(os.path.dirname(sys.executable), "lakemount")
    if os.access(script, os.X_OK):
        return script
    return f"{sys.executable} -m lakemount.cli.main"


def cpu(result: dict[str, float]) -> float:
    """Mean CPU time of one run (user + system): less disturbed than wall time on a busy machine."""
    return result["user"] + result["system"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    if shutil.which("hyperfine") is None:
        raise SystemExit("cli_startup_bench: hyperfine is not installed (apt-get install hyperfine)")
    home = tempfile.mkdtemp(prefix="lm-cli-bench-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEMOUNT_")}
    env["LAKEMOUNT_HOME"] = home
    lm = lakemount_command()
    try:
        subprocess.run([*lm.split(), "up", "--no-services"], env=env, check=True, stdout=subprocess.DEVNULL)
        expected = subprocess.run(
            [*lm.split(), "fs", "cat", "lakefs://demo/main/README.md"], env=env, check=True, capture_output=True
        ).stdout
        if not expected.startswith(b"# demo"):
            raise SystemExit(f"cli_startup_bench: fs cat returned {expected[:60]!r}")
        commands = {
            "python": f"{sys.executable} -c pass",
            "help": f"{lm} --help",
            "cat": f"{lm} fs cat lakefs://demo/main/README.md",
        }
        out = os.path.join(home, "hyperfine.json")
        named = [arg for name, cmd in commands.items() for arg in ("-n", name, cmd)]
        subprocess.run(
            ["hyperfine", "--shell=none", "--style=none", "--warmup", str(args.warmup), "--runs", str(args.runs),
             "--export-json", out, *named],
            env=env, check=True, stdout=subprocess.DEVNULL,
        )
        with open(out) as f:
            results = {r["command"]: r for r in json.load(f)["results"]}
    finally:
        shutil.rmtree(home, ignore_errors=True)
    base = results["python"]["mean"]
    load = os.getloadavg()[0]
    print(f"cli start-up, {args.runs} runs each (hyperfine; wall mean ± stddev, and CPU user+sys; "
          f"load average {load:.1f} on {os.cpu_count()} CPUs):")
    print(f"  python -c pass:        {base:.3f} s ± {results['python']['stddev']:.3f}  "
          f"cpu {cpu(results['python']):.3f} s")
    for name, label in (("help", "lakemount --help"), ("cat", "lakemount fs cat")):
        r = results[name]
        target = TARGETS[name]
        verdict = "ok" if r["mean"] <= target else "MISSED"
        print(f"  {label + ':':<22} {r['mean']:.3f} s ± {r['stddev']:.3f}  cpu {cpu(r):.3f} s  "
              f"= {r['mean'] / target:.2f} x target {target:.2f} s ({verdict}); "
              f"{r['mean'] / base:.1f} x python -c pass")


if __name__ == "__main__":
    main()
