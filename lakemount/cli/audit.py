"""``lakemount audit``: who read and changed what in a repository, from its audit table (``lakemount/audit/``).

Local mode reads the table from the block store directly, as the operator
running the command: whoever can read LAKEMOUNT_HOME (0700) reads the table's
files anyway, so no policy could bind them (as the mount's own user).  With
``--server`` (lakectl's ``LAKECTL_SERVER_ENDPOINT_URL``) the command has an
identity, the access key in lakectl's variables, and asks the API's
``getAuditLog``, which refuses a user without ``AuditRead``: exit 10.
``lakemount audit flush`` writes the spools of CLI verbs (``audit/spool.py``).

The repository is ``lakefs://REPO`` as every verb takes it (or ``--repo``);
``lakefs://REPO/REF`` keeps the records of that ref as asked, and
``lakefs://REPO/REF/PATH`` those of paths under PATH too (as ``--path``).

``--since``/``--until`` take ISO 8601 times (UTC unless they say otherwise),
seconds since the epoch, or an age such as ``90m``, ``12h``, ``7d``.  ``--op`` may be repeated, ``--kind`` keeps the
operations of a kind (``write``: every change, as ``lakemount/audit/operations.py`` lists them), and
``--newest-first`` reverses the order (with ``--limit``, the last records).  Table output escapes control characters in
paths and user names (records keep them as they were); ``--json`` prints the records.
"""

from __future__ import annotations

import os
import re
import time
from datetime import UTC, datetime
from itertools import islice
from typing import TYPE_CHECKING, cast

import click

from lakemount.cli.common import ctx_obj, emit, json_option
from lakemount.errors import InvalidArgument

if TYPE_CHECKING:
    from lakemount.audit.record import AuditRecord
    from lakemount.audit.table import Filter as AuditFilter

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


class _RepositoryOrSubcommand(click.Group):
    """``audit lakefs://REPO [OPTIONS]`` as every verb on a repository takes it, and ``audit flush``.

    A first word that names a subcommand runs it (the group's repository
    argument is then not parsed, so ``flush`` is never taken for one); any
    other first word is the repository, with the options before or after it
    (``allow_interspersed_args``, set in the group's context settings).
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Parse as a group when ``args`` start with a subcommand's name, else as a command on a repository."""
        if args and args[0] in self.commands:
            ctx.meta[_SUBCOMMAND] = True
            ctx.allow_interspersed_args = False  # what follows the name is the subcommand's
        return super().parse_args(ctx, args)

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        """The group's parameters, less the repository argument when a subcommand runs."""
        params = super().get_params(ctx)
        if ctx.meta.get(_SUBCOMMAND):
            return [p for p in params if not isinstance(p, click.Argument)]
        return params


_SUBCOMMAND = "lakemount.audit.subcommand"


def target_of(uri: str | None, repo: str | None, path: str | None) -> tuple[str, str | None, str | None]:
    """(repository, ref, path prefix) of ``audit lakefs://REPO[/REF[/PATH]]``, ``--repo`` (``REPO`` or
    ``lakefs://REPO``) and ``--path``.

    ``UsageError`` when no repository is given; ``InvalidArgument`` when the
    URI and ``--repo`` name different repositories, ``--repo`` names a ref or
    a path (the argument does), or the URI's path and ``--path`` differ.
    """
    from lakemount.cli.common import parse_repo_uri, parse_uri

    ref = None
    named = []
    if uri is not None:
        u = parse_uri(uri)
        named.append(u.repo)
        ref = u.ref
        if u.path:
            if path is not None and path != u.path:
                raise InvalidArgument(f"{uri} and --path {path} name different paths: give the path once")
            path = u.path
    if repo is not None:
        named.append(parse_repo_uri(repo).repo if repo.startswith("lakefs://") else repo)
    if not named:
        raise click.UsageError("Missing repository: lakemount audit lakefs://REPO[/REF[/PATH]]")
    if len(set(named)) > 1:
        raise InvalidArgument(f"{uri} and --repo {repo} name different repositories")
    return named[0], ref, path


