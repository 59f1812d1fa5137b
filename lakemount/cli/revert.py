"""``lakemount revert``: undo a commit on a branch with a new commit."""

from __future__ import annotations

import click

from lakemount.cli.common import commit_json, ctx_obj, emit, json_option, parent_number_option, parse_uri, ref_of
from lakemount.errors import InvalidArgument


@click.command("revert")
@click.argument("branch")
@click.argument("commits", nargs=-1, required=True)
@parent_number_option("For a merge commit: the parent (1-based) to revert to.")
@click.option("--allow-empty", is_flag=True, help="Commit even if the revert changes nothing.")
@json_option
def revert(branch: str, commits: tuple[str, ...], parent_number: int | None, allow_empty: bool) -> None:
    """Revert COMMITS on BRANCH (lakefs://REPO/BRANCH), one new commit each, in order.

    Each commit is a lakefs://REPO/REF URI as lakectl takes it (a bare REF of the
    same repository is accepted too).
    """
    import getpass

    u = parse_uri(branch, need_ref=True, path_hint="")
    assert u.ref
    refs = [ref_of(c, u.repo) for c in commits]
    ctx_obj().acts_on(u.repo, "revert", u.ref)
    cat = ctx_obj().app.catalog
    done = []
    for ref in refs:
        done.append(
            cat.revert(u.repo, u.ref, ref, parent_number=parent_number, committer=getpass.getuser(), allow_empty=allow_empty)
        )
    if not done:
        raise InvalidArgument("revert: name a commit to revert")
    emit(
        commit_json(done[0]) if len(done) == 1 else [commit_json(c) for c in done],
        [f"Reverted {ref} on {u.ref}: {c.id}" for ref, c in zip(refs, done, strict=True)],
    )


COMMANDS = [revert]
