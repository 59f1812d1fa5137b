"""One list of what the audit trail records (lakemount/audit/operations.py): every operation name a front end
passes when it records is in it, the edges' tables are made from it, and the feed's verbs are its versioning ones."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from lakemount.audit import operations
from lakemount.audit.operations import VERSIONING
from lakemount.audit.record import API, GATEWAY

PACKAGE = Path(__file__).resolve().parents[2] / "lakemount"
# Where a recording call names its operation: (the called attribute, the argument's position), and ``op=``.
NAMED_AT = {"touches": 0, "acts_on": 1, "audit": 1, "record": 3, "failed": 3}


def _texts(node: ast.expr) -> Iterator[str]:
    """The string constants ``node`` may evaluate to (a constant, or either side of a conditional)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, ast.IfExp):
        yield from _texts(node.body)
        yield from _texts(node.orelse)


def recorded_names() -> dict[str, list[str]]:
    """Every operation name written literally at a recording call in lakemount/, with where."""
    found: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            name = node.func.attr
            args: list[ast.expr] = [k.value for k in node.keywords if k.arg == "op"]
            if name in NAMED_AT and len(node.args) > NAMED_AT[name]:
                args.append(node.args[NAMED_AT[name]])
            for arg in args:
                for text in _texts(arg):
                    found.setdefault(text, []).append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    return found


def test_every_operation_a_front_end_records_by_name_is_listed() -> None:
    found = recorded_names()
    # The scan sees the recording calls (it would pass vacuously if it found none).
    assert {"createTable", "commitTransaction", "list", "read", "write", "commit", "ls", "upload", "rm", "import",
            "export"} <= set(found), sorted(found)
    unknown = {name: where for name, where in found.items() if name not in operations.BY_NAME}
    assert not unknown, f"recorded but not in lakemount/audit/operations.py: {unknown}"


def test_the_edges_tables_and_the_feeds_verbs_are_the_list() -> None:
    from lakemount.api.handler import AUDITED as API_AUDITED
    from lakemount.api.handler import FAILURES_AUDITED
    from lakemount.catalog.events import KINDS
    from lakemount.fuse.control import WRITABLE
    from lakemount.gateway.handler import AUDITED as GATEWAY_AUDITED

    assert GATEWAY_AUDITED == operations.names(frontend=GATEWAY) >= {"CompleteMultipartUpload", "CopyObject"}
    assert API_AUDITED == operations.names(frontend=API) >= {"linkPhysicalAddress", "copyObject", "deleteObjects"}
    versioning = operations.names(frontend=VERSIONING)
    assert set(KINDS) == versioning
    assert set(FAILURES_AUDITED.values()) <= versioning and WRITABLE <= versioning  # failed verbs, control files
    writes = operations.names(kind="write")
    assert {"commit", "merge", "revert", "reset", "CompleteMultipartUpload", "updateTable", "commitTransaction",
            "DeleteObject", "deleteObjects", "rm", "write", "import"} <= writes
    assert not writes & operations.names(kind="read")
