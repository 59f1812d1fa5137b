"""The API's route table (``lakemount/api/routes.py``) lists every declared operation, once, and no path is two routes'.

Declaring an operation (``routing.operation``) registers nothing, so an operation missing from the table is not
served: this test is what notices.  No path matching two routes makes the table's order the reader's own.
"""

from __future__ import annotations

import importlib
import pkgutil

import lakemount.api.operations
from lakemount.api.routes import ROUTES
from lakemount.api.routing import Operation


def declared() -> dict[str, Operation]:
    """``module.name`` of every operation a module under api/operations/ declares."""
    out = {}
    for info in pkgutil.iter_modules(lakemount.api.operations.__path__):
        module = importlib.import_module(f"lakemount.api.operations.{info.name}")
        for name, value in vars(module).items():
            if isinstance(value, Operation) and value.func.__module__ == module.__name__:
                out[f"{info.name}.{name}"] = value
    return out


def overlapping(a: str, b: str) -> bool:
    """Whether some path matches both templates (same number of segments, each pair equal or one a ``{name}``)."""
    sa, sb = a.strip("/").split("/"), b.strip("/").split("/")
    return len(sa) == len(sb) and all(x == y or x.startswith("{") or y.startswith("{") for x, y in zip(sa, sb, strict=True))


def test_the_table_lists_every_declared_operation_once() -> None:
    ops = declared()
    assert len(ops) > 100
    missing = sorted(name for name, op in ops.items() if op not in ROUTES)
    assert not missing, f"declared but not in api/routes.py, so not served: {missing}"
    assert len(ROUTES) == len(set(ROUTES)) == len(ops)
    ids = [op.operation_id for op in ROUTES]
    assert len(ids) == len(set(ids)), "an operationId is listed twice"


def test_no_path_matches_two_routes() -> None:
    clashes = [(a.method, a.template, b.template) for i, a in enumerate(ROUTES) for b in ROUTES[i + 1 :]
               if a.method == b.method and overlapping(a.template, b.template)]
    assert not clashes


def test_the_overlap_check_sees_a_clash() -> None:
    assert overlapping("/repositories/{repository}", "/repositories/main")
    assert not overlapping("/repositories/{repository}", "/repositories/{repository}/branches")
    assert not overlapping("/auth/users", "/auth/groups")
