"""The audit trail of a repository: who read and changed what (``AuditRead``, Admin only by default).

Reads the repository's audit table (``lakemount/audit/table.py``) filtered by
ref, path prefix, user, operations (names, or a kind: every write at once) and time
window, oldest first or newest first (``order=desc``), a page at a time;
``after`` is the ``id`` of the last record of the previous page (the next page
continues in the same order, and reads only the hours from that record on).
The first page writes this process's buffer and this host's spools (CLI verbs)
first; records still buffered in other processes (up to ``audit.flush_s``
seconds old) are not there yet.  ``listAuditOperations`` lists the operations
the trail records (``lakemount/audit/operations.py``), what the UI's filter
offers.
"""

from __future__ import annotations

from itertools import islice
from typing import cast

from lakemount.api.context import Ctx, json_response, repo_of
from lakemount.api.errors import bad_request
from lakemount.api.pagination import page
from lakemount.api.routing import AMOUNT, Param, operation
from lakemount.audit import operations, table
from lakemount.audit.record import as_json, cursor
from lakemount.auth.policies import Action
from lakemount.serving.http import Response

TAG = "audit"
ORDERS = ("asc", "desc")


@operation("GET", "/repositories/{repository}/audit", "getAuditLog", tag=TAG,
           summary="the repository's audit trail: reads and changes by every front end, oldest first (order=desc: newest first)",
           params=(Param("ref", description="only records of this ref as asked (a branch, a tag, a commit expression)"),
                   Param("path", description="only records of paths under this prefix"),
                   Param("user", description="only records of this user"),
                   Param("op", array=True, description="only records of these operations (repeated: any of them; "
                                                       "listAuditOperations names them)"),
                   Param("kind", description="only records of operations of this kind: read, write or other "
                                             "(listAuditOperations); with op, records that match both"),
                   Param("since", "integer", description="only records at or after this time (seconds since the epoch)"),
                   Param("until", "integer", description="only records at or before this time (seconds since the epoch)"),
                   Param("order", description="asc (default): oldest first; desc: newest first"),
                   Param("after", description="return records after this id, in the page's order (the previous "
                                              "page's next_offset)"),
                   AMOUNT),
           response="AuditRecordList", errors=(400, 401, 403, 404))
def get_audit_log(ctx: Ctx) -> Response:
    """getAuditLog: a page of the audit records of ``repository`` that the filters keep; 403 without AuditRead,
    400 for a window that ends before it starts, an unknown kind or order."""
    repo = repo_of(ctx, Action.AUDIT_READ)
    since, until = ctx.q_int("since"), ctx.q_int("until")
    if since is not None and until is not None and since > until:
        raise bad_request("since is after until")
    order = ctx.q("order") or "asc"
    if order not in ORDERS:
        raise bad_request(f"order must be asc or desc, not {order[:40]!r}")
    kind = ctx.q("kind") or None
    if kind is not None and kind not in operations.KINDS:
        raise bad_request(f"kind must be one of {', '.join(operations.KINDS)}, not {kind[:40]!r}")
    named = ctx.q_list("op")
    ops = frozenset(named) if named else None
    if kind is not None:
        of_kind = operations.names(kind=cast(operations.Kind, kind))  # one of KINDS: checked above
        ops = of_kind if ops is None else ops & of_kind
    where = table.Filter(repo=repo, ref=ctx.q("ref") or None, path=ctx.q("path") or None, user=ctx.q("user") or None, ops=ops,
                         since=since, until=until)
    after = ctx.q("after") or ""
    log = ctx.service.app.audit
    if log is not None and not after:
        log.settle()
    n = ctx.page_size()
    found = ctx.catalog.audit_records(repo, where, newest_first=order == "desc", after=after)
    items = list(islice(found, n + 1))
    more = len(items) > n
    items = items[:n]
    return json_response(200, page([as_json(r) for r in items], more, cursor(items[-1]) if more else ""))


@operation("GET", "/repositories/{repository}/audit/operations", "listAuditOperations", tag=TAG,
           summary="the operations the audit trail records: name, front end, kind (read, write, other) and summary",
           response="AuditOperationList", errors=(401, 403, 404))
def list_audit_operations(ctx: Ctx) -> Response:
    """listAuditOperations: every value of a record's ``op`` (``lakemount/audit/operations.py``), in one page;
    403 without AuditRead on ``repository``."""
    repo_of(ctx, Action.AUDIT_READ)
    items = [{"name": op.name, "frontend": op.frontend, "kind": op.kind, "summary": op.summary}
             for op in operations.OPERATIONS]
    return json_response(200, page(items, False, ""))
