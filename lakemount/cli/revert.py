"""``lakemount revert``: undo a commit on a branch with a new commit."""

from __future__ import annotations

import click

from lakemount.cli.common import commit_json, ctx_obj, emit, json_option, parse_uri


@click.command("revert")
@click.argument("branch")
@click.argument("commit")
@click.option("--parent-number", "-m", type=int, default=None, help="For a merge commit: the parent (1-based) to revert to.")
@json_option
def revert(branch: str, commit: str, parent_number: int | None) -> None:
    """Revert COMMIT (a ref) on BRANCH (lakefs://REPO/BRANCH)."""
    import getpass

    u = parse_uri(branch, need_ref=True)
    assert u.ref
    c = ctx_obj().app.catalog.revert(u.repo, u.ref, commit, parent_number=parent_number, committer=getpass.getuser())
    emit(commit_json(c), f"Reverted {commit} on {u.ref}: {c.id}")


COMMANDS = [revert]
