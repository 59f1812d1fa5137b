"""Test tiers: every test carries the markers of the expensive things it starts (a plugin loaded by tests/conftest.py).

No test declares its tier; ``pytest_collection_modifyitems`` gives each item the
markers of

- the fixtures it uses, directly or through other fixtures (``FIXTURES``: a
  fixture that starts a JVM, a browser, a PostgreSQL cluster, a mount or the
  cluster harness);
- its module (``MODULES``: a module that starts one in a subprocess of its
  own, e.g. ``lakemount serve`` running an import on Spark);
- its module's source (``SIGNALS``: text that starts one, such as ``initdb``,
  ``playwright``, ``spark-submit`` or the cluster harness's import), except in
  the modules of ``MENTIONS``, which name such a thing without starting it.

A tripwire covers the ways in the three tables miss: a test that runs ``java``,
``spark-submit``, playwright's driver, ``initdb``, ``pg_ctl`` or ``ip netns``
(seen by an audit hook on every ``subprocess.Popen`` of this process), or that
asks for this process's Spark context, without the matching marker fails, and
its message names the tier it used.  Only a mount is not watched this way (a
``lakemount mount`` with bad arguments starts nothing), so ``fuse`` comes from
the tables alone.

``scripts/test.sh --fast`` deselects the expensive tiers (docs/TESTING.md).
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent

# fixture name -> the tiers of what it starts.
FIXTURES: dict[str, tuple[str, ...]] = {
    "spark": ("spark",),  # tests/jobs (one local[2] session per run), tests/fuse/test_spark_mount, tests/iceberg
    "spark_python": ("spark",),  # the separate Spark venvs of tests/spark_s3a and tests/iceberg/test_spark
    "spark_lake": ("spark", "cluster"),
    "chromium": ("browser",),
    "browser": ("browser",),
    "pg_cluster": ("postgres",),
    "pg_url": ("postgres",),
    "postgres_url": ("postgres",),
    "durable_pg": ("postgres",),
    "mounts": ("fuse",),
    "mount": ("fuse",),
    "served_and_mounted": ("fuse",),
}

# module (relative to the repository) -> tiers of what it starts with no fixture and no text that says so.
MODULES: dict[str, tuple[str, ...]] = {
    "tests/api/test_import.py": ("spark",),  # the server it starts runs the import on Spark
    "tests/jobs/test_cli.py": ("spark",),  # gc and import through the command line, in this process
}

# tier -> source text of a module that starts it.
SIGNALS: dict[str, re.Pattern[str]] = {
    "spark": re.compile(r"\bpyspark\b|\bget_spark\(|\bSparkSession\b|spark-submit|\"--engine\",\s*\"spark\"|engine=\"spark\""),
    "browser": re.compile(r"\bplaywright\b|\bchromium\b"),
    "postgres": re.compile(r"\binitdb\b|\bpg_ctl\b"),
    "cluster": re.compile(r"\btests\.cluster\b|\bip netns\b"),
    "fuse": re.compile(r"from tests\.fuse\.mounting import \(?[\w\s,]*\bstart\b"),
}

# module -> the tiers it names without starting them, and why.
MENTIONS: dict[str, dict[str, str]] = {
    "tests/test_install.py": {"spark": "reads the install lists", "browser": "reads the install lists"},
    "tests/cli/test_lazy_cli.py": {"spark": "asserts pyspark is not imported"},
    "tests/cli/test_import_budget.py": {"spark": "denies pyspark to the quick verbs, starts no context"},
    "tests/test_no_import_time_pools.py": {"spark": "imports modules, starts no context"},
    "tests/test_relocate_jar.py": {"spark": "reads a jar of pyspark's, runs no JVM"},
    "tests/test_tiers.py": {tier: "the tripwire's and the tables' own tests" for tier in SIGNALS},
}

# What a process started under a test says about its tier (matched against its argv, joined by spaces).
PROCESSES: dict[str, re.Pattern[str]] = {
    "spark": re.compile(r"(^|[\s/])(java|spark-submit|spark-class)(\s|$)"),
    "browser": re.compile(r"playwright/driver/|(^|[\s/])(chromium|chrome)(\s|$)"),
    "postgres": re.compile(r"(^|[\s/])(initdb|pg_ctl)(\s|$)"),
    "cluster": re.compile(r"(^|[\s/])ip\s+(-\S+\s+)*netns\b"),
}

_WHERE = "tests/tiers.py (FIXTURES, MODULES or SIGNALS)"


def _relative(path: Path) -> str:
    try:
        return path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return path.as_posix()


@cache
def module_tiers(path: Path) -> frozenset[str]:
    """The tiers of a test module: ``MODULES``, then ``SIGNALS`` in its source less its ``MENTIONS``."""
    rel = _relative(path)
    tiers = set(MODULES.get(rel, ()))
    if rel.startswith("tests/cluster/"):
        tiers.add("cluster")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        text = ""
    mentions = MENTIONS.get(rel, {})
    tiers.update(tier for tier, signal in SIGNALS.items() if tier not in mentions and signal.search(text))
    return frozenset(tiers)


def item_tiers(item: pytest.Item) -> set[str]:
    """The tiers an item gets from its fixtures and its module."""
    tiers: set[str] = set()
    for name in getattr(item, "fixturenames", ()):
        tiers.update(FIXTURES.get(name, ()))
    tiers.update(module_tiers(item.path))
    return tiers


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        have = {m.name for m in item.iter_markers()}
        for tier in sorted(item_tiers(item) - have):
            item.add_marker(tier)


# The tripwire.  An audit hook cannot be removed, so it is added once per process and reads a stack of the
# items running (a pytester run inside a test pushes its own).
_running: list[pytest.Item] = []
_used = pytest.StashKey[set[str]]()
_lock = threading.Lock()
_installed = False


def _note(tier: str) -> None:
    with _lock:
        if _running:
            _running[-1].stash.setdefault(_used, set()).add(tier)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event != "subprocess.Popen" or not _running:
        return
    argv = args[1]
    line = argv if isinstance(argv, str | bytes) else " ".join(map(str, argv or ()))
    if isinstance(line, bytes):
        line = line.decode(errors="replace")
    for tier, pattern in PROCESSES.items():
        if pattern.search(line):
            _note(tier)


def _watch_spark() -> None:
    """Note every request for this process's Spark context (a JVM started once serves later tests too)."""
    try:
        from lakemount.jobs import session
    except ImportError:  # pragma: no cover - lakemount is installed wherever the suite runs
        return
    inner = session._context_locked

    def watched(master: str | None) -> Any:
        _note("spark")
        return inner(master)

    session._context_locked = watched