@click.group("audit", cls=_RepositoryOrSubcommand, invoke_without_command=True,
             subcommand_metavar="| COMMAND [ARGS]...", context_settings={"allow_interspersed_args": True})
@click.argument("repository_uri", metavar="lakefs://REPO[/REF[/PATH]]", required=False)
@click.option("--repo", default=None, metavar="REPO",
              help="The repository, as REPO or lakefs://REPO (the same as the argument).")
@click.option("--path", default=None, help="Only records of paths under this prefix (as PATH in the URI).")
@click.option("--user", default=None, help="Only records of this user.")
@click.option("--since", default=None, help="Only records at or after this time (ISO 8601, epoch seconds, or 7d).")
@click.option("--until", default=None, help="Only records at or before this time.")
@click.option("--op", "ops", multiple=True, metavar="OP",
              help="Only records of this operation (GetObject, read, commit, ...); repeat it for any of several.")
@click.option("--kind", type=click.Choice(["read", "write", "other"]), default=None,
              help="Only records of operations of this kind (write: every change, whatever the front end).")
@click.option("--newest-first", is_flag=True, help="List the newest records first (with --limit: the last ones).")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Show at most this many records.")
@click.option("--server", default=None, envvar="LAKECTL_SERVER_ENDPOINT_URL", metavar="URL",
              help="Read the trail through the REST API at URL as the user of the access key in "
                   "LAKECTL_CREDENTIALS_ACCESS_KEY_ID and LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY (lakectl's variables); "
                   "a user without AuditRead exits 10.  Without it the trail is read locally, as the operator.")
@json_option
@click.pass_context
def audit(click_ctx: click.Context, repo: str | None, path: str | None, user: str | None, since: str | None,
          until: str | None, ops: tuple[str, ...], kind: str | None, newest_first: bool, limit: int | None,
          server: str | None, repository_uri: str | None = None) -> None:
    """Show who read and changed what in lakefs://REPO through every front end (oldest first).

    With REF, only what was done on that ref (as asked: a branch, a tag); with
    PATH, only paths under that prefix (an object, a directory, a table).

    \b
    lakemount audit lakefs://demo --since 1d --op commit
    lakemount audit lakefs://demo/main/db/events/ --newest-first
    lakemount audit lakefs://demo --kind write --newest-first --limit 20

    Records not yet in the table (the spools of CLI verbs on this host, this
    process's own) are written first, so the answer includes them.
    ``lakemount audit flush`` writes the spools without querying.
    """
    if click_ctx.invoked_subcommand is not None:
        return
    repo, ref, path = target_of(repository_uri, repo, path)
    from lakemount.audit.record import as_json, shown
    from lakemount.audit.table import Filter

    start, end = parse_time(since, "since"), parse_time(until, "until")
    if start is not None and end is not None and start > end:
        raise InvalidArgument("--since is after --until")
    from lakemount.audit import operations

    chosen = frozenset(ops) if ops else None
    if kind is not None:
        of_kind = operations.names(kind=cast(operations.Kind, kind))
        chosen = of_kind if chosen is None else chosen & of_kind
    where = Filter(repo=repo, ref=ref, path=path, user=user, ops=chosen, since=start, until=end)
    if server:
        records = remote_records(server, where, limit, newest_first=newest_first)
    else:
        app = ctx_obj().app
        if app.audit is not None:
            app.audit.settle()
        records = list(islice(app.catalog.audit_records(repo, where, newest_first=newest_first), limit))
    lines = [
        f"{datetime.fromtimestamp(r.time, UTC):%Y-%m-%dT%H:%M:%S}Z  {shown(r.user):<12} {r.frontend:<5} {r.op:<14} "
        f"{r.status:<3} {r.bytes:>10}  {shown(r.ref)}@{r.commit[:12] or '-'}  {shown(r.path)}"
        + (f"  [{shown(r.process)} pid {r.pid}]" if r.pid >= 0 else "")
        for r in records
    ]
    emit([as_json(r) for r in records], lines or [f"no audit records in {repo} match"])


