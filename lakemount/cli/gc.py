"""``lakemount gc``: retention rules, and the Spark job that deletes what they expire.

``set-config``/``get-config``/``delete-config`` mirror lakectl; ``run`` marks
and sweeps (``--mark-only`` and ``--sweep MARK_ID`` split the two, ``--dry-run``
moves and deletes nothing).  A sweep moves garbage to the namespace's trash,
restores trashed objects referenced again and purges those a previous run
trashed.  See ``lakemount.jobs.gc`` for what is kept.
"""

from __future__ import annotations

from typing import Any

import click

from lakemount.cli.common import ctx_obj, emit, engine_option, json_option, parse_repo_uri
from lakemount.errors import InvalidArgument, NotFound
from lakemount.jobs.gc import DEFAULT_MIN_AGE, run_gc
from lakemount.jobs.retention import GcRules


@click.group("gc")
def gc() -> None:
    """Garbage collection: retention rules and the job that trashes, then deletes, expired data."""


def _branch_rules(pairs: tuple[str, ...]) -> tuple[tuple[str, int], ...]:
    out: dict[str, int] = {}
    for p in pairs:
        name, sep, days = p.partition("=")
        if not sep or not name:
            raise InvalidArgument(f"--branch takes NAME=DAYS, got {p!r}")
        try:
            out[name] = int(days)
        except ValueError:
            raise InvalidArgument(f"--branch {name}: days must be a whole number, got {days!r}") from None
    return tuple(sorted(out.items()))


def _rules_text(rules: GcRules) -> list[str]:
    lines = [f"default retention: {rules.default_retention_days} days"]
    lines += [f"branch {b}: {d} days" for b, d in rules.branches]
    return lines


@gc.command("set-config")
@click.argument("uri")
@click.option("--default-retention-days", type=int, required=True, help="Days to keep what commits no longer hold.")
@click.option("--branch", "branches", multiple=True, metavar="NAME=DAYS", help="Retention of one branch (repeatable).")
@click.option("--force", is_flag=True, help="Accept rules that keep no history (0 days everywhere).")
@json_option
def set_config(uri: str, default_retention_days: int, branches: tuple[str, ...], force: bool) -> None:
    """Set the GC rules of repository URI (lakefs://REPO)."""
    u = parse_repo_uri(uri)
    app = ctx_obj().app
    app.catalog.repository(u.repo)  # an unknown repository is the first error, before the rules'
    rules = GcRules(default_retention_days, _branch_rules(branches))
    if not rules.keeps_history and not force:
        raise InvalidArgument(
            "these rules keep no history: GC would delete everything but branch heads, tags and staging; use --force"
        )
    known = {b.name for b in app.catalog.list_branches(u.repo)}
    for name, _days in rules.branches:
        if name not in known:
            click.echo(f"warning: {u.repo} has no branch {name} (yet); the rule applies once it exists", err=True)
    app.catalog.set_gc_rules(u.repo, rules)
    emit(rules.to_json(), [f"GC rules of {u.repo} set:", *_rules_text(rules)])


@gc.command("get-config")
@click.argument("uri")
@json_option
def get_config(uri: str) -> None:
    """Show the GC rules of repository URI."""
    u = parse_repo_uri(uri)
    app = ctx_obj().app
    rules = app.catalog.gc_rules(u.repo)
    if rules is None:
        raise NotFound(f"no GC rules for repository {u.repo}")
    emit(rules.to_json(), _rules_text(rules))


@gc.command("delete-config")
@click.argument("uri")
@json_option
def delete_config(uri: str) -> None:
    """Remove the GC rules of repository URI (GC then refuses to run)."""
    u = parse_repo_uri(uri)
    app = ctx_obj().app
    app.catalog.delete_gc_rules(u.repo)
    emit({"deleted": u.repo}, f"GC rules of {u.repo} deleted")


