"""``lakemount reset``: drop uncommitted changes of a branch."""

from __future__ import annotations

import click

from lakemount.cli.common import ctx_obj, emit, json_option, parse_uri
from lakemount.errors import InvalidArgument


@click.command("reset")
@click.argument("uri")
@click.option("--prefix", default=None, help="Only changes under this path prefix.")
@click.option("--object", "obj", default=None, help="Only this one path.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@json_option
def reset(uri: str, prefix: str | None, obj: str | None, yes: bool) -> None:
    """Drop uncommitted changes of URI (lakefs://REPO/BRANCH[/PATH]).

    A path in the URI acts like --prefix.
    """
    u = parse_uri(uri, need_ref=True)
    assert u.ref
    if u.path and prefix is None and obj is None:
        prefix = u.path
    if prefix is not None and obj is not None:
        raise InvalidArgument("use either --prefix or --object")
    what = f"changes under {prefix}" if prefix else f"changes to {obj}" if obj else "ALL uncommitted changes"
    if not yes and prefix is None and obj is None:
        click.confirm(f"Drop {what} on {u.repo}/{u.ref}?", abort=True)
    ctx_obj().app.catalog.reset(u.repo, u.ref, prefix=prefix or None, path=obj or None)
    emit({"reset": str(u), "scope": "prefix" if prefix else "object" if obj else "all"}, f"Dropped {what} on {u.ref}")


COMMANDS = [reset]
