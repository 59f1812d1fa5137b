"""``lakemount repo``: create, list, show and delete repositories."""

from __future__ import annotations

import click

from lakemount.catalog import shapes
from lakemount.cli.common import ctx_obj, emit, iso, json_option, parse_repo_uri


@click.group("repo")
def repo() -> None:
    """Create, list and delete repositories."""


@repo.command("create")
@click.argument("uri")
@click.argument("storage_namespace", required=False)
@click.option("--default-branch", "-d", default="main", show_default=True, help="Name of the first branch.")
@json_option
def create(uri: str, storage_namespace: str | None, default_branch: str) -> None:
    """Create repository URI (lakefs://NAME) storing its data in STORAGE_NAMESPACE.

    STORAGE_NAMESPACE is a URL (local:///path or s3://bucket/prefix); by default it
    lies under the block store's root (LAKEMOUNT_HOME/data for the embedded setup).
    """
    u = parse_repo_uri(uri)
    r = ctx_obj().app.catalog.create_repository(u.repo, storage_namespace, default_branch)
    emit(
        shapes.repository_json(r),
        f"Repository: lakefs://{r.name}\nStorage namespace: {r.storage_namespace}\nDefault branch: {r.default_branch}",
    )


@repo.command("list")
@json_option
def list_() -> None:
    """List repositories."""
    repos = ctx_obj().app.catalog.list_repositories()
    emit(
        [shapes.repository_json(r) for r in repos],
        [f"{r.name:<30} {r.default_branch:<16} {iso(r.creation_date)}  {r.storage_namespace}" for r in repos],
    )


@repo.command("delete")
@click.argument("uri")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@json_option
def delete(uri: str, yes: bool) -> None:
    """Delete a repository's refs (its data stays in the storage namespace until GC)."""
    u = parse_repo_uri(uri)
    cat = ctx_obj().app.catalog
    cat.repository(u.repo)  # a missing repository is an error before any question
    if not yes:
        click.confirm(f"Delete repository {u.repo} and all its branches, tags and commits?", abort=True)
    cat.delete_repository(u.repo)
    emit({"deleted": u.repo}, f"Deleted repository {u.repo}")


COMMANDS = [repo]
