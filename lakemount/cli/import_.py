"""``lakemount import``: zero-copy import of a local directory or an S3 prefix into a branch."""

from __future__ import annotations

import getpass

import click

from lakemount.cli.common import ctx_obj, emit, engine_option, json_option, parse_meta, parse_uri
from lakemount.errors import InvalidArgument
from lakemount.jobs.importer import import_locations, import_objects


@click.command("import")
@click.option("--from", "source", default=None, metavar="SOURCE",
              help="A local directory or s3://bucket/prefix; without one, --commit makes one empty commit (as lakeFS).")
@click.option("--to", "dest", required=True, metavar="URI", help="lakefs://REPO/BRANCH[/PREFIX]: replaced by the source.")
@click.option("--commit", "do_commit", is_flag=True, help="Commit the branch after the import.")
@click.option("--message", "-m", default=None, help="Commit message (with --commit).")
@click.option("--meta", multiple=True, help="Commit metadata key=value (with --commit; repeatable).")
@click.option("--master", envvar="LAKEMOUNT_SPARK_MASTER", default=None,
              help="Spark master URL (default local[*]; env LAKEMOUNT_SPARK_MASTER).")
@engine_option
@click.option("--no-progress", is_flag=True, help="Do not show a progress bar.")
@json_option
def import_(source: str | None, dest: str, do_commit: bool, message: str | None, meta: tuple[str, ...], master: str | None, engine: str,
            no_progress: bool) -> None:
    """Import objects without copying them: entries point at the objects where they are.

    The destination prefix ends up holding exactly the source's objects (keys the
    source lacks are staged as deletions), like lakeFS's import.  Without --from,
    --commit makes one empty commit with the message and metadata, as lakeFS's
    import of no paths does.
    """
    u = parse_uri(dest, need_ref=True)
    assert u.ref
    if (message or meta) and not do_commit:
        raise InvalidArgument("-m/--meta describe a commit: add --commit")
    if source is None:
        # lakeFS's import of no paths: one empty commit carrying the message and metadata.
        report = import_locations(ctx_obj().app, [], u.repo, u.ref, commit=do_commit, message=message,
                                  committer=getpass.getuser(), metadata=parse_meta(meta))
        emit(report, [f"Imported nothing: commit {report['commit']['id']}"])
        return
    report = import_objects(
        ctx_obj().app, source, u.repo, u.ref, u.path, commit=do_commit, message=message,
        committer=getpass.getuser(), metadata=parse_meta(meta), master=master, engine=engine,
        show_progress=False if no_progress else None,
    )
    lines = [
        f"Imported {report['objects']} objects ({report['bytes']} bytes) from {report['source']} "
        f"to {report['destination']} in {report['timings']['total']} s ({report['objects_per_second']} objects/s)",
        f"  staged {report['staged']}, unchanged {report['unchanged']}, removed {report['removed']}, skipped {report['skipped']}",
    ]
    c = report["commit"]
    if do_commit:
        lines.append(f"  commit {c['id']}" if c else "  nothing changed: no commit")
    emit(report, lines)


COMMANDS = [import_]
