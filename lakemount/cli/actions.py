"""``lakemount actions``: hook runs of a repository and checking action files (like lakectl ``actions``)."""

from __future__ import annotations

from typing import Any

import click

from lakemount.actions.parser import parse_action
from lakemount.actions.runs import HookRun, Run
from lakemount.cli.common import ctx_obj, emit, iso, json_option, parse_repo_uri
from lakemount.errors import InvalidArgument


def run_json(r: Run) -> dict[str, Any]:
    """A run in lakeFS's ``ActionRun`` shape."""
    return {
        "run_id": r.run_id,
        "branch": r.branch,
        "source_ref": r.source_ref,
        "event_type": r.event_type,
        "status": r.status,
        "start_time": iso(r.start_time),
        "end_time": iso(r.end_time),
        "commit_id": r.commit_id,
    }


def hook_json(h: HookRun) -> dict[str, Any]:
    """A hook run in lakeFS's ``HookRun`` shape, with its output and duration."""
    return {
        "hook_run_id": h.hook_run_id,
        "action": h.action,
        "hook_id": h.hook_id,
        "status": h.status,
        "start_time": iso(h.start_time),
        "duration_seconds": round(h.duration, 3),
        "output": h.output,
    }


@click.group("actions")
def actions() -> None:
    """Hook runs (lakeFS actions under _lakefs_actions/) and action files."""


@actions.group("runs")
def runs() -> None:
    """Recorded runs of hooks."""


@runs.command("list")
@click.argument("uri")
@click.option("--branch", default=None, help="Only runs of this branch.")
@click.option("--commit", "commit_id", default=None, help="Only runs of this commit id.")
@click.option("--amount", default=100, show_default=True, help="How many runs to show.")
@click.option("--after", default="", help="Show runs older than this run id (paging).")
@json_option
def runs_list(uri: str, branch: str | None, commit_id: str | None, amount: int, after: str) -> None:
    """List hook runs of lakefs://REPO, newest first."""
    u = parse_repo_uri(uri)
    cat = ctx_obj().app.catalog
    cat.repository(u.repo)
    if amount < 1:
        raise InvalidArgument("--amount must be at least 1")
    found = cat.actions.store.list_runs(u.repo, branch=branch, commit_id=commit_id, after=after, limit=amount)
    emit(
        [run_json(r) for r in found],
        [f"{r.run_id}  {iso(r.start_time)}  {r.event_type:<20} {r.branch or '-':<24} {r.status:<9} {r.commit_id[:16]}" for r in found],
    )


@runs.command("show")
@click.argument("uri")
@click.argument("run_id")
@json_option
def runs_show(uri: str, run_id: str) -> None:
    """Show one run of lakefs://REPO with each hook's status, duration and output."""
    u = parse_repo_uri(uri)
    cat = ctx_obj().app.catalog
    cat.repository(u.repo)
    r = cat.actions.store.get_run(u.repo, run_id)
    lines = [
        f"Run: {r.run_id}",
        f"Event: {r.event_type}",
        f"Branch: {r.branch or '-'}",
        f"Commit: {r.commit_id or '-'}",
        f"Status: {r.status}",
        f"Start: {iso(r.start_time)}  Duration: {r.end_time - r.start_time:.3f}s",
    ]
    for h in r.hooks:
        lines += ["", f"Hook {h.action}/{h.hook_id}: {h.status} ({h.duration:.3f}s)"]
        lines += [f"  {line}" for line in h.output.splitlines()]
    emit({**run_json(r), "hooks": [hook_json(h) for h in r.hooks]}, lines)


runs.add_command(runs_show, "describe")  # lakectl's name


@actions.command("validate")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@json_option
def validate(path: str) -> None:
    """Check that the action file PATH parses; prints its events and hooks."""
    from lakemount.actions.builtin import RUNNERS

    with open(path, "rb") as f:
        a = parse_action(f.read(), path)
    unknown = [h.id for h in a.hooks if h.type not in RUNNERS]
    if unknown:
        raise InvalidArgument(f"{path}: hooks {', '.join(unknown)} have unknown types (known: {', '.join(sorted(RUNNERS))})")
    emit(
        {"name": a.name, "on": {k: list(v) for k, v in a.on.items()}, "hooks": [{"id": h.id, "type": h.type} for h in a.hooks]},
        [f"{path}: ok, action {a.name!r}", *(f"  on {e}: {', '.join(b) or 'all branches'}" for e, b in a.on.items()),
         *(f"  hook {h.id} ({h.type})" for h in a.hooks)],
    )


COMMANDS = [actions]
