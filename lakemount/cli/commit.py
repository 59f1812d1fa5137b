"""``lakemount commit``: commit a branch's staged changes."""

from __future__ import annotations

import click

from lakemount.cli.common import commit_json, commit_text, ctx_obj, emit, json_option, parse_meta, parse_uri


@click.command("commit")
@click.argument("uri")
@click.option("--message", "-m", required=True, help="Commit message.")
@click.option("--meta", multiple=True, help="Metadata key=value (repeatable).")
@click.option("--allow-empty", is_flag=True, help="Commit even if nothing changed.")
@click.option("--committer", default=None, help="Committer name (default: $USER).")
@json_option
def commit(uri: str, message: str, meta: tuple[str, ...], allow_empty: bool, committer: str | None) -> None:
    """Commit the uncommitted changes of branch URI (lakefs://REPO/BRANCH)."""
    import getpass

    u = parse_uri(uri, need_ref=True, path_hint="a commit takes every uncommitted change of the branch")
    assert u.ref
    ctx_obj().acts_on(u.repo, "commit", u.ref)
    from lakemount.node import settle

    settle(ctx_obj().app, u.repo, u.ref)  # what this node's write-back mounts hold for the branch comes first
    res = ctx_obj().app.catalog.commit(
        u.repo, u.ref, message, committer=committer or getpass.getuser(), metadata=parse_meta(meta), allow_empty=allow_empty
    )
    c = res.commit
    out = commit_json(c)
    if res.stats is not None:
        out["stats"] = {"ranges_written": res.stats.ranges_written, "ranges_reused": res.stats.ranges_reused, "changes": res.stats.changes_applied}
    emit(out, f"Branch: {u}\nCommit for branch {u.ref} completed.\n\n" + commit_text(c))


COMMANDS = [commit]
