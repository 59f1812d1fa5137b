"""``lakemount cherry-pick``: apply one commit's change to a branch."""

from __future__ import annotations

import click

from lakemount.cli.common import commit_json, ctx_obj, emit, json_option, parent_number_option, parse_uri, ref_of


@click.command("cherry-pick")
@click.argument("commit")
@click.argument("branch")
@parent_number_option("For a merge commit: the parent (1-based) to diff against.")
@click.option("--allow-empty", is_flag=True, help="Commit even if the change is already on BRANCH.")
@json_option
def cherry_pick(commit: str, branch: str, parent_number: int | None, allow_empty: bool) -> None:
    """Apply the change COMMIT (lakefs://REPO/REF) introduced onto BRANCH (lakefs://REPO/BRANCH)."""
    import getpass

    b = parse_uri(branch, need_ref=True, path_hint="")
    assert b.ref
    ref = ref_of(commit, b.repo)
    ctx_obj().acts_on(b.repo, "cherry-pick", b.ref)
    new = ctx_obj().app.catalog.cherry_pick(
        b.repo, b.ref, ref, parent_number=parent_number, committer=getpass.getuser(), allow_empty=allow_empty
    )
    emit(commit_json(new), f"Cherry-picked {ref} onto {b.ref}: {new.id}")


COMMANDS = [cherry_pick]