@audit.command("flush")
@json_option
def flush() -> None:
    """Write the audit records waiting in this host's spools (CLI verbs') to the repositories' audit tables."""
    app = ctx_obj().app
    if app.audit is None:
        emit({"written": 0}, "the audit trail is off (audit.enabled: false)")
        return
    from lakemount.audit import spool

    with spool.draining(app.audit.spool_dir):
        written = app.audit.settle()
    emit({"written": written}, f"{written} audit records written")


def remote_records(server: str, where: AuditFilter, limit: int | None, *, newest_first: bool = False) -> list[AuditRecord]:
    """The records ``getAuditLog`` of the API at ``server`` returns, every page (``newest_first``: in that order), as
    the key in lakectl's variables.

    ``PermissionDenied`` (exit 10) when the key is refused (401) or its user
    lacks ``AuditRead`` (403); ``NotFound`` for a missing repository;
    ``Unavailable`` when the server cannot be reached.
    """
    import base64
    import json
    import math
    import urllib.error
    import urllib.parse
    import urllib.request

    from lakemount.audit.record import FIELDS, AuditRecord
    from lakemount.errors import LakeMountError, NotFound, PermissionDenied, Unavailable

    key = os.environ.get("LAKECTL_CREDENTIALS_ACCESS_KEY_ID", "")
    secret = os.environ.get("LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY", "")
    if not key or not secret:
        raise InvalidArgument("--server needs LAKECTL_CREDENTIALS_ACCESS_KEY_ID and LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY")
    base = server.rstrip("/").removesuffix("/api/v1")
    if urllib.parse.urlsplit(base).scheme not in ("http", "https"):
        raise InvalidArgument(f"--server {server!r}: expected an http:// or https:// URL")
    assert where.repo is not None
    query: dict[str, str | list[str]] = {k: v for k, v in (("ref", where.ref), ("path", where.path), ("user", where.user))
                                         if v}
    if where.ops is not None:
        query["op"] = sorted(where.ops)
        if not where.ops:  # nothing can match (a kind and operations of other kinds): ask for nothing, not for all
            return []
    if newest_first:
        query["order"] = "desc"
    if where.since is not None:
        query["since"] = str(math.floor(where.since))
    if where.until is not None:
        query["until"] = str(math.ceil(where.until))
    auth = "Basic " + base64.b64encode(f"{key}:{secret}".encode()).decode()
    out: list[AuditRecord] = []
    after = ""
    while limit is None or len(out) < limit:
        q = urllib.parse.urlencode({**query, "amount": "1000", **({"after": after} if after else {})}, doseq=True)
        url = f"{base}/api/v1/repositories/{urllib.parse.quote(where.repo, safe='')}/audit?{q}"
        req = urllib.request.Request(url, headers={"Authorization": auth, "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:  # noqa: S310 - the scheme is checked above
                body = json.load(resp)
        except urllib.error.HTTPError as e:
            try:
                message = str(json.load(e).get("message", "")) or e.reason
            except (ValueError, AttributeError):
                message = str(e.reason)
            if e.code in (401, 403):
                raise PermissionDenied(f"{base}: {message}") from None
            if e.code == 404:
                raise NotFound(f"{base}: {message}") from None
            raise LakeMountError(f"{base}: {e.code} {message}") from None
        except (OSError, ValueError) as e:
            raise Unavailable(f"cannot read the audit trail from {base}: {e}") from None
        for item in body["results"]:
            out.append(AuditRecord(**{name: item["timestamp"] if name == "time" else item[name] for name in FIELDS}))
        pagination = body["pagination"]
        if not pagination.get("has_more"):
            break
        after = pagination["next_offset"]
    return out[:limit]


COMMANDS = [audit]
