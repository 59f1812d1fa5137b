"""``lakemount cherry-pick``: apply one commit's change to a branch."""

from __future__ import annotations

import click

from lakemount.cli.common import commit_json, ctx_obj, emit, json_option, parse_uri


@click.command("cherry-pick")
@click.argument("commit")
@click.argument("branch")
@click.option("--parent-number", "-m", type=int, default=None, help="For a merge commit: the parent (1-based) to diff against.")
@json_option
def cherry_pick(commit: str, branch: str, parent_number: int | None) -> None:
    """Apply the change COMMIT (lakefs://REPO/REF) introduced onto BRANCH (lakefs://REPO/BRANCH)."""
    import getpass

    c = parse_uri(commit, need_ref=True)
    b = parse_uri(branch, need_ref=True)
    assert c.ref and b.ref
    new = ctx_obj().app.catalog.cherry_pick(b.repo, b.ref, c.ref, parent_number=parent_number, committer=getpass.getuser())
    emit(commit_json(new), f"Cherry-picked {c.ref} onto {b.ref}: {new.id}")


COMMANDS = [cherry_pick]
