"""``lakemount log``: commit history of a ref."""

from __future__ import annotations

import click

from lakemount.catalog.shapes import parse_since
from lakemount.cli.common import commit_json, commit_text, ctx_obj, emit, json_option, parse_uri
from lakemount.errors import InvalidArgument


@click.command("log")
@click.argument("uri")
@click.option("--amount", "--limit", "limit", type=int, default=None, help="Show at most this many commits.")
@click.option("--since", default=None, help="Only commits made at or after this ISO 8601 time (UTC unless it has an offset).")
@click.option("--first-parent", is_flag=True, help="Follow only the first parent of merge commits.")
@click.option("--objects", multiple=True, help="Only commits that changed this path (repeatable).")
@click.option("--prefixes", multiple=True, help="Only commits that changed something under this prefix (repeatable).")
@json_option
def log(uri: str, limit: int | None, since: str | None, first_parent: bool, objects: tuple[str, ...], prefixes: tuple[str, ...]) -> None:
    """Show the history of URI (lakefs://REPO/REF), newest first."""
    u = parse_uri(uri, need_ref=True, path_hint=_path_hint(uri))
    assert u.ref
    if limit is not None and limit < 1:
        raise InvalidArgument("--amount (--limit) must be positive")
    commits = list(
        ctx_obj().app.catalog.log(
            u.repo, u.ref, limit=limit, since=parse_since(since, "--since"), first_parent=first_parent,
            paths=objects, prefixes=prefixes,
        )
    )
    emit([commit_json(c) for c in commits], [commit_text(c) for c in commits])


def _path_hint(uri: str) -> str:
    """What to type instead of ``log lakefs://REPO/REF/PATH``: the history of that path."""
    path = uri.removeprefix("lakefs://").split("/", 2)[-1]
    if path.endswith("/"):
        return f"for the history of a directory use --prefixes {path}"
    return f"for the history of a path use --objects {path} (an object) or --prefixes {path.rstrip('/')}/ (a directory)"


COMMANDS = [log]
