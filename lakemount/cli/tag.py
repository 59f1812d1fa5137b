"""``lakemount tag``: named, immutable pointers to commits."""

from __future__ import annotations

import click

from lakemount.cli.common import ctx_obj, emit, json_option, parse_repo_uri, parse_uri
from lakemount.errors import InvalidArgument


@click.group("tag")
def tag() -> None:
    """Create, list, show and delete tags."""


@tag.command("create")
@click.argument("uri")
@click.argument("commit_uri")
@json_option
def create(uri: str, commit_uri: str) -> None:
    """Create tag URI (lakefs://REPO/TAG) pointing at COMMIT_URI (lakefs://REPO/REF)."""
    u = parse_uri(uri, need_ref=True, path_hint="")
    c = parse_uri(commit_uri, need_ref=True, path_hint="")
    if c.repo != u.repo:
        raise InvalidArgument("the tag and its commit must be in the same repository")
    assert u.ref and c.ref
    t = ctx_obj().app.catalog.create_tag(u.repo, u.ref, c.ref)
    emit({"id": t.name, "commit_id": t.commit_id}, f"Created tag {t.name} ({t.commit_id})")


@tag.command("list")
@click.argument("uri")
@json_option
def list_(uri: str) -> None:
    """List tags of lakefs://REPO."""
    u = parse_repo_uri(uri)
    ts = ctx_obj().app.catalog.list_tags(u.repo)
    emit([{"id": t.name, "commit_id": t.commit_id} for t in ts], [f"{t.name:<40} {t.commit_id}" for t in ts])


@tag.command("show")
@click.argument("uri")
@json_option
def show(uri: str) -> None:
    """Show the commit a tag points at."""
    u = parse_uri(uri, need_ref=True, path_hint="")
    assert u.ref
    t = ctx_obj().app.catalog.get_tag(u.repo, u.ref)
    emit({"id": t.name, "commit_id": t.commit_id}, f"{t.name} {t.commit_id}")


@tag.command("delete")
@click.argument("uri")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@json_option
def delete(uri: str, yes: bool) -> None:
    """Delete a tag."""
    u = parse_uri(uri, need_ref=True, path_hint="")
    assert u.ref
    cat = ctx_obj().app.catalog
    cat.get_tag(u.repo, u.ref)  # a missing tag is an error before any question
    if not yes:
        click.confirm(f"Delete tag {u.ref}?", abort=True)
    cat.delete_tag(u.repo, u.ref)
    emit({"deleted": u.ref}, f"Deleted tag {u.ref}")


COMMANDS = [tag]
