"""``lakemount audit``: who read and changed what in a repository, from its audit table (``lakemount/audit/``).

Local mode reads the table from the block store directly, as the operator
running the command; the API's ``getAuditLog`` serves the same records to
users holding ``AuditRead``.  ``--since``/``--until`` take ISO 8601 times
(UTC unless they say otherwise), seconds since the epoch, or an age such as
``90m``, ``12h``, ``7d``.  Table output escapes control characters in paths and
user names (records keep them as they were); ``--json`` prints the records.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from itertools import islice

import click

from lakemount.cli.common import ctx_obj, emit, json_option
from lakemount.errors import InvalidArgument

_AGE = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_time(text: str | None, name: str) -> float | None:
    """Seconds since the epoch of ``--since``/``--until``; ``InvalidArgument`` naming the option."""
    if text is None:
        return None
    text = text.strip()
    m = _AGE.match(text)
    if m:
        return time.time() - float(m.group(1)) * _UNIT[m.group(2)]
    try:
        return float(text)
    except ValueError:
        pass
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidArgument(f"--{name} {text!r}: expected an ISO 8601 time, seconds since the epoch, "
                              "or an age such as 90m, 12h, 7d") from None
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp()


@click.command("audit")
@click.option("--repo", required=True, help="The repository whose audit trail to read.")
@click.option("--path", default=None, help="Only records of paths under this prefix.")
@click.option("--user", default=None, help="Only records of this user.")
@click.option("--since", default=None, help="Only records at or after this time (ISO 8601, epoch seconds, or 7d).")
@click.option("--until", default=None, help="Only records at or before this time.")
@click.option("--op", default=None, help="Only records of this operation (GetObject, read, commit, ...).")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Show at most this many records.")
@json_option
def audit(repo: str, path: str | None, user: str | None, since: str | None, until: str | None, op: str | None,
          limit: int | None) -> None:
    """Show who read and changed what in REPO through every front end (oldest first)."""
    from lakemount.audit.record import as_json, shown
    from lakemount.audit.table import Filter

    start, end = parse_time(since, "since"), parse_time(until, "until")
    if start is not None and end is not None and start > end:
        raise InvalidArgument("--since is after --until")
    cat = ctx_obj().app.catalog
    where = Filter(repo=repo, path=path, user=user, op=op, since=start, until=end)
    records = list(islice(cat.audit_records(repo, where), limit))
    lines = [
        f"{datetime.fromtimestamp(r.time, UTC):%Y-%m-%dT%H:%M:%S}Z  {shown(r.user):<12} {r.frontend:<5} {r.op:<14} "
        f"{r.status:<3} {r.bytes:>10}  {shown(r.ref)}@{r.commit[:12] or '-'}  {shown(r.path)}"
        + (f"  [{shown(r.process)} pid {r.pid}]" if r.pid >= 0 else "")
        for r in records
    ]
    emit([as_json(r) for r in records], lines or [f"no audit records in {repo} match"])


COMMANDS = [audit]
