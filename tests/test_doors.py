"""Typed doors (issue 39): every consumer of the catalog names what it calls, and the type checker sees each call.

A *door* is where a module receives the catalog: a parameter, an attribute or a property named ``catalog`` (or ``cat``).
Annotated ``Any`` (or not at all), a door hides every call behind it from mypy; the consumers name a narrow
``typing.Protocol`` beside them instead (``api.context.ApiCatalog``, ``iceberg.tables.TablesCatalog``,
``iceberg.service.IcebergCatalog``, ``actions.hook.HookCatalog``, ``serving.bodies.BodySource``; inside the catalog
``writer.DataStore``, ``pulls.PullsCatalog``, ``blame.BlameCatalog``) or the ``Catalog`` class itself.  Every module with a door is checked by mypy with ``disallow_untyped_defs`` (the
``[[tool.mypy.overrides]]`` of pyproject.toml), so no function behind a door escapes the checker, and each
Protocol's members are the catalog's own, parameter for parameter.  Read with ``ast``: nothing is imported.
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import importlib
import inspect
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "lakemount"
DOORS = frozenset({"catalog", "cat"})  # how the code spells a catalog it receives
PROTOCOLS = (
    ("lakemount.api.context", "ApiCatalog"),
    ("lakemount.iceberg.tables", "TablesCatalog"),
    ("lakemount.iceberg.service", "IcebergCatalog"),
    ("lakemount.actions.hook", "HookCatalog"),
    ("lakemount.serving.bodies", "BodySource"),
    ("lakemount.catalog.blame", "BlameCatalog"),
    ("lakemount.catalog.pulls", "PullsCatalog"),
    ("lakemount.catalog.writer", "DataStore"),
)


def _is_any(annotation: ast.expr | None) -> bool:
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return False
    return (isinstance(annotation, ast.Name) and annotation.id == "Any") or (
        isinstance(annotation, ast.Attribute) and annotation.attr == "Any")


@functools.cache  # both checks read every module of lakemount: each source is parsed once per test process
def doors(source: str) -> list[tuple[int, str, ast.expr | None]]:
    """(line, what, annotation) of each door in ``source``: parameters, attributes and properties named ``catalog`` or ``cat``.

    Callers only read the list (it is the cache's)."""
    out: list[tuple[int, str, ast.expr | None]] = []
    for n in ast.walk(ast.parse(source)):
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
            args = n.args
            out += [(n.lineno, f"parameter {a.arg} of {n.name}", a.annotation)
                    for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
                    if a is not None and a.arg in DOORS]
            if n.name in DOORS:
                out.append((n.lineno, f"property {n.name}", n.returns))
        elif isinstance(n, ast.AnnAssign):
            t = n.target
            name = t.id if isinstance(t, ast.Name) else t.attr if isinstance(t, ast.Attribute) else ""
            if name in DOORS:
                out.append((n.lineno, f"attribute {name}", n.annotation))
    return out


def untyped_doors(source: str) -> list[str]:
    """``line N: what`` for each door of ``source`` annotated ``Any`` or not at all."""
    return [f"line {line}: {what} is {'Any' if _is_any(a) else 'unannotated'}"
            for line, what, a in doors(source) if a is None or _is_any(a)]


def modules_with_doors() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if doors(path.read_text()):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def strictly_checked() -> list[str]:
    """The module patterns mypy checks with ``disallow_untyped_defs`` and ``disallow_incomplete_defs``."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    if config.get("disallow_untyped_defs") and config.get("disallow_incomplete_defs"):
        return ["*"]
    out: list[str] = []
    for o in config.get("overrides", []):
        if o.get("disallow_untyped_defs") and o.get("disallow_incomplete_defs"):
            out += [o["module"]] if isinstance(o["module"], str) else o["module"]
    return out


def test_no_door_takes_the_catalog_as_any() -> None:
    bad = {m: v for m, p in modules_with_doors().items() if (v := untyped_doors(p.read_text()))}
    assert not bad, "name the Protocol (or Catalog) a door receives, never Any:\n" + "\n".join(
        f"  {m}: {'; '.join(v)}" for m, v in sorted(bad.items()))


def test_mypy_checks_every_function_of_every_door() -> None:
    """test_lint.py runs ``mypy lakemount``; an unannotated function there would be skipped: not in a door's module."""
    patterns = strictly_checked()
    found = modules_with_doors()
    assert len(found) > 20 and {"lakemount.api.context", "lakemount.iceberg.tables", "lakemount.actions.hook"} <= found.keys()
    loose = sorted(m for m in found if not any(fnmatch.fnmatchcase(m, p) for p in patterns))
    assert not loose, f"add these modules to pyproject.toml's strict [[tool.mypy.overrides]]: {loose}"


def protocol_members(proto: type) -> dict[str, object]:
    """The members a Protocol declares, its protocol bases' included: name -> function or property."""
    out: dict[str, object] = {}
    for cls in reversed(proto.__mro__):
        if getattr(cls, "_is_protocol", False) and cls.__module__.startswith("lakemount."):
            out |= {k: v for k, v in vars(cls).items()
                    if not k.startswith("_") and (inspect.isfunction(v) or isinstance(v, property))}
    return out


def _shape(func: object, *, bound: bool) -> list[tuple[str, object, object]]:
    params = list(inspect.signature(func).parameters.values())  # type: ignore[arg-type]
    return [(p.name, p.kind, p.default) for p in (params[1:] if bound else params)]


@pytest.mark.parametrize("module, name", PROTOCOLS)
def test_each_door_protocol_is_the_catalogs_own_signatures(module: str, name: str) -> None:
    """A Protocol member is a catalog verb with the catalog's parameters (names, kinds, defaults), so a call the
    checker accepts at the door is one the catalog takes; mypy holds the types where ``Catalog`` is passed in."""
    from lakemount.catalog.catalog import Catalog

    members = protocol_members(getattr(importlib.import_module(module), name))
    assert members, f"{name} declares nothing"
    for member, declared in members.items():
        if isinstance(declared, property):  # attributes and properties of the catalog: mypy checks their types
            continue
        have = inspect.getattr_static(Catalog, member, None)
        assert have is not None, f"{name}.{member}: Catalog has no {member}"
        if isinstance(have, staticmethod):
            theirs = _shape(have.__func__, bound=False)
        else:
            assert inspect.isfunction(have), f"{name}.{member}: Catalog.{member} is no method"
            theirs = _shape(have, bound=True)
        assert _shape(declared, bound=True) == theirs, (
            f"{name}.{member}{inspect.signature(declared)} differs from Catalog.{member}{inspect.signature(have)}")


@pytest.mark.parametrize(
    "source, expected",
    [
        ("def f(catalog: Any) -> None: ...\n", ["line 1: parameter catalog of f is Any"]),
        ("def f(catalog: 'typing.Any') -> None: ...\n", ["line 1: parameter catalog of f is Any"]),
        ("def f(x, catalog) -> None: ...\n", ["line 1: parameter catalog of f is unannotated"]),
        ("class C:\n    catalog: Any\n", ["line 2: attribute catalog is Any"]),
        ("class C:\n    def __init__(self, c: Cat) -> None:\n        self.catalog: Any = c\n", ["line 3: attribute catalog is Any"]),
        ("class C:\n    @property\n    def catalog(self) -> Any: ...\n", ["line 3: property catalog is Any"]),
        ("def f(catalog: Catalog, cat: Any) -> None: ...\nclass C:\n    catalog: HookCatalog\n", ["line 1: parameter cat of f is Any"]),
        ("def f(catalog: Catalog, cat: ApiCatalog) -> None: ...\nclass C:\n    catalog: HookCatalog\n", []),
        ("def f(*, catalog: TablesCatalog | None = None) -> None: ...\n", []),
    ],
)
def test_the_door_check_sees_every_form(source: str, expected: list[str]) -> None:
    """The checker itself: a parameter, keyword, class attribute, ``self`` attribute or property typed Any is caught."""
    assert untyped_doors(source) == expected
