"""Print the route tables of the API server from the code, as docs/API.md and docs/ICEBERG.md show them.

The lakeFS API's table is ``lakemount/api/routes.py``'s ``ROUTES``; the Iceberg catalog's is
``lakemount/iceberg/service.py``'s ``ROUTES``.  ``tests/test_docs.py`` checks that the documents hold what this
prints, so a route added, removed or moved is a document changed in the same commit::

    .venv/bin/python scripts/route_table.py api       # the table in docs/API.md
    .venv/bin/python scripts/route_table.py iceberg   # the table in docs/ICEBERG.md
"""

from __future__ import annotations

import sys


def api_table() -> str:
    """The lakeFS API's routes, one row each: method, path below ``/api/v1``, operationId, module under api/operations/."""
    from lakemount.api.routes import ROUTES

    rows = ["| method | path (below `/api/v1`) | operationId | module |", "|---|---|---|---|"]
    for op in ROUTES:
        module = op.func.__module__.rsplit(".", 1)[-1]
        rows.append(f"| {op.method} | `{op.template}` | `{op.operation_id}` | `operations/{module}.py` |")
    return "\n".join(rows) + "\n"


def iceberg_table() -> str:
    """The Iceberg catalog's routes, one row each: method, path below the address, handler, whether advertised."""
    from lakemount.iceberg.service import ROUTES

    rows = ["| method | path (below the catalog's address) | handler | in `/v1/config` `endpoints` |", "|---|---|---|---|"]
    for r in ROUTES:
        rows.append(f"| {r.method} | `{r.template}` | `{r.name}` | {'yes' if r.advertised else 'no'} |")
    return "\n".join(rows) + "\n"


TABLES = {"api": api_table, "iceberg": iceberg_table}

if __name__ == "__main__":
    which = sys.argv[1:] or list(TABLES)
    for name in which:
        if name not in TABLES:
            sys.exit(f"usage: route_table.py [{' | '.join(TABLES)}]...")
        sys.stdout.write(TABLES[name]())
