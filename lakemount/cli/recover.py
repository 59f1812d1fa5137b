"""``lakemount recover``: rebuild a lost ref store from the block store alone."""

from __future__ import annotations

import click

from lakemount.cli.common import ctx_obj, emit, json_option, progress


@click.command("recover")
@click.option("--force", is_flag=True, help="Recover even if the ref store already holds repositories.")
@json_option
def recover(force: bool) -> None:
    """Rebuild repositories, branches, tags and commits from the block store.

    Every commit and ref change is also written to the block store; this replays
    them into an empty ref store (e.g. after losing the SQLite file).  Uncommitted
    changes are not recovered: they live only in the ref store.
    """
    app = ctx_obj().app
    bars: dict[str, object] = {}

    def on_progress(what: str, done: int, total: int) -> None:
        bar = bars.get(what)
        if bar is None:
            bar = bars[what] = progress(total, what)
        bar.n = done  # type: ignore[attr-defined]
        bar.refresh()  # type: ignore[attr-defined]

    try:
        report = app.catalog.recover(force=force, progress=on_progress)
    finally:
        for bar in bars.values():
            bar.close()  # type: ignore[attr-defined]
    data = {
        "repositories": [vars(r) for r in report.repositories],
        "commits": report.commits,
        "branches": report.branches,
        "tags": report.tags,
        "warnings": report.warnings,
    }
    lines = [f"{r.name}: {r.commits} commits, {r.branches} branches, {r.tags} tags" for r in report.repositories]
    lines += [f"warning: {w}" for w in report.warnings]
    emit(data, lines or ["nothing to recover"])


COMMANDS = [recover]
