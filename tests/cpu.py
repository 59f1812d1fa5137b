"""Where a run's CPU goes: each test's CPU, its child processes' included, and the processes it started.

A plugin loaded by tests/conftest.py, idle unless ``LAKEMOUNT_TEST_CPU`` names a file. Then every test process
(each xdist worker too) appends one JSON line per test to ``$LAKEMOUNT_TEST_CPU.<worker>`` (``main`` without
workers): its node id, its own CPU (``getrusage(RUSAGE_SELF)``, user + system, over its setup, call and teardown),
its children's (``RUSAGE_CHILDREN``: the processes it started and reaped, a ``lakemount serve``, a mount, a CLI
run, ``pytest`` in a subprocess, with the children they reaped in turn) and the commands it started (an audit hook
on ``subprocess.Popen``: its program and first arguments, e.g. ``lakemount serve``). A child counts once it is
reaped, so a module's or the run's shared server counts against the test whose teardown stops it; a daemon a
child leaves behind (a PostgreSQL server started by ``pg_ctl``) never counts. Read the lines with

    .venv/bin/python -m tests.cpu FILE... [--top N]

which prints, as Markdown for docs/TESTING.md: per directory and per file the CPU (self + children) and the
process starts, the N tests with the most CPU, and the commands started most often (docs/TESTING.md, "Where the
CPU goes").
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import sys
from collections.abc import Generator, Iterable
from pathlib import Path
from typing import Any

import pytest

_ENV = "LAKEMOUNT_TEST_CPU"
_started: list[str] = []  # the commands the current test has started (the audit hook appends)
_hooked = False


def _command(args: Any) -> str:
    """A short name for what a ``subprocess.Popen`` runs: the program's base name and the words that say which."""
    words = [str(a) for a in (args if isinstance(args, (list, tuple)) else [args])]
    if not words:
        return "?"
    name = [os.path.basename(words[0])]
    rest = words[1:]
    if name[0].startswith("python") and rest[:1] == ["-m"]:
        name, rest = [rest[1] if len(rest) > 1 else "-m"], rest[2:]
    elif name[0].startswith("python") and rest[:1] == ["-c"]:
        return name[0] + " -c"
    # the verb (and its sub-verb) of a command line: the first words that are not options or paths
    for word in rest:
        if len(name) == 3 or word.startswith("-") or "/" in word or "=" in word:
            break
        name.append(word)
    return " ".join(name)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "subprocess.Popen":
        _started.append(_command(args[1] if len(args) > 1 and args[1] is not None else args[0]))


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def pytest_configure(config: pytest.Config) -> None:
    global _hooked
    if os.environ.get(_ENV) and not _hooked:
        sys.addaudithook(_audit)  # an audit hook cannot be removed: added once per process
        _hooked = True


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    """Record the CPU of the test's setup, call and teardown, and what it started."""
    target = os.environ.get(_ENV)
    if not target:
        yield
        return
    del _started[:]
    own, children = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    yield
    line = {
        "nodeid": item.nodeid,
        "self": round(_cpu(resource.RUSAGE_SELF) - own, 3),
        "children": round(_cpu(resource.RUSAGE_CHILDREN) - children, 3),
        "started": list(_started),
    }
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(f"{target}.{worker}", "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def read(paths: Iterable[str]) -> list[dict[str, Any]]:
    """The lines of the files written by the plugin (each ``$LAKEMOUNT_TEST_CPU.<worker>``)."""
    lines = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            lines.extend(json.loads(line) for line in f if line.strip())
    return lines


def _table(title: str, rows: dict[str, list[dict[str, Any]]], limit: int | None) -> list[str]:
    total = sum(r["self"] + r["children"] for group in rows.values() for r in group) or 1.0
    out = [f"| {title} | tests | self CPU | children CPU | share | processes started |", "|---|---:|---:|---:|---:|---:|"]
    ranked = sorted(rows.items(), key=lambda kv: -sum(r["self"] + r["children"] for r in kv[1]))
    for key, group in ranked[:limit]:
        own = sum(r["self"] for r in group)
        kids = sum(r["children"] for r in group)
        starts = sum(len(r["started"]) for r in group)
        out.append(f"| `{key}` | {len(group)} | {own:.1f} | {kids:.1f} | {(own + kids) / total:.1%} | {starts} |")
    return out


def report(lines: list[dict[str, Any]], top: int) -> str:
    """Markdown tables: per directory, the ``top`` files and tests, and the commands started most often."""
    by_dir: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    by_file: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for line in lines:
        path = line["nodeid"].split("::", 1)[0]
        by_dir[str(Path(path).parent) + "/"].append(line)
        by_file[path].append(line)
    own = sum(r["self"] for r in lines)
    kids = sum(r["children"] for r in lines)
    out = [f"{len(lines)} tests: {own:.1f} s CPU in the test processes + {kids:.1f} s in their children "
           f"= {own + kids:.1f} s; {sum(len(r['started']) for r in lines)} processes started", ""]
    out += _table("directory", by_dir, None) + [""] + _table("file", by_file, top) + [""]
    out += ["| test | self CPU | children CPU | processes started |", "|---|---:|---:|---:|"]
    for r in sorted(lines, key=lambda r: -(r["self"] + r["children"]))[:top]:
        out.append(f"| `{r['nodeid']}` | {r['self']:.1f} | {r['children']:.1f} | {len(r['started'])} |")
    commands = collections.Counter(c for r in lines for c in r["started"])
    out += ["", "| command started | times |", "|---|---:|"]
    out += [f"| `{c}` | {n} |" for c, n in commands.most_common(top)]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", help="the files the plugin wrote ($LAKEMOUNT_TEST_CPU.<worker>)")
    parser.add_argument("--top", type=int, default=20, help="how many files, tests and commands to list")
    args = parser.parse_args(argv)
    print(report(read(args.files), args.top))


if __name__ == "__main__":
    main()