def _report_text(r: dict[str, Any]) -> list[str]:
    lines = [f"GC of {r['repository']} ({r['mode']}{', dry run' if r['dry_run'] else ''}), mark {r['mark_id']}"]
    if "commits" in r:
        c, s, k = r["commits"], r["scanned"], r["kept"]
        k = {"referenced": 0, "recent": 0, "unrecognized": 0, **k}
        lines += [
            f"  mark start {r['mark_start']}, objects older than {r['cutoff']} may go",
            f"  commits: {c['total']} ({c['retained']} retained, {c['expired']} expired); "
            f"branches {r['branches']}, tags {r['tags']}, staging tokens {r['staging_tokens']}",
            f"  scanned {s['entries']} committed and {s['staged_entries']} staged entries in {s['ranges']} ranges; "
            f"{s['data_objects']} data objects and {s['tables']} tables ({s['bytes']} bytes) in the namespace",
            f"  kept: {k['referenced']} referenced, {k['recent']} recent, {k['unrecognized']} not GC's to delete",
        ]
        g = r["garbage"]
        lines.append(f"  garbage at mark: {g['data_objects']} data objects, {g['tables']} tables, {g['bytes']} bytes")
        if r["mode"] == "mark-only":
            lines += [f"  {p}" for p in g["sample"]]
    if "trash" in r:
        t = r["trash"]
        lines.append(
            f"  trash at mark: {t['data_objects']} data objects, {t['tables']} tables, {t['bytes']} bytes "
            f"({t['referenced']} referenced again, {t['expired']} unreferenced since before the cutoff)"
        )
    if "trashed" in r:
        k2 = r["kept"]
        lines.append(
            f"  re-mark: kept {k2.get('referenced_again', 0)} referenced again, "
            f"{k2.get('touched', 0)} touched since the mark; {r['already_gone']} already gone; "
            f"{k2.get('in_trash', 0)} trashed too recently to purge"
        )
        for section, done, dry in (("trashed", "Trashed", "Would trash"), ("restored", "Restored", "Would restore"),
                                   ("purged", "Purged", "Would purge")):
            d = r[section]
            lines.append(f"{dry if r['dry_run'] else done}: {d['data_objects']} data objects, {d['tables']} tables, {d['bytes']} bytes")
            lines += [f"  {p}" for p in d["sample"]]
    else:
        lines.append(f"Mark {r['mark_id']} written; sweep it with: lakemount gc run lakefs://{r['repository']} --sweep {r['mark_id']}")
    lines += [f"warning: {w}" for w in r.get("warnings", [])]
    return lines


@gc.command("run")
@click.argument("uri")
@click.option("--dry-run", is_flag=True, help="Move and delete nothing; report what would be trashed, restored, purged.")
@click.option("--mark-only", is_flag=True, help="Only mark; prints the MARK_ID to sweep later.")
@click.option("--sweep", "sweep_id", metavar="MARK_ID", default=None, help="Only sweep this stored mark.")
@click.option("--min-age", type=float, default=DEFAULT_MIN_AGE, show_default=True,
              help="Never trash objects modified, nor purge objects trashed, less than this many seconds before the mark.")
@click.option("--master", envvar="LAKEMOUNT_SPARK_MASTER", default=None,
              help="Spark master URL (default local[*]; env LAKEMOUNT_SPARK_MASTER).")
@engine_option
@click.option("--force", is_flag=True, help="Run even if the rules keep no history.")
@json_option
def run(uri: str, dry_run: bool, mark_only: bool, sweep_id: str | None, min_age: float, master: str | None, engine: str,
        force: bool) -> None:
    """Garbage-collect repository URI (lakefs://REPO) on Spark."""
    u = parse_repo_uri(uri)
    app = ctx_obj().app
    report = run_gc(
        app, u.repo, dry_run=dry_run, mark_only=mark_only, sweep=sweep_id, min_age=min_age, master=master, force=force,
        engine=engine,
    )
    emit(report, _report_text(report))


COMMANDS = [gc]
