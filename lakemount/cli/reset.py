"""``lakemount reset``: drop uncommitted changes of a branch."""

from __future__ import annotations

import click

from lakemount.cli.common import ctx_obj, emit, json_option, parse_uri
from lakemount.errors import InvalidArgument


@click.command("reset")
@click.argument("uri")
@click.option("--prefix", default=None, help="Only changes whose path starts with this string.")
@click.option("--object", "obj", default=None, help="Only this one path.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@json_option
def reset(uri: str, prefix: str | None, obj: str | None, yes: bool) -> None:
    """Drop uncommitted changes of URI (lakefs://REPO/BRANCH[/PATH]).

    A path in the URI means that object or that directory (PATH and PATH/...),
    never a string prefix: lakefs://r/main/a leaves ab/ alone.  --prefix is a
    string prefix; with no path, --prefix or --object the whole branch is reset.
    """
    u = parse_uri(uri, need_ref=True)
    assert u.ref
    chosen = [x for x in (u.path.strip("/") or None, prefix, obj) if x is not None]
    if len(chosen) > 1:
        raise InvalidArgument("reset: give one of a path in the URI, --prefix or --object")
    ctx_obj().acts_on(u.repo, "reset", u.ref, u.path.strip("/") or prefix or obj or "")
    cat = ctx_obj().app.catalog
    path = u.path.strip("/")
    if path:
        what, scope = f"changes to {path} and under {path}/", "path"
    elif prefix is not None:
        what, scope = f"changes under prefix {prefix!r}", "prefix"
    elif obj is not None:
        what, scope = f"changes to {obj}", "object"
    else:
        what, scope = "ALL uncommitted changes", "all"
    if not yes and scope == "all":
        cat.get_branch(u.repo, u.ref)  # a missing branch is an error before any question
        click.confirm(f"Drop {what} on {u.repo}/{u.ref}?", abort=True)
    if scope == "path":
        cat.reset_path(u.repo, u.ref, path)
    else:
        cat.reset(u.repo, u.ref, prefix=prefix, path=obj)
    emit({"reset": str(u), "scope": scope}, f"Dropped {what} on {u.ref}")


COMMANDS = [reset]
