"""``lakemount merge``: three-way merge of a ref into a branch."""

from __future__ import annotations

import click

from lakemount.cli.common import ctx_obj, emit, json_option, parse_meta, parse_uri
from lakemount.errors import InvalidArgument


@click.command("merge")
@click.argument("source")
@click.argument("destination")
@click.option("--strategy", type=click.Choice(["fail", "source-wins", "dest-wins"]), default="fail", show_default=True,
              help="How to resolve paths changed on both sides.")
@click.option("--squash", is_flag=True, help="Record one parent only (the destination).")
@click.option("--message", "-m", default=None, help="Merge commit message.")
@click.option("--meta", multiple=True, help="Metadata key=value (repeatable).")
@json_option
def merge(source: str, destination: str, strategy: str, squash: bool, message: str | None, meta: tuple[str, ...]) -> None:
    """Merge SOURCE (lakefs://REPO/REF) into DESTINATION (lakefs://REPO/BRANCH)."""
    import getpass

    hint = "a merge takes every change of the source"
    s = parse_uri(source, need_ref=True, path_hint=hint)
    d = parse_uri(destination, need_ref=True, path_hint=hint)
    if s.repo != d.repo:
        raise InvalidArgument("source and destination must be in the same repository")
    assert s.ref and d.ref
    ctx_obj().acts_on(d.repo, "merge", d.ref)
    from lakemount.node import settle

    settle(ctx_obj().app, d.repo, d.ref)  # what this node's write-back mounts hold for the destination comes first
    if s.ref != d.ref:
        settle(ctx_obj().app, s.repo, s.ref)  # and for the source, when it is a branch with writes journaled here
    res = ctx_obj().app.catalog.merge(
        s.repo, s.ref, d.ref, strategy=strategy, squash=squash, message=message,
        committer=getpass.getuser(), metadata=parse_meta(meta),
    )
    text = f"Merged {s.ref} into {d.ref}: {res.commit_id}" if res.merged else f"Already up to date: {d.ref} contains {s.ref}"
    emit({"reference": res.commit_id, "merged": res.merged, "changes": res.changes}, text)


COMMANDS = [merge]
