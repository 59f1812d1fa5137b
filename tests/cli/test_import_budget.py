"""The import budget of the CLI's quick verbs (issue 41): a verb's start grows only by a reviewed change.

``lakemount --help``, ``fs ls``, ``fs cat``, ``log`` and ``commit`` run in a
subprocess on a small embedded repository; after the verb, the modules it
imported (``sys.modules`` less what the interpreter held before ``lakemount``
was imported) must stay within the budget below: the lakemount modules each
verb may load, by name; the third-party packages; modules it must never load
(SQLAlchemy, pyarrow, boto3, the HTTP client, asyncio...); and a ceiling on
how many modules it loads in all, the standard library's included.

A new import on one of these paths fails here with the modules it brought.  If
the verb does not need them on every call, import them where they are used (a
function, a ``cached_property``, a ``TYPE_CHECKING`` block for annotations); if
it does, add them to the budget in the same change, with what ``python -X
importtime -m lakemount.cli.main VERB ...`` says they cost.  The test counts
modules, it does not time them: ``benchmarks/cli_startup_bench.py`` times.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# What every verb that opens the embedded store loads: the app, its stores and caches, the catalog
# facade over graveler, the reading half of the committed store, and the audit spool.
STORE: frozenset[str] = frozenset({
    "lakemount", "lakemount.app",
    "lakemount.audit", "lakemount.audit.context", "lakemount.audit.log", "lakemount.audit.record",
    "lakemount.audit.spool",
    "lakemount.block", "lakemount.block.layout", "lakemount.block.local",
    "lakemount.block.ranges", "lakemount.block.router", "lakemount.block.trash", "lakemount.block.urls",
    "lakemount.cache", "lakemount.cache.disk", "lakemount.cache.ram", "lakemount.cache.singleflight",
    "lakemount.cache.tiered",
    "lakemount.catalog", "lakemount.catalog.blocks", "lakemount.catalog.catalog",
    "lakemount.catalog.confinement", "lakemount.catalog.history", "lakemount.catalog.kept", "lakemount.catalog.model",
    "lakemount.catalog.paths", "lakemount.catalog.protection", "lakemount.catalog.refs",
    "lakemount.catalog.shapes", "lakemount.catalog.storage", "lakemount.catalog.uploads",
    "lakemount.cli", "lakemount.cli.common", "lakemount.cli.group", "lakemount.cli.main", "lakemount.config", "lakemount.errors",
    "lakemount.graveler", "lakemount.graveler._sstblock", "lakemount.graveler.committed",
    "lakemount.graveler.committed.metarange", "lakemount.graveler.committed.store", "lakemount.graveler.graveler",
    "lakemount.graveler.journal", "lakemount.graveler.model", "lakemount.graveler.ports",
    "lakemount.graveler.refexpr", "lakemount.graveler.sstable",
    # The facade's roles (issue 39 split graveler.py by verb; the same code: 17.3 ms of self import time for the
    # seven modules against 17.8 ms for graveler.py alone, least of 15 runs of ``python -X importtime``).
    "lakemount.graveler.history", "lakemount.graveler.merges", "lakemount.graveler.reads", "lakemount.graveler.repos",
    "lakemount.graveler.shared", "lakemount.graveler.writes",
    "lakemount.metastore", "lakemount.metastore.fastsql", "lakemount.metastore.notify", "lakemount.metastore.sql",
    "lakemount.metastore.sql_staging", "lakemount.metastore.stamps", "lakemount.metastore.urls",
    "lakemount.logs", "lakemount.pids", "lakemount.private", "lakemount.records", "lakemount.table_pointers",
    # A thread's refusal to wait (stop 58: the mount's loop), which FastSql asks on each connection: a threading.local.
    "lakemount.waiting",
})

# A commit also makes its hooks' events and looks for hooks (none run here: the runner, not the hook types), writes ranges, and appends
# the commit to the event feed; first it waits for this node's write-back journals (lakemount.node: the standard library's only).
COMMIT: frozenset[str] = frozenset({
    "lakemount.node",
    "lakemount.actions", "lakemount.actions.events", "lakemount.actions.hook", "lakemount.actions.parser", "lakemount.actions.runner",
    "lakemount.actions.runs", "lakemount.catalog.events", "lakemount.cli.commit",
    "lakemount.graveler.committed.writer", "lakemount.graveler.runs", "lakemount.metastore.events",
})

# Never on these paths: SQLAlchemy (the embedded store's hot paths and a commit's writes go through FastSql),
# Arrow, the S3 client, the HTTP client and what it pulls in, asyncio, importlib.metadata (crc32c's import),
# the hook types and the webhooks' network policy (ipaddress; parsed when a webhook runs), urllib.parse (a
# symlink's target is quoted when one is shown), the range diff and merge, the failure-injecting block adapter of
# the tests, the audit trail's Parquet files (a verb spools its records), and the modules of other verbs and servers.
DENIED: frozenset[str] = frozenset({
    "sqlalchemy", "pyarrow", "boto3", "botocore", "yaml", "tqdm", "trio", "pyfuse3", "uvicorn", "pyspark",
    "cryptography", "crc32c", "asyncio", "http.client", "ssl", "email", "importlib.metadata", "socket",
    "lakemount.actions.builtin", "lakemount.actions.webhook", "lakemount.actions.checks", "lakemount.actions.network",
    "ipaddress", "urllib",
    "lakemount.graveler.committed.diff", "lakemount.graveler.committed.merge",
    "lakemount.metastore.sqlschema", "lakemount.metastore.actions", "lakemount.catalog.pulls",
    "lakemount.catalog.writer", "lakemount.catalog.gcstore", "lakemount.block.flaky", "lakemount.audit.table", "lakemount.api", "lakemount.gateway", "lakemount.fuse",
    "lakemount.jobs", "lakemount.catalog.blame", "lakemount.block.memory", "mimetypes", "secrets", "random", "hmac",
})
# Nor on the reading verbs' (issue 41's second pass): logging (a module's logger is made on its first message,
# lakemount/logs.py), the node stamps' ctypes (mapped by a branch change), the range writer's thread pool, and
# the hooks' events (made by a verb that may run hooks).
# Nor (issue 41's third pass) OpenSSL's hashes: a read computes no identity, commit id or signature.
READS_DENIED: frozenset[str] = frozenset({"logging", "traceback", "ctypes", "concurrent", "base64", "difflib",
                                          "lakemount.actions", "hashlib", "_hashlib"})
# The Cython runtime modules of an allowed package (msgpack): named after the Cython version.
CYTHON = ("_cython_", "cython_runtime")


@dataclass(frozen=True)
class Budget:
    """What one verb may import: lakemount modules by name, third-party packages, and how many modules in all."""

    args: tuple[str, ...]
    lakemount: frozenset[str]
    third_party: frozenset[str]
    most: int
    denied: frozenset[str] = DENIED


# Counts as a fresh install has them (scripts/install.sh: a plain path entry; measured in CI's fresh clone, where
# ``__future__`` and eight other standard modules count, e.g. 5 for ``--help``).  Stop 58: +1 for lakemount.waiting
# (the store's verbs: FastSql asks it per connection; it imports only what is loaded already).  An install with setuptools'
# import hook counts fewer: the hook loads contextlib, functools, pathlib... before the verb starts.
BUDGETS = {
    # ``--help`` prints the stored text (lakemount/cli/helptext.py): no click, no error tree, nothing else.
    "--help": Budget(("--help",), frozenset({"lakemount", "lakemount.cli", "lakemount.cli.main", "lakemount.cli.helptext"}),
                     frozenset(), 5, DENIED | READS_DENIED | {"click"}),
    "fs ls": Budget(("fs", "ls", "lakefs://demo/main/"), STORE | {"lakemount.cli.fs"},
                    frozenset({"click", "msgpack", "xxhash"}), 144, DENIED | READS_DENIED),
    "fs cat": Budget(("fs", "cat", "lakefs://demo/main/README.md"), STORE | {"lakemount.cli.fs"},
                     frozenset({"click", "msgpack", "xxhash"}), 144, DENIED | READS_DENIED),
    "log": Budget(("log", "lakefs://demo/main"), STORE | {"lakemount.cli.log"},
                  frozenset({"click", "msgpack", "xxhash"}), 144, DENIED | READS_DENIED),
    # A commit that writes ranges starts the writer's pool (concurrent.futures, and logging under it); ``-m``
    # loads difflib (click tries a short option as a long one first, and its miss suggests by difflib).
    "commit": Budget(("commit", "lakefs://demo/main", "-m", "budget"), STORE | COMMIT,
                     frozenset({"click", "msgpack", "xxhash"}), 175),
}

# Runs the CLI's main in this interpreter, then writes what it imported (and what was there before) as JSON.
WRAPPER = """\
import json, sys
before = sorted(sys.modules)
from lakemount.cli.main import main
code = 0
try:
    main(sys.argv[2:])
