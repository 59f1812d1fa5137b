"""A/B of one benchmark between two git revisions, interleaved on the same machine, medians and ratios.

    .venv/bin/python benchmarks/ab_revs.py A_REV B_REV [--rounds 3] [--timeout 300] -- COMMAND...

    .venv/bin/python benchmarks/ab_revs.py 25c18b8 HEAD --rounds 3 -- \\
        .venv/bin/python benchmarks/api_bench.py --seconds 2 --rounds 1

Each revision is checked out with ``git worktree add --detach`` into a temp
directory, with this checkout's compiled extensions (``lakemount/*/*.so``)
copied in and its venvs linked (the C sources must be the same in both; the
script refuses otherwise).  ``COMMAND`` runs in each checkout's root with
``PYTHONPATH`` set to it, so it and every process it starts import that
revision's lakemount (the venv's editable install points at one checkout
only).  Each revision runs its own ``benchmarks/`` by default: a benchmark
prepares its data through lakemount's own API, which may have changed between
the two (``App.refs`` became ``App.metastore``); ``--same-scripts`` runs B's
scripts on both, for when the measurement itself changed and the API it uses
did not.

Runs alternate A, B, A, B... for ``--rounds`` rounds: on a shared, noisy
machine what changes over the minutes (other jobs, thermal state) lands on
both sides alike, which a block of A runs followed by a block of B runs does
not give.

**Figures** are read from each run's standard output, whatever the benchmark:
a line that is a JSON object gives its numeric leaves (``a.b.c``); any other
line gives each number in it, named by the line's ``(x)`` section (the latest
line that began with one), the words before it and the unit after it, e.g.
``(a) statObject, | p90 [ms]``.  Only figures present in every run of both
revisions are reported, and not those equal in every run (parameters such as
a client count).  The wall time of each run is one more figure.  For each:
the median of A, the median of B, B/A, and each side's spread (min..max).
Whether higher or lower is better is the benchmark's to say.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXTENSIONS = ("lakemount/fuse", "lakemount/graveler")
VENVS = (".venv", ".venv-spark32")
# A number, not inside a word or a path: 12, 1,234, 0.53, 1.2e-3, -4 (a trailing unit such as "x" or "ms" is its unit).
NUMBER = re.compile(r"(?<![\w./:-])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")
SECTION = re.compile(r"^\s*(\([a-z0-9]+\))")
UNIT = re.compile(r"[A-Za-z%µ/][A-Za-z0-9/%]*")


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True).stdout.strip()


@contextlib.contextmanager
def checkout(rev: str, where: Path, scripts_from: Path | None) -> Iterator[Path]:
    """A detached worktree of ``rev`` at ``where``, ready to run: extensions copied, venvs linked."""
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(where), rev], check=True)
    try:
        for rel in EXTENSIONS:
            for so in (ROOT / rel).glob("*.so"):
                shutil.copy2(so, where / rel / so.name)
        for venv in VENVS:
            src = ROOT / venv
            if src.exists():
                (where / venv).symlink_to(src.resolve())
        if scripts_from is not None:
            shutil.rmtree(where / "benchmarks", ignore_errors=True)
            shutil.copytree(scripts_from / "benchmarks", where / "benchmarks", symlinks=True)
        yield where
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(where)], check=False,
                       capture_output=True)


def number(text: str) -> float:
    return float(text.replace(",", ""))


def figures(output: str) -> dict[str, float]:
    """Every figure a benchmark printed (see the module's docstring), by name."""
    found: dict[str, float] = {}

    def add(name: str, value: float) -> None:
        n, i = name, 2
        while n in found:  # the same name twice in one output: numbered in order, the same in every run
            n, i = f"{name} #{i}", i + 1
        found[n] = value

    section = ""
    for line in output.splitlines():
        stripped = line.strip()
        if stripped.startswith("{"):
            with contextlib.suppress(ValueError):
                for key, value in leaves(json.loads(stripped)):
                    add(key, value)
                continue
        m = SECTION.match(line)
        if m:
            section = m.group(1)
        head = "" if m else section
        matches = list(NUMBER.finditer(line))
        if not matches:
            continue
        lead = " ".join(line[: matches[0].start()].split())
        prev_end = 0
        for k, mt in enumerate(matches):
            words = " ".join([w for w in line[prev_end : mt.start()].split() if any(c.isalnum() for c in w)][-2:])
            rest = line[mt.end() :]
            gap = len(rest) - len(rest.lstrip(" "))
            unit_m = UNIT.match(rest, gap) if gap <= 1 else None
            unit = unit_m.group(0) if unit_m else ""
            prev_end = unit_m.end() + mt.end() if unit_m else mt.end()
            name = " | ".join(p for p in (head, lead if k else "", words) if p)
            add(f"{name} [{unit}]" if unit else name, number(mt.group(0)))
    return found


def leaves(doc: object, prefix: str = "") -> Iterator[tuple[str, float]]:
    """``(dotted key, value)`` of every number in a JSON document."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from leaves(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from leaves(v, f"{prefix}[{i}]")
    elif isinstance(doc, int | float) and not isinstance(doc, bool) and math.isfinite(doc):
        yield prefix, float(doc)


def run(tree: Path, command: list[str], timeout: float) -> dict[str, float]:
    """The figures of one run of ``command`` in ``tree``; exits with its error output if it fails or overruns.

    The benchmark runs in a session of its own, and whatever is left of it (servers it started) is
    killed when it ends, overruns or this script is stopped, so no run outlives its checkout.
    """
    env = {**os.environ, "PYTHONPATH": str(tree)}
    start = time.monotonic()
    proc = subprocess.Popen(command, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        sys.exit(f"ab_revs: the benchmark ran longer than {timeout:.0f} s in {tree.name}: shorten it or raise --timeout")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    wall = time.monotonic() - start
    if proc.returncode != 0:
        tail = "\n".join((err or out).splitlines()[-15:])
        sys.exit(f"ab_revs: the benchmark failed in {tree.name} (exit {proc.returncode}):\n{tail}")
    found = figures(out)
    found["wall time [s]"] = round(wall, 3)
    return found


def fmt(v: float) -> str:
    return f"{v:.4g}" if abs(v) < 1e6 else f"{v:.3e}"


def table(a_runs: list[dict[str, float]], b_runs: list[dict[str, float]]) -> list[str]:
    names = [n for n in a_runs[0] if all(n in r for r in a_runs + b_runs)]
    rows = [("figure", "A median", "B median", "B/A", "A min..max", "B min..max")]
    constant = 0
    for n in names:
        a = [r[n] for r in a_runs]
        b = [r[n] for r in b_runs]
        if len({*a, *b}) == 1:
            constant += 1
            continue
        am, bm = statistics.median(a), statistics.median(b)
        ratio = f"{bm / am:.3f}" if am else "-"
        rows.append((n, fmt(am), fmt(bm), ratio, f"{fmt(min(a))}..{fmt(max(a))}", f"{fmt(min(b))}..{fmt(max(b))}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
           for r in rows]
    if constant:
        out.append(f"({constant} figures equal in every run left out: parameters, not measurements)")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 usage="ab_revs.py A_REV B_REV [options] -- COMMAND...")
    ap.add_argument("a_rev")
    ap.add_argument("b_rev")
    ap.add_argument("--rounds", type=int, default=3, help="A,B pairs to run (default 3)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds one run may take (default 600)")
    ap.add_argument("--same-scripts", action="store_true", help="run B's benchmarks/ on both revisions (default: each its own)")
    argv = sys.argv[1:]
    if "--" not in argv:
        ap.error("give the benchmark command after --")
    cut = argv.index("--")
    args = ap.parse_args(argv[:cut])
    command = argv[cut + 1 :]
    if not command:
        ap.error("give the benchmark command after --")
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    # Stopped (a timeout's SIGTERM), still remove the checkouts and end the running benchmark.
    signal.signal(signal.SIGTERM, lambda _sig, _frame: sys.exit("ab_revs: stopped"))
    revs = {}
    for side, rev in (("A", args.a_rev), ("B", args.b_rev)):
        try:
            revs[side] = git("rev-parse", "--verify", f"{rev}^{{commit}}")
        except subprocess.CalledProcessError:
            ap.error(f"{side}: not a git revision: {rev}")
    changed = git("diff", "--name-only", revs["A"], revs["B"], "--", *(f"{d}/*.c" for d in EXTENSIONS))
    if changed:
        sys.exit(f"ab_revs: the compiled extensions' sources differ between the revisions ({changed}); "
                 "this checkout's .so files cannot serve both")
    with tempfile.TemporaryDirectory(prefix="ab_revs-") as tmp:
        b_dir = Path(tmp) / "b"
        with checkout(revs["B"], b_dir, None) as b_tree, \
                checkout(revs["A"], Path(tmp) / "a", b_tree if args.same_scripts else None) as a_tree:
            print(f"A = {args.a_rev} ({revs['A'][:9]}), B = {args.b_rev} ({revs['B'][:9]}); {args.rounds} rounds A,B; "
                  f"{'B' if args.same_scripts else 'own'} scripts; command: {' '.join(command)}", flush=True)
            a_runs: list[dict[str, float]] = []
            b_runs: list[dict[str, float]] = []
            for i in range(args.rounds):
                for side, tree, runs in (("A", a_tree, a_runs), ("B", b_tree, b_runs)):
                    runs.append(run(tree, command, args.timeout))
                    print(f"  round {i + 1} {side}: {runs[-1]['wall time [s]']:.1f} s, {len(runs[-1]) - 1} figures",
                          flush=True)
    print("\n".join(table(a_runs, b_runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
