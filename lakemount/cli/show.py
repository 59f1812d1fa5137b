"""``lakemount show``: one commit, by any ref expression."""

from __future__ import annotations

import click

from lakemount.cli.common import commit_json, commit_text, ctx_obj, emit, json_option, parse_ref_uri


@click.command("show")
@click.argument("uri")
@json_option
def show(uri: str) -> None:
    """Show the commit URI (lakefs://REPO/REF) resolves to."""
    c = ctx_obj().app.catalog.commit_of(*parse_ref_uri(uri, "for an object use: lakemount fs stat URI"))
    emit(commit_json(c), commit_text(c))


COMMANDS = [show]
