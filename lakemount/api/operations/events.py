"""The event feed of a repository as server-sent events (lakemount's extension): ``GET /repositories/{repo}/events``.

Each answer carries the events after the id the client names (``after``, or
the ``Last-Event-ID`` header a browser's ``EventSource`` sends when it
reconnects), one SSE message each (``id``, ``event`` = the kind, ``data`` =
JSON), and ``retry: 1000``: the server closes the stream at once and the
client reconnects a second later, so no API worker is held by a waiting
browser and every event arrives once, in order.
"""

from __future__ import annotations

import json

from lakemount.api.context import INERT_HEADERS, Ctx, repo_of
from lakemount.api.errors import bad_request
from lakemount.api.routing import Param, operation
from lakemount.auth.policies import Action
from lakemount.serving.http import Response

RETRY_MS = 1000
MAX_EVENTS = 500


@operation("GET", "/repositories/{repository}/events", "getRepositoryEvents", tag="events",
           summary="events of a repository (commits, merges, rules, hook runs, pull requests) as server-sent events",
           params=(Param("branch", description="only this branch's events"),
                   Param("after", "integer", minimum=0, description="events after this id (or Last-Event-ID)"),
                   Param("Last-Event-ID", where="header")),
           content_type="text/event-stream")
def events(ctx: Ctx) -> Response:
    """Events of a repository (commits, merges, rules, hook runs, pull requests) as server-sent events."""
    repo = repo_of(ctx, Action.READ_REPO)
    ctx.catalog.repository(repo)
    after = ctx.q_int("after")
    if after is None:
        last = (ctx.request.header("last-event-id") or "").strip()
        if last and not (last.isdigit() and int(last) < 1 << 63):
            raise bad_request("Last-Event-ID must be an event id")
        after = int(last) if last else 0
    found = ctx.catalog.feed.read(repo, branch=ctx.q("branch") or None, after=after, limit=MAX_EVENTS)
    out = [f"retry: {RETRY_MS}\n\n"]
    for e in found:
        data = json.dumps({"id": e.id, "repository": e.repo, "branch": e.branch, "kind": e.kind, "time": e.time, **e.payload})
        out.append(f"id: {e.id}\nevent: {e.kind}\ndata: {data}\n\n")
    return Response(200, [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"), *INERT_HEADERS], "".join(out).encode())
