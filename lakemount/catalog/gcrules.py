"""A repository's garbage-collection rules and where they are stored: ``_lakefs/gc/rules.json`` in its
storage namespace, in lakeFS's JSON form, so they travel with the data and survive ``lakemount recover``.

They sit under the catalog (``Catalog.gc_rules`` and its siblings) so that front ends (the CLI, the REST
API) read and set them without the block store; which commits they retain is ``jobs.retention``'s.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from lakemount.catalog.model import BlockAdapter
from lakemount.catalog.storage import join
from lakemount.errors import InvalidArgument, ObjectNotFound

RULES_KEY: Final = "_lakefs/gc/rules.json"


@dataclass(frozen=True, slots=True)
class GcRules:
    """Retention in days: a default and per-branch overrides."""

    default_retention_days: int
    branches: tuple[tuple[str, int], ...] = field(default=())

    def __post_init__(self) -> None:
        for name, days in (("default", self.default_retention_days), *self.branches):
            if not isinstance(days, int) or isinstance(days, bool) or days < 0:
                raise InvalidArgument(f"retention days must be a whole number >= 0 (branch {name}: {days!r})")

    def days_for(self, branch: str) -> int:
        for name, days in self.branches:
            if name == branch:
                return days
        return self.default_retention_days

    @property
    def keeps_history(self) -> bool:
        """False when every rule is 0 days: nothing but heads, tags and staging would survive."""
        return self.default_retention_days > 0 or any(d > 0 for _, d in self.branches)

    def to_json(self) -> dict[str, Any]:
        return {
            "default_retention_days": self.default_retention_days,
            "branches": [{"branch_id": b, "retention_days": d} for b, d in self.branches],
        }

    @staticmethod
    def from_json(doc: Mapping[str, Any]) -> GcRules:
        """Parse lakeFS's rule format; raises ``InvalidArgument`` on anything else."""
        try:
            default = doc["default_retention_days"]
            branches = tuple(sorted((str(b["branch_id"]), b["retention_days"]) for b in doc.get("branches", [])))
        except (KeyError, TypeError) as exc:
            raise InvalidArgument(f"GC rules must look like {{'default_retention_days': N, 'branches': [...]}}: {exc}") from exc
        if len({b for b, _ in branches}) != len(branches):
            raise InvalidArgument("GC rules name a branch twice")
        return GcRules(default, branches)


def _rules_url(namespace: str) -> str:
    return join(namespace, RULES_KEY)


def load_rules(adapter: BlockAdapter, namespace: str) -> GcRules | None:
    """The repository's rules, or None if none were set."""
    try:
        data = adapter.get(_rules_url(namespace))
    except ObjectNotFound:
        return None
    try:
        return GcRules.from_json(json.loads(data))
    except ValueError as exc:
        raise InvalidArgument(f"{_rules_url(namespace)} is not valid JSON: {exc}") from exc


def store_rules(adapter: BlockAdapter, namespace: str, rules: GcRules) -> None:
    """Store ``rules`` as the repository's GC rules (replacing any); block-store errors pass through."""
    adapter.put(_rules_url(namespace), json.dumps(rules.to_json(), indent=2, sort_keys=True).encode())


def delete_rules(adapter: BlockAdapter, namespace: str) -> None:
    """Remove the repository's GC rules (a no-op if none were set); block-store errors pass through."""
    adapter.delete(_rules_url(namespace))
