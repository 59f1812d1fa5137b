"""The audit trail of a repository: who read and changed what (``AuditRead``, Admin only by default).

Reads the repository's audit table (``lakemount/audit/table.py``) filtered by
path prefix, user, operation and time window, oldest first, a page at a time;
``after`` is the ``id`` of the last record of the previous page.  The first
page writes this process's buffer and this host's spools (CLI verbs) first;
records still buffered in other processes (up to ``audit.flush_s`` seconds
old) are not there yet.
"""

from __future__ import annotations

from itertools import islice

from lakemount.api.context import Ctx, json_response, repo_of
from lakemount.api.errors import bad_request
from lakemount.api.pagination import page
from lakemount.api.routing import AMOUNT, Param, operation
from lakemount.audit import table
from lakemount.audit.record import as_json, cursor
from lakemount.auth.policies import Action
from lakemount.serving.http import Response

TAG = "audit"


@operation("GET", "/repositories/{repository}/audit", "getAuditLog", tag=TAG,
           summary="the repository's audit trail: reads and changes by every front end, oldest first",
           params=(Param("path", description="only records of paths under this prefix"),
                   Param("user", description="only records of this user"),
                   Param("op", description="only records of this operation (GetObject, statObject, commit, ...)"),
                   Param("since", "integer", description="only records at or after this time (seconds since the epoch)"),
                   Param("until", "integer", description="only records at or before this time (seconds since the epoch)"),
                   Param("after", description="return records after this id (the previous page's next_offset)"),
                   AMOUNT),
           response="AuditRecordList", errors=(400, 401, 403, 404))
def get_audit_log(ctx: Ctx) -> Response:
    """getAuditLog: a page of the audit records of ``repository`` that the filters keep; 403 without AuditRead."""
    repo = repo_of(ctx, Action.AUDIT_READ)
    since, until = ctx.q_int("since"), ctx.q_int("until")
    if since is not None and until is not None and since > until:
        raise bad_request("since is after until")
    where = table.Filter(repo=repo, path=ctx.q("path") or None, user=ctx.q("user") or None, op=ctx.q("op") or None,
                         since=since, until=until)
    after = ctx.q("after") or ""
    log = ctx.service.app.audit
    if log is not None and not after:
        log.settle()
    n = ctx.page_size()
    found = (r for r in ctx.catalog.audit_records(repo, where) if cursor(r) > after)
    items = list(islice(found, n + 1))
    more = len(items) > n
    items = items[:n]
    return json_response(200, page([as_json(r) for r in items], more, cursor(items[-1]) if more else ""))