except SystemExit as exc:
    code = exc.code or 0
compiled = getattr(getattr(sys.modules.get("tokenize"), "_compile", None), "cache_info", None)
with open(sys.argv[1], "w") as f:
    json.dump({"code": code, "before": before, "after": sorted(sys.modules),
               "tokenized": bool(compiled and compiled().currsize)}, f)
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A LAKEMOUNT_HOME holding ``demo`` (``lakemount up --no-services``), for this tree's code."""
    home = tmp_path_factory.mktemp("budget") / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEMOUNT_")}
    env.update(LAKEMOUNT_HOME=str(home), PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, "-m", "lakemount.cli.main", "up", "--no-services"], env=env, check=True,
                   capture_output=True, timeout=120)
    return env


def imported(env: dict[str, str], args: tuple[str, ...], out: Path) -> set[str]:
    """The modules ``lakemount ARGS`` imported, beyond what the interpreter held before it imported lakemount."""
    r = subprocess.run([sys.executable, "-c", WRAPPER, str(out), *args], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    seen = json.loads(out.read_text())
    assert seen["code"] == 0, f"lakemount {' '.join(args)} failed: {r.stderr}"
    # A dataclass made without its own __init__ (a record, lakemount/records.py) and without a docstring gets one
    # from inspect.signature, which parses object's signature with tokenize, whose largest pattern then compiles
    # (~14 M instructions, as much as ten modules): give the class a docstring (records.record requires one).
    assert not seen["tokenized"], f"lakemount {' '.join(args)} compiled tokenize's patterns (an undocumented record?)"
    return set(seen["after"]) - set(seen["before"])


def third_party(modules: set[str]) -> set[str]:
    """The top-level packages among ``modules`` that are neither the standard library's nor lakemount's."""
    tops = {m.split(".")[0] for m in modules}
    return {t for t in tops if t not in sys.stdlib_module_names and t != "lakemount" and not t.startswith(CYTHON)}


@pytest.mark.parametrize("verb", list(BUDGETS))
def test_a_quick_verb_imports_within_its_budget(verb: str, env: dict[str, str], tmp_path: Path) -> None:
    budget = BUDGETS[verb]
    if verb == "commit":  # a real change to commit
        source = tmp_path / "change.txt"
        source.write_text("a change\n")
        subprocess.run([sys.executable, "-m", "lakemount.cli.main", "fs", "upload", "lakefs://demo/main/change.txt",
                        "-s", str(source)], env=env, check=True, capture_output=True, timeout=120)
    modules = imported(env, budget.args, tmp_path / "modules.json")
    hint = "import it where it is used, or add it to the budget in tests/cli/test_import_budget.py with its cost"
    ran = {"fs ls": "lakemount.cli.fs", "fs cat": "lakemount.cli.fs", "log": "lakemount.cli.log",
           "commit": "lakemount.cli.commit", "--help": "lakemount.cli.helptext"}[verb]
    assert ran in modules, f"lakemount {verb} did not run its own module {ran}"
    denied = sorted(m for m in modules if m in budget.denied or m.split(".")[0] in budget.denied)
    assert not denied, f"lakemount {verb} imported modules it must never load: {denied}"
    extra = sorted(m for m in modules if m.split(".")[0] == "lakemount" and m not in budget.lakemount)
    assert not extra, f"lakemount {verb} imported lakemount modules beyond its budget: {extra} ({hint})"
    packages = sorted(third_party(modules) - budget.third_party)
    assert not packages, f"lakemount {verb} imported third-party packages beyond its budget: {packages} ({hint})"
    assert len(modules) <= budget.most, (
        f"lakemount {verb} imported {len(modules)} modules, more than its budget of {budget.most} ({hint}); "
        f"the lakemount ones: {sorted(m for m in modules if m.startswith('lakemount'))}"
    )


def test_the_budget_sees_a_heavy_import(env: dict[str, str], tmp_path: Path) -> None:
    """The check itself: a verb that loads SQLAlchemy and the hook runner (``actions runs list``) shows them."""
    modules = imported(env, ("actions", "runs", "list", "lakefs://demo"), tmp_path / "modules.json")
    assert "sqlalchemy" in modules and "lakemount.metastore.actions" in modules
    assert third_party(modules) - BUDGETS["commit"].third_party >= {"sqlalchemy"}
