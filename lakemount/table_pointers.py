"""Where an Iceberg table's objects lie in a branch, as far as verbs other than the Iceberg catalog care.

The Iceberg catalog (``lakemount/iceberg/``) stores a table ``t`` of namespace
``a.b`` as the directory ``a/b/t/`` whose pointer object
``a/b/t/_iceberg_table.json`` names its current metadata file.  A merge that
conflicts on a pointer is two branches that changed one table, and a pre-merge
check (``lakemount_check``'s ``iceberg_schema``) reads a table's schema through its
pointer; both find tables here, so the
layout is decided once, in this module (a leaf: it imports nothing of lakemount, so
the catalog, its hooks and the Iceberg front end all may), and the Iceberg catalog
imports its names from here.
"""

from __future__ import annotations

from typing import Final

RESERVED: Final = "_iceberg"
NAMESPACE_MARKER: Final = RESERVED + "_namespace.json"
TABLE_POINTER: Final = RESERVED + "_table.json"
VIEW_POINTER: Final = RESERVED + "_view.json"  # a view's pointer, as a table's: merges name views the same way


def table_of(path: str, kind: str = TABLE_POINTER) -> str | None:
    """The table (``<namespace>.<name>``, levels joined by dots) whose pointer is ``path`` (``kind``: a view's
    pointer name, for views); None for any other path."""
    head, sep, last = path.rpartition("/")
    if last != kind or not sep or not head:
        return None
    levels = head.split("/")
    return ".".join(levels) if len(levels) >= 2 else None


def tables_in(paths: list[str]) -> list[str]:
    """The tables among ``paths`` (pointer objects), in order."""
    return [t for t in map(table_of, paths) if t is not None]


def views_in(paths: list[str]) -> list[str]:
    """The views among ``paths`` (their pointer objects), in order."""
    return [v for v in (table_of(p, VIEW_POINTER) for p in paths) if v is not None]
