"""The package layering, checked statically: the catalog is the only door into the versioned core.

Front ends (the mount, the gateway, the CLI, the jobs, the REST API, the web
UI, the code the servers share) must not import ``lakemount.graveler`` nor
reach around the catalog through a ``.graveler`` attribute (``catalog.graveler``,
``app.graveler``), nor take the stores under it from the composition root: no
``.refs``/``.metastore`` attribute at all, no ``.adapter``/``.blockstore`` of an
``App`` (spelled ``app``, ``<x>.app``, ``<x>_app``, ``app_for(...)``,
``App(...)``), and no ``.adapter``/``.blockstore`` of a catalog (spelled ``catalog``, ``cat``,
``<x>.catalog``): the catalog hands out named verbs and narrow ports instead; graveler imports nothing of lakemount but its errors (and lakemount/records.py, the record decorator).  Packages may use one another
(the CLI starts the gateway, the API server hosts the UI's pages, the ref
store keeps records the catalog declares) but never in a cycle: one of the
two is the lower layer.  Imports are read with
``ast``, so lazy imports inside functions and ``TYPE_CHECKING`` blocks count too.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "lakemount"
FRONT_ENDS = ("fuse", "gateway", "cli", "jobs", "api", "ui", "serving", "iceberg")
CORE = "lakemount.graveler"
# What graveler may import of lakemount besides itself.
CORE_MAY_IMPORT = frozenset({"lakemount.errors", "lakemount.records"})
# Attributes that reach a store under the catalog whatever holds them (the core, the SQL ref store).
AROUND_THE_CATALOG = frozenset({"graveler", "refs", "metastore"})
# Attributes of an ``App`` that are stores under the catalog (``config.blockstore`` or a reader's own
# ``self.adapter`` are not).
APP_STORES = frozenset({"adapter", "blockstore"})
# How front ends get hold of an App besides a name: ``app_for(config)``, ``App(config)``, ``App.from_config()``.
APP_MAKERS = frozenset({"app_for", "App", "from_config"})
# How front ends spell a catalog: ``catalog``, ``cat``, ``app.catalog``, ``ctx.services.catalog``.
CATALOG_NAMES = frozenset({"catalog", "cat"})

# No file is exempt: the last ones that took the catalog's block adapter (garbage collection, ``jobs/gc.py``
# and ``jobs/gc_tasks.py``) ask ``Catalog.gc_store`` now (issue 24), and the gateway's graveler imports went
# before them.  A front end that needs something of the stores gets a catalog verb or a narrow port for it.


def module_of(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def parsed(path: Path, source: str | None = None) -> ast.Module:
    """The syntax tree of ``path`` (or of ``source`` placed there).

    A file's tree is parsed once per test process (for as long as the file is unchanged): the checks below read
    every module of lakemount several times over, and parsing them again was most of this module's time. Callers
    only read the tree.
    """
    if source is not None:
        return ast.parse(source, str(path))
    st = path.stat()
    return _parsed_file(path, st.st_mtime_ns, st.st_size)


@functools.cache
def _parsed_file(path: Path, mtime_ns: int, size: int) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def imports(path: Path, source: str | None = None) -> list[tuple[int, str]]:
    """(line, fully qualified module) of every import in ``path`` (or ``source`` placed there), relative ones resolved.

    ``from a.b import c`` yields both ``a.b`` and ``a.b.c`` (``c`` may be a module).
    """
    if source is None:
        st = path.stat()
        return list(_file_imports(path, st.st_mtime_ns, st.st_size))
    return _imports(path, parsed(path, source))


@functools.cache
def _file_imports(path: Path, mtime_ns: int, size: int) -> tuple[tuple[int, str], ...]:
    return tuple(_imports(path, parsed(path)))


def _imports(path: Path, tree: ast.Module) -> list[tuple[int, str]]:
    mod = module_of(path)
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{a.name}") for a in node.names]
    return found


def is_core(module: str) -> bool:
    return module == CORE or module.startswith(CORE + ".")


def is_app(node: ast.expr) -> bool:
    """Whether ``node`` is an ``App`` as front ends spell one (see the module's docstring)."""
    if isinstance(node, ast.Name):
        return node.id == "app" or node.id.endswith("_app")
    if isinstance(node, ast.Attribute):
        return node.attr == "app"
    if isinstance(node, ast.Call):
        func = node.func
        return (func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else "") in APP_MAKERS
    return False


def is_catalog(node: ast.expr) -> bool:
    """Whether ``node`` is a catalog as front ends spell one (``catalog``, ``cat``, ``<x>.catalog``)."""
    if isinstance(node, ast.Name):
        return node.id in CATALOG_NAMES
    return isinstance(node, ast.Attribute) and node.attr == "catalog"


def violations(path: Path, source: str | None = None) -> list[str]:
    """Why ``path`` (a front-end module, or ``source`` placed there) breaks the layering; empty if it does not."""
    out = [f"line {line}: imports {m}" for line, m in imports(path, source) if is_core(m)]
    for n in ast.walk(parsed(path, source)):
        if isinstance(n, ast.Attribute) and n.attr in AROUND_THE_CATALOG:
            out.append(f"line {n.lineno}: uses .{n.attr}")
        elif isinstance(n, ast.Attribute) and n.attr in APP_STORES and is_app(n.value):
            out.append(f"line {n.lineno}: uses App.{n.attr}")
        elif isinstance(n, ast.Attribute) and n.attr in APP_STORES and is_catalog(n.value):
            out.append(f"line {n.lineno}: uses Catalog.{n.attr}")
    return out


def front_end_files() -> list[Path]:
    return sorted(p for pkg in FRONT_ENDS if (PACKAGE / pkg).is_dir() for p in (PACKAGE / pkg).rglob("*.py"))


def rel(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def test_front_ends_reach_the_versioned_core_only_through_the_catalog() -> None:
    bad = {rel(p): v for p in front_end_files() if (v := violations(p))}
    assert not bad, "front ends must use lakemount.catalog, not graveler nor the stores under it:\n" + "\n".join(
        f"  lakemount/{f}: {'; '.join(v)}" for f, v in sorted(bad.items())
    )


def outward_imports(package: str, may_import: frozenset[str]) -> list[str]:
    """``file:line: imports m`` for each import in ``lakemount/<package>`` of a part of lakemount outside it and ``may_import``."""
    own = f"lakemount.{package}"
    return [
        f"lakemount/{rel(p)}:{line}: imports {m}"
        for p in sorted((PACKAGE / package).rglob("*.py"))
        for line, m in imports(p)
        if (m == "lakemount" or m.startswith("lakemount.")) and m != own and not m.startswith(own + ".")
        and m not in may_import and not any(m.startswith(allowed + ".") for allowed in may_import)
    ]


def test_graveler_imports_nothing_outward() -> None:
    bad = outward_imports("graveler", CORE_MAY_IMPORT)
    assert not bad, "graveler depends on nothing but lakemount.errors and lakemount.records:\n" + "\n".join(bad)


def test_graveler_says_what_the_core_is_module_by_module() -> None:
    """graveler had no ``__init__.py``: nothing said what the core holds; now its docstring names every module."""
    init = PACKAGE / "graveler" / "__init__.py"
    assert init.is_file(), "lakemount/graveler/__init__.py is missing"
    doc = ast.get_docstring(ast.parse(init.read_text())) or ""
    parts = {p.stem for p in (PACKAGE / "graveler").glob("*.py") if p.stem != "__init__"}
    parts |= {p.name for p in (PACKAGE / "graveler").iterdir() if (p / "__init__.py").is_file()}
    assert doc and not [m for m in sorted(parts) if f"``{m}``" not in doc], f"name every module of graveler: {sorted(parts)}"
    assert not [line for line, m in imports(init) if m.startswith("lakemount")]  # importing the core runs nothing

def test_rendering_imports_nothing_of_lakemount() -> None:
    """Content rendering for the UI (``lakemount/render``: table diffs, Parquet page headers) works on bytes alone."""
    assert (PACKAGE / "render" / "table_diff.py").is_file() and (PACKAGE / "render" / "parquet_pages.py").is_file()
    bad = outward_imports("render", frozenset())
    assert not bad, "lakemount/render imports nothing of lakemount:\n" + "\n".join(bad)


# Hooks sit below the catalog: the catalog owns the runner and calls it from its verbs, and hooks see the
# catalog only through the ports they declare (``runner.ActionSource``, ``hook.HookContext``).
# ``lakemount.table_pointers`` is a leaf (where an Iceberg table's pointer lies): the schema check finds tables by it.
# ``lakemount.graveler.model`` holds the records (``Entry``, ``Repository``) hooks' catalog Protocol names
# (``hook.HookCatalog``, issue 39); graveler imports nothing back, so no cycle.
ACTIONS_MAY_IMPORT = frozenset({"lakemount.errors", "lakemount.config", "lakemount.table_pointers", "lakemount.records",
                                "lakemount.graveler.model"})


def test_hooks_sit_below_the_catalog() -> None:
    assert (PACKAGE / "actions" / "runner.py").is_file(), "hooks live in their own package, lakemount/actions"
    bad = outward_imports("actions", ACTIONS_MAY_IMPORT)
    assert not bad, f"lakemount/actions depends on nothing but {sorted(ACTIONS_MAY_IMPORT)}:\n" + "\n".join(bad)
    assert "actions" in package_edges()["catalog"]


def package_edges() -> dict[str, dict[str, str]]:
    """Which top-level part of lakemount (package or module) imports which other: ``{importer: {imported: "first file:line"}}``."""
    edges: dict[str, dict[str, str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        importer = rel(path).split("/", 1)[0].removesuffix(".py")
        if importer == "__init__":
            continue
        mine = edges.setdefault(importer, {})
        for line, m in imports(path):
            parts = m.split(".")
            if len(parts) > 1 and parts[0] == "lakemount" and parts[1] != importer and (
                (PACKAGE / parts[1]).is_dir() or (PACKAGE / f"{parts[1]}.py").is_file()
            ):
                mine.setdefault(parts[1], f"lakemount/{rel(path)}:{line}")
    return edges


def find_cycle(edges: dict[str, dict[str, str]]) -> list[str]:
    """A cycle of the graph as a closed path ``[a, b, ..., a]``, or [] when it has none (depth-first search)."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str]:
        if node in path:
            return [*path[path.index(node):], node]
        if node in done:
            return []
        path.append(node)
        for nxt in sorted(edges.get(node, {})):
            if found := visit(nxt):
                return found
        path.pop()
        done.add(node)
        return []

    for start in sorted(edges):
        if found := visit(start):
            return found
    return []


def test_packages_import_each_other_in_no_cycle() -> None:
    """api <-> ui, or gateway -> app -> metastore -> gateway (any loop of lakemount's packages) fails: name each step."""
    edges = package_edges()
    cycle = find_cycle(edges)
    steps = [f"  {a} -> {b}: {edges[a][b]}" for a, b in zip(cycle, cycle[1:], strict=False)]
    assert not cycle, "lakemount packages import each other in a cycle:\n" + "\n".join(steps)


# Front ends that stand side by side: neither imports the other; what they
# share lives below both (``lakemount/serving``, the catalog).
SIBLINGS = (("api", "gateway"), ("ui", "gateway"), ("serving", "gateway"), ("serving", "api"), ("serving", "ui"))


@pytest.mark.parametrize("importer, imported", SIBLINGS)
def test_sibling_front_ends_share_code_only_through_a_lower_layer(importer: str, imported: str) -> None:
    where = package_edges().get(importer, {}).get(imported)
    assert where is None, f"{importer} must not import {imported} (first at {where}); move what both need to lakemount/serving"


@pytest.mark.parametrize(
    "edges, expected",
    [
        ({"api": {"ui": "x"}, "ui": {}}, []),
        ({"api": {"ui": "x"}, "ui": {"api": "y"}}, ["api", "ui", "api"]),
        ({"cli": {"api": "x"}, "api": {"ui": "y"}, "ui": {"cli": "z"}}, ["api", "ui", "cli", "api"]),
        ({"cli": {"api": "x", "gateway": "x"}, "api": {"gateway": "y"}, "gateway": {}}, []),
    ],
)
def test_the_cycle_check_finds_loops(edges: dict[str, dict[str, str]], expected: list[str]) -> None:
    """The checker itself: a two- or three-package loop is found, a diamond is not a loop."""
    assert find_cycle(edges) == expected


def test_the_package_graph_is_read_from_imports() -> None:
    """The edges come from real imports: the API server hosts the UI's pages (api -> ui), every front end builds an ``App``."""
    edges = package_edges()
    assert "ui" in edges["api"] and "api" not in edges["ui"]
    assert {"catalog", "metastore"} <= edges["app"].keys() and "app" in edges["gateway"]
    assert "graveler" not in edges["gateway"] and "errors" in edges["graveler"]


@pytest.mark.parametrize(
    "source, expected",
    [
        ("import lakemount.graveler.model\n", ["line 1: imports lakemount.graveler.model"]),
        ("import lakemount.graveler as g\n", ["line 1: imports lakemount.graveler"]),
        ("from lakemount.graveler.model import Entry\n", ["line 1: imports lakemount.graveler.model", "line 1: imports lakemount.graveler.model.Entry"]),
        ("from lakemount import graveler\n", ["line 1: imports lakemount.graveler"]),
        ("def f():\n    from lakemount.graveler import recover\n", ["line 2: imports lakemount.graveler", "line 2: imports lakemount.graveler.recover"]),
        ("from ..graveler import model\n", ["line 1: imports lakemount.graveler", "line 1: imports lakemount.graveler.model"]),
        ("x = app.graveler.commit()\n", ["line 1: uses .graveler"]),
        ("from lakemount.catalog.model import Entry\nfrom . import common\nx = app.catalog.commit()\n", []),
        ("heads = app.refs.list_branches(repo)\n", ["line 1: uses .refs"]),
        ("app.metastore.engine.dispose()\n", ["line 1: uses .metastore"]),
        ("def f(ctx):\n    return ctx.service.app.metastore.where\n", ["line 2: uses .metastore"]),
        ("data = app.adapter.get(url)\n", ["line 1: uses App.adapter"]),
        ("stores = self.app.blockstore\n", ["line 1: uses App.blockstore"]),
        ("probe = gateway_app.adapter\n", ["line 1: uses App.adapter"]),
        ("adapter = app_for(config).adapter\n", ["line 1: uses App.adapter"]),
        ("adapter = App(config).blockstore\n", ["line 1: uses App.blockstore"]),
        ("adapter = App.from_config(path).adapter\n", ["line 1: uses App.adapter"]),
        ("data = self.adapter.get(url)\nroot = app.config.blockstore.local.path\nrules = app.catalog.gc_rules(repo)\n", []),
        ("rules = load(app.catalog.adapter)\n", ["line 1: uses Catalog.adapter"]),
        ("catalog.adapter.delete(url)\n", ["line 1: uses Catalog.adapter"]),
        ("with cat.adapter.open(url) as f:\n    pass\n", ["line 1: uses Catalog.adapter"]),
        ("def f(ctx):\n    ctx.services.catalog.adapter.delete(url)\n", ["line 2: uses Catalog.adapter"]),
        ("stores = ctx.catalog.blockstore\n", ["line 1: uses Catalog.blockstore"]),
        ("adapter = app_for(config).catalog.adapter\n", ["line 1: uses Catalog.adapter"]),
        ("reader = app.catalog.block_source()\nbackend = cat.config.blockstore\n", []),
    ],
)
def test_the_check_sees_every_form(source: str, expected: list[str]) -> None:
    """The checker itself: every way of importing graveler or reaching a store under the catalog is caught,
    the catalog (and a front end's own adapter, or the configuration's ``blockstore`` section) is not."""
    assert sorted(violations(PACKAGE / "cli" / "probe.py", source)) == sorted(expected)


# The SQL metastore by concept (issue 26), as lakeFS keeps ``RefManager`` and ``StagingManager`` apart:
# ``SqlRefStore`` (metastore/sql.py) is the ref store, staged entries are ``SqlStaging``
# (metastore/sql_staging.py), each beside the port it implements (graveler/ports.py).
METASTORE = PACKAGE / "metastore"
STAGED_ROWS_MODULES = frozenset({"sql_staging.py", "sqlschema.py"})  # the statements; the table's definition
STAGED_ROWS_SQL = re.compile(r"\b(?:FROM|INTO|UPDATE|JOIN)\s+lm_staging\b(?!_)", re.IGNORECASE)


def staged_rows_uses(path: Path, source: str | None = None) -> list[str]:
    """``line N: ...`` for each statement on ``lm_staging`` in ``path`` (SQL text, or the ``staging_t`` table)."""
    out = []
    for n in ast.walk(parsed(path, source)):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and STAGED_ROWS_SQL.search(n.value):
            out.append(f"line {n.lineno}: SQL on lm_staging")
        elif isinstance(n, ast.Name) and n.id == "staging_t":
            out.append(f"line {n.lineno}: uses staging_t")
    return out


def methods_of(path: Path, cls: str) -> set[str]:
    """The names of the functions defined in class ``cls`` of ``path``."""
    for n in ast.walk(parsed(path)):
        if isinstance(n, ast.ClassDef) and n.name == cls:
            return {f.name for f in n.body if isinstance(f, ast.FunctionDef)}
    raise AssertionError(f"no class {cls} in {path}")


def test_the_ref_store_and_the_staged_rows_are_separate_modules() -> None:
    """Staged entries were methods of ``SqlRefStore`` in metastore/sql.py: now only metastore/sql_staging.py states
    anything on ``lm_staging``, and the ref store implements none of the staging port's methods."""
    bad = {p.name: v for p in sorted(METASTORE.glob("*.py")) if p.name not in STAGED_ROWS_MODULES and (v := staged_rows_uses(p))}
    assert not bad, "statements on staged entries belong in metastore/sql_staging.py:\n" + "\n".join(
        f"  lakemount/metastore/{f}: {'; '.join(v)}" for f, v in sorted(bad.items()))
    port = methods_of(PACKAGE / "graveler" / "ports.py", "StagingStore")
    assert port and port <= methods_of(METASTORE / "sql_staging.py", "SqlStaging")
    mixed = sorted(port & methods_of(METASTORE / "sql.py", "SqlRefStore"))
    assert not mixed, f"SqlRefStore implements the staging port's {mixed}: they belong to SqlStaging"


@pytest.mark.parametrize(
    "source, expected",
    [
        ('q = "INSERT INTO lm_staging (token, key, value) VALUES (?, ?, ?)"\n', ["line 1: SQL on lm_staging"]),
        ('q = f"SELECT 1, token FROM lm_staging WHERE key = ? AND token IN ({marks})"\n', ["line 1: SQL on lm_staging"]),
        ("conn.execute(staging_t.delete())\n", ["line 1: uses staging_t"]),
        ('q = "DELETE FROM lm_staging_files WHERE token = ?"\nTABLES = {"lm_staging", "lm_branches"}\n', []),
        ('q = "SELECT staging_token FROM lm_branches"\n', []),
    ],
)
def test_the_staged_rows_check_sees_statements_not_names(source: str, expected: list[str]) -> None:
    """The checker itself: SQL text and the table object are caught; the file lists' table and a schema listing are not."""
    assert staged_rows_uses(METASTORE / "probe.py", source) == expected


# Import circles inside one folder (issue 39): modules of a package that import each other round a loop (lazy and
# ``TYPE_CHECKING`` imports count: a reader meets them all) cannot be read one after the other.  api/ had one of 20
# modules, through ``context.py`` importing the handler that imports every operation; ``context.Service`` names what
# an operation uses of the service instead.  catalog/ had one of 11 (modules typed with the ``Catalog`` they serve,
# ``kept.py`` importing ``refs.py`` for the change source it consumes): each names the Protocol it uses now.  fuse/ had
# one of 7 (the inode table and the state named the ``Scope`` of scope.py, which names the state, and the state named
# the write-back pipeline that builds on it): the ``Scope`` record is in the leaf mounted.py, and the state names
# ``state.Pipeline``.  No folder has one now.


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """The graph's circles: its strongly connected components of more than one node, each sorted (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def folder_circles() -> dict[str, list[list[str]]]:
    """``{package: circles}`` for every folder under lakemount/ whose own modules import each other round a loop."""
    out: dict[str, list[list[str]]] = {}
    for folder in sorted({p.parent for p in PACKAGE.rglob("*.py")}):
        modules = {module_of(p): p for p in folder.glob("*.py") if p.name != "__init__.py"}
        edges = {m: {i for _, i in imports(p) if i in modules and i != m} for m, p in modules.items()}
        if circles := strongly_connected(edges):
            out[module_of(folder / "__init__.py")] = circles
    return out


def test_no_folder_has_an_import_circle() -> None:
    found = folder_circles()
    assert not found, "modules of one folder import each other in a circle (name a Protocol, or move what both need):\n" + \
        "\n".join(f"  {f}: {found[f]}" for f in sorted(found))


@pytest.mark.parametrize(
    "edges, expected",
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
        ({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}, [["a", "b"], ["c", "d"]]),
    ],
)
def test_the_circle_check_finds_loops(edges: dict[str, set[str]], expected: list[list[str]]) -> None:
    """The checker itself: a loop of two or three modules is found, a chain into a loop adds nothing to it."""
    assert strongly_connected(edges) == expected
