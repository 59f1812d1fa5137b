"""Print which lakemount package imports which: the package map of the code base.

    python scripts/import_map.py [--rev REV] [--modules PACKAGE]

Every ``import``/``from ... import`` in ``lakemount/`` is read with ``ast``
(function-level, lazy and ``TYPE_CHECKING`` imports included: a dependency is
a dependency), and reduced to the top-level package or module it lies in
(``lakemount.graveler.committed.store`` -> ``graveler``).  Without ``--rev``
the working tree is read; with it, the files of that git revision, so a map
before and after a change comes from one script.  ``--modules fuse`` lists,
for one package, which of its modules import which lakemount packages.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def sources(rev: str | None) -> dict[str, str]:
    """Module path (``lakemount/x/y.py``) -> source text, from the tree or a git revision."""
    if rev is None:
        return {str(p.relative_to(ROOT)): p.read_text() for p in sorted((ROOT / "lakemount").rglob("*.py"))}
    names = subprocess.run(
        ["git", "-C", str(ROOT), "ls-tree", "-r", "--name-only", rev, "lakemount"], check=True, capture_output=True, text=True
    ).stdout.split()
    return {
        n: subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{n}"], check=True, capture_output=True, text=True).stdout
        for n in names
        if n.endswith(".py")
    }


def module_name(path: str) -> str:
    """The dotted module name of a ``.py`` path relative to the repository (a package's ``__init__`` is the package)."""
    parts = path[: -len(".py")].split("/")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(path: str, text: str) -> set[str]:
    """Fully qualified lakemount modules ``path`` imports (relative imports resolved)."""
    mod = module_name(path)
    package = mod if path.endswith("__init__.py") else mod.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(text, path)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)  # ``from pkg import module``
    return {m for m in out if m == "lakemount" or m.startswith("lakemount.")}


def package_of(module: str) -> str:
    """``lakemount.graveler.committed.store`` -> ``graveler``; ``lakemount.app`` -> ``app``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "lakemount"


def main() -> int:
    """Print the import map; 0."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", help="a git revision to read instead of the working tree")
    ap.add_argument("--modules", metavar="PACKAGE", help="list the imports of each module of PACKAGE instead")
    args = ap.parse_args()
    src = sources(args.rev)
    known = {module_name(p) for p in src}
    edges: dict[str, set[str]] = defaultdict(set)
    for path, text in src.items():
        mod = module_name(path)
        if args.modules and package_of(mod) != args.modules:
            continue
        key = mod if args.modules else package_of(mod)
        edges.setdefault(key, set())
        for target in imported(path, text):
            if target not in known and target.rpartition(".")[0] in known:
                target = target.rpartition(".")[0]  # ``from lakemount.x import name``: a name, not a module
            dep = package_of(target)
            if dep not in (package_of(mod), "lakemount"):
                edges[key].add(dep)
    width = max(map(len, edges), default=0)
    for key in sorted(edges):
        print(f"{key:<{width}} -> {', '.join(sorted(edges[key])) or '(nothing)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
