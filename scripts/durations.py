#!/usr/bin/env python3
"""Per-directory, per-file and slowest-test times of a pytest run, from its ``--junitxml`` report (docs/TESTING.md).

    .venv/bin/python scripts/durations.py junit.xml                 # directories, then the 20 slowest tests
    .venv/bin/python scripts/durations.py junit.xml --files 30      # also the 30 slowest files
    .venv/bin/python scripts/durations.py junit.xml --only ids.txt  # the total of the node ids listed in ids.txt
    .venv/bin/python scripts/durations.py junit.xml junit.alone.xml  # scripts/test.sh's two passes, as one run

A test's time is pytest's ``time`` attribute (setup, call and teardown, so a module fixture's start
counts against the first test that uses it). Tables print as Markdown, ready for docs/TESTING.md.
"""

from __future__ import annotations

import argparse
import collections
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Case:
    """One test of the report: its node id, its time and how it ended."""

    nodeid: str  # tests/api/test_http.py::test_x[param]
    seconds: float
    outcome: str  # passed, failed, error, skipped


def _nodeid(classname: str, name: str) -> str:
    """pytest's node id from junit's classname (``tests.api.test_http`` or ``tests.api.test_http.TestX``) and name."""
    parts = classname.split(".")
    # the module is the last dotted part whose name starts with test_ (a class may follow it)
    at = max((i for i, p in enumerate(parts) if p.startswith("test_") or p == "conftest"), default=len(parts) - 1)
    path = "/".join(parts[: at + 1]) + ".py"
    return "::".join([path, *parts[at + 1:], name])


def read(path: str) -> list[Case]:
    """The tests of a junit XML report."""
    cases = []
    for tc in ET.parse(path).getroot().iter("testcase"):
        outcome = "passed"
        for child in tc:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed"}.get(child.tag, child.tag)
        cases.append(Case(_nodeid(tc.get("classname", ""), tc.get("name", "")), float(tc.get("time", 0) or 0), outcome))
    return cases


def directory(nodeid: str) -> str:
    """The directory of a test (``tests/api/``)."""
    path = nodeid.split("::", 1)[0]
    return path.rsplit("/", 1)[0] + "/" if "/" in path else path


def module(nodeid: str) -> str:
    """The file of a test."""
    return nodeid.split("::", 1)[0]


def table(rows: list[tuple[str, int, float]], total: float, head: str) -> str:
    """A Markdown table of (name, tests, seconds) rows with each row's share of ``total``."""
    out = [f"| {head} | tests | seconds | share |", "|---|---:|---:|---:|"]
    out += [f"| `{name}` | {n} | {s:.1f} | {100 * s / total:.1f}% |" for name, n, s in rows]
    return "\n".join(out)


def grouped(cases: list[Case], key: object) -> list[tuple[str, int, float]]:
    """(group, tests, seconds) per value of ``key(nodeid)``, the slowest first."""
    seconds: dict[str, float] = collections.defaultdict(float)
    count: collections.Counter[str] = collections.Counter()
    for c in cases:
        k = key(c.nodeid)  # type: ignore[operator]
        seconds[k] += c.seconds
        count[k] += 1
    return sorted(((k, count[k], s) for k, s in seconds.items()), key=lambda r: -r[2])


def main(argv: list[str] | None = None) -> int:
    """Print the tables (or, with ``--only``, one total)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("junit", nargs="+", help="the XML file(s) pytest --junitxml wrote (several: read as one run)")
    ap.add_argument("--slowest", type=int, default=20, help="how many of the slowest tests to list (default 20)")
    ap.add_argument("--files", type=int, default=0, help="also list this many of the slowest files")
    ap.add_argument("--only", help="a file of node ids (pytest --collect-only -q): print their count and total only")
    args = ap.parse_args(argv)
    cases = [case for path in args.junit for case in read(path)]
    total = sum(c.seconds for c in cases)
    if args.only:
        with open(args.only) as f:
            wanted = {line.strip() for line in f if "::" in line}
        chosen = [c for c in cases if c.nodeid in wanted]
        print(f"{len(chosen)} of {len(cases)} tests ({len(wanted)} listed), "
              f"{sum(c.seconds for c in chosen):.1f} s of {total:.1f} s")
        return 0
    outcomes = collections.Counter(c.outcome for c in cases)
    print(f"{len(cases)} tests, {total:.1f} s in tests (" + ", ".join(f"{n} {o}" for o, n in sorted(outcomes.items())) + ")\n")
    print(table(grouped(cases, directory), total, "directory") + "\n")
    if args.files:
        print(table(grouped(cases, module)[: args.files], total, "file") + "\n")
    print("| test | seconds |\n|---|---:|")
    for c in sorted(cases, key=lambda c: -c.seconds)[: args.slowest]:
        print(f"| `{c.nodeid}` | {c.seconds:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
