"""``lakemount tag``: named, immutable pointers to commits."""

from __future__ import annotations

import click

from lakemount.catalog.shapes import ref_json
from lakemount.cli.common import ctx_obj, emit, emit_refs, json_option, parse_ref_uri, parse_repo_uri, ref_and_target


@click.group("tag")
def tag() -> None:
    """Create, list, show and delete tags."""


@tag.command("create")
@click.argument("uri")
@click.argument("commit_uri")
@json_option
def create(uri: str, commit_uri: str) -> None:
    """Create tag URI (lakefs://REPO/TAG) pointing at COMMIT_URI (lakefs://REPO/REF)."""
    repo, name, ref = ref_and_target(uri, commit_uri, "the tag and its commit must be in the same repository")
    ctx_obj().acts_on(repo, "tag-created", name)
    t = ctx_obj().app.catalog.create_tag(repo, name, ref)
    emit(ref_json(t.name, t.commit_id), f"Created tag {t.name} ({t.commit_id})")


@tag.command("list")
@click.argument("uri")
@json_option
def list_(uri: str) -> None:
    """List tags of lakefs://REPO."""
    emit_refs(ctx_obj().app.catalog.list_tags(parse_repo_uri(uri).repo))


@tag.command("show")
@click.argument("uri")
@json_option
def show(uri: str) -> None:
    """Show the commit a tag points at."""
    t = ctx_obj().app.catalog.get_tag(*parse_ref_uri(uri))
    emit(ref_json(t.name, t.commit_id), f"{t.name} {t.commit_id}")


@tag.command("delete")
@click.argument("uri")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@json_option
def delete(uri: str, yes: bool) -> None:
    """Delete a tag."""
    repo, name = parse_ref_uri(uri)
    ctx_obj().acts_on(repo, "tag-deleted", name)
    cat = ctx_obj().app.catalog
    cat.get_tag(repo, name)  # a missing tag is an error before any question
    if not yes:
        click.confirm(f"Delete tag {name}?", abort=True)
    cat.delete_tag(repo, name)
    emit({"deleted": name}, f"Deleted tag {name}")


COMMANDS = [tag]