# The tiers' markers, for a run whose ini file does not list them (a pytester run; pyproject.toml lists them).
MARKERS: dict[str, str] = {
    "spark": "runs PySpark (a JVM)",
    "browser": "drives a browser (chromium via playwright)",
    "postgres": "starts a PostgreSQL cluster",
    "cluster": "builds a cluster of network and mount namespaces (root)",
    "fuse": "mounts a FUSE filesystem",
}


def pytest_configure(config: pytest.Config) -> None:
    global _installed
    listed = {line.split(":", 1)[0].strip() for line in config.getini("markers")}
    for name, text in MARKERS.items():
        if name not in listed:
            config.addinivalue_line("markers", f"{name}: {text}")
    if not _installed:
        _installed = True
        sys.addaudithook(_audit)
        _watch_spark()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    _running.append(item)
    try:
        return (yield)
    finally:
        _running.remove(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Fail a test (in the phase that did it) that started a tier it is not marked with."""
    rep = yield
    if call.when == "teardown":
        # The last test's teardown also ends the session's fixtures (``pg_ctl stop`` of the run's one cluster):
        # what runs there stops a tier, it does not start one for this test.
        item.stash[_used] = set()
        return rep
    used = item.stash.get(_used, set())
    missing = sorted(used - {m.name for m in item.iter_markers()})
    if missing:
        item.stash[_used] = set()
        what = ", ".join(missing)
        why = (
            f"{item.nodeid} started {what} but is not marked {what}: give the fixture or module that starts it "
            f"its tier in {_WHERE}, so that `scripts/test.sh --fast` leaves it out"
        )
        if rep.failed:  # keep the test's own failure, and say this too
            rep.sections.append(("tiers", why))
        else:
            rep.outcome = "failed"
            rep.longrepr = why
    return rep
