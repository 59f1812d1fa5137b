"""``lakemount recover``: rebuild a lost ref store from the block store alone."""

from __future__ import annotations

import click

from lakemount.cli.common import ctx_obj, emit, json_option


@click.command("recover")
@click.option("--force", is_flag=True, help="Recover even if the ref store already holds repositories.")
@json_option
def recover(force: bool) -> None:
    """Rebuild repositories, branches, tags and commits from the block store.

    Every commit and ref change is also written to the block store; this replays
    them into an empty ref store (e.g. after losing the SQLite file).  Uncommitted
    changes are not recovered: they live only in the ref store.
    """
    from lakemount.graveler.recover import recover as run

    app = ctx_obj().app
    report = run(app.journal, app.refs, force=force)
    data = report.to_json() if hasattr(report, "to_json") else vars(report)
    emit(data, "Recovered: " + ", ".join(f"{k}={v}" for k, v in data.items()))


COMMANDS = [recover]
