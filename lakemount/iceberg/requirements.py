"""A table commit's requirements (``assert-create``, ``assert-ref-snapshot-id``, ...) checked against the table as it is.

:func:`check` runs against the metadata the commit is about to replace, inside
the commit's retry loop, so a requirement is judged on the state the pointer
swap then expects; one that does not hold is a 409 ``CommitFailedException``,
one that is malformed a 400.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from lakemount.iceberg.errors import bad_request, commit_failed
from lakemount.iceberg.metadata import want


def _same(field: str, what: str) -> Callable[[dict[str, Any] | None, dict[str, Any]], None]:
    def check(meta: dict[str, Any] | None, req: dict[str, Any]) -> None:
        expected = want(req, what, int, req["type"])
        if meta is None:
            raise commit_failed(f"requirement failed: table does not exist ({req['type']})")
        if meta.get(field) != expected:
            raise commit_failed(f"requirement failed: {what} changed: expected {expected} != {meta.get(field)}")
    return check


def _create(meta: dict[str, Any] | None, req: dict[str, Any]) -> None:
    if meta is not None:
        raise commit_failed("requirement failed: table already exists")


def _uuid(meta: dict[str, Any] | None, req: dict[str, Any]) -> None:
    expected = want(req, "uuid", str, "assert-table-uuid")
    if meta is None:
        raise commit_failed("requirement failed: table does not exist")
    if meta.get("table-uuid") != expected:
        raise commit_failed(f"requirement failed: UUID does not match: expected {meta.get('table-uuid')} != {expected}")


def _ref_snapshot(meta: dict[str, Any] | None, req: dict[str, Any]) -> None:
    name = want(req, "ref", str, "assert-ref-snapshot-id")
    if "snapshot-id" not in req:
        raise bad_request("assert-ref-snapshot-id needs 'snapshot-id' (null: the ref must not exist)")
    expected = want(req, "snapshot-id", int, "assert-ref-snapshot-id", optional=True)
    if meta is None:
        raise commit_failed("requirement failed: table does not exist")
    ref = meta.get("refs", {}).get(name)
    if name == "main" and ref is None and meta.get("current-snapshot-id") is not None:
        ref = {"snapshot-id": meta["current-snapshot-id"]}
    actual = None if ref is None else ref.get("snapshot-id")
    if actual != expected:
        if expected is None:
            raise commit_failed(f"requirement failed: branch or tag {name} was created concurrently")
        raise commit_failed(f"requirement failed: {name} has changed: expected id {expected} != {actual}")


CHECKS: Final[dict[str, Callable[[dict[str, Any] | None, dict[str, Any]], None]]] = {
    "assert-create": _create,
    "assert-table-uuid": _uuid,
    "assert-ref-snapshot-id": _ref_snapshot,
    "assert-last-assigned-field-id": _same("last-column-id", "last-assigned-field-id"),
    "assert-current-schema-id": _same("current-schema-id", "current-schema-id"),
    "assert-last-assigned-partition-id": _same("last-partition-id", "last-assigned-partition-id"),
    "assert-default-spec-id": _same("default-spec-id", "default-spec-id"),
    "assert-default-sort-order-id": _same("default-sort-order-id", "default-sort-order-id"),
}


def parse(requirements: Any) -> list[dict[str, Any]]:
    """The requirements of a commit request, each of a known type; 400 otherwise."""
    if not isinstance(requirements, list):
        raise bad_request("'requirements' must be a list")
    for req in requirements:
        kind = want(req, "type", str, "a requirement")
        if kind not in CHECKS:
            raise bad_request(f"unknown requirement type {kind[:60]!r}")
    return requirements


def creates(requirements: list[dict[str, Any]]) -> bool:
    """Whether the commit creates its table (it asserts that the table does not exist)."""
    return any(r["type"] == "assert-create" for r in requirements)


def check(meta: dict[str, Any] | None, requirements: list[dict[str, Any]]) -> None:
    """Raise 409 ``CommitFailedException`` for the first requirement ``meta`` (None: no table) breaks."""
    for req in requirements:
        CHECKS[req["type"]](meta, req)
