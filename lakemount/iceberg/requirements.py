"""A table commit's requirements (``assert-create``, ``assert-ref-snapshot-id``, ...) checked against the table as it is.

:func:`check` runs against the metadata the commit is about to replace, inside
the commit's retry loop, so a requirement is judged on the state the pointer
swap then expects; one that does not hold is a 409 ``CommitFailedException``,
one that is malformed a 400.  A failure's message is the Java reference's word for word
(``Requirement failed: default partition spec changed: expected id 0 != 1``): clients match on it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from lakemount.iceberg.errors import bad_request, commit_failed
from lakemount.iceberg.metadata import want


def _exists(meta: dict[str, Any] | None, req: dict[str, Any]) -> dict[str, Any]:
    if meta is None:
        raise commit_failed(f"Requirement failed: table does not exist ({req['type']})")
    return meta


def _same(field: str, what: str, words: str) -> Callable[[dict[str, Any] | None, dict[str, Any]], None]:
    """A requirement that ``field`` still holds the id the request names, failing in the reference's ``words``."""
    def check(meta: dict[str, Any] | None, req: dict[str, Any]) -> None:
        expected = want(req, what, int, req["type"])
        actual = _exists(meta, req).get(field)
        if actual != expected:
            raise commit_failed(f"Requirement failed: {words} changed: expected id {expected} != {actual}")
    return check


def _create(meta: dict[str, Any] | None, req: dict[str, Any]) -> None:
    if meta is not None:
        raise commit_failed("Requirement failed: table already exists")


def _uuid(meta: dict[str, Any] | None, req: dict[str, Any]) -> None:
    expected = want(req, "uuid", str, "assert-table-uuid")
    actual = _exists(meta, req).get("table-uuid")
    if not isinstance(actual, str) or actual.lower() != expected.lower():
        raise commit_failed(f"Requirement failed: UUID does not match: expected {actual} != {expected}")


def _ref_snapshot(meta: dict[str, Any] | None, req: dict[str, Any]) -> None:
    name = want(req, "ref", str, "assert-ref-snapshot-id")
    if "snapshot-id" not in req:
        raise bad_request("assert-ref-snapshot-id needs 'snapshot-id' (null: the ref must not exist)")
    expected = want(req, "snapshot-id", int, "assert-ref-snapshot-id", optional=True)
    refs = _exists(meta, req).get("refs", {})
    ref = refs.get(name)
    if name == "main" and ref is None and _exists(meta, req).get("current-snapshot-id") is not None:
        ref = {"snapshot-id": _exists(meta, req)["current-snapshot-id"], "type": "branch"}
    if ref is None:
        if expected is not None:
            raise commit_failed(f"Requirement failed: branch or tag {name} is missing, expected {expected}")
        return
    kind = "tag" if ref.get("type") == "tag" else "branch"
    if expected is None:
        raise commit_failed(f"Requirement failed: {kind} {name} was created concurrently")
    if ref.get("snapshot-id") != expected:
        raise commit_failed(f"Requirement failed: {kind} {name} has changed: expected id {expected} != {ref.get('snapshot-id')}")


CHECKS: Final[dict[str, Callable[[dict[str, Any] | None, dict[str, Any]], None]]] = {
    "assert-create": _create,
    "assert-table-uuid": _uuid,
    "assert-ref-snapshot-id": _ref_snapshot,
    "assert-last-assigned-field-id": _same("last-column-id", "last-assigned-field-id", "last assigned field id"),
    "assert-current-schema-id": _same("current-schema-id", "current-schema-id", "current schema"),
    "assert-last-assigned-partition-id": _same("last-partition-id", "last-assigned-partition-id", "last assigned partition id"),
    "assert-default-spec-id": _same("default-spec-id", "default-spec-id", "default partition spec"),
    "assert-default-sort-order-id": _same("default-sort-order-id", "default-sort-order-id", "default sort order"),
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
