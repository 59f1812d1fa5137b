"""``lakemount export``: copy a commit's objects to a local directory or an S3 prefix, with a manifest."""

from __future__ import annotations

import click

from lakemount.cli.common import ctx_obj, emit, engine_option, json_option, parse_uri
from lakemount.jobs.export import export_objects


@click.command("export")
@click.argument("uri")
@click.option("--to", "target", required=True, metavar="TARGET", help="A local directory or s3://bucket/prefix.")
@click.option("--overwrite", is_flag=True, help="Write into a non-empty target (colliding files are replaced).")
@click.option("--master", envvar="LAKEMOUNT_SPARK_MASTER", default=None,
              help="Spark master URL (default local[*]; env LAKEMOUNT_SPARK_MASTER).")
@engine_option
@click.option("--no-progress", is_flag=True, help="Do not show a progress bar.")
@json_option
def export(uri: str, target: str, overwrite: bool, master: str | None, engine: str, no_progress: bool) -> None:
    """Export the objects under URI (lakefs://REPO/REF[/PREFIX]) byte for byte.

    A branch exports its head commit.  TARGET receives the objects and
    _lakemount_export/ (manifest parts with path, size, sha256 and ETag, and
    manifest.json, written last).
    """
    u = parse_uri(uri, need_ref=True)
    assert u.ref
    report = export_objects(
        ctx_obj().app, u.repo, u.ref, u.path, target, overwrite=overwrite, master=master, engine=engine,
        show_progress=False if no_progress else None,
    )
    emit(
        report,
        f"Exported {report['files']} files, {report['directories']} directories, {report['symlinks']} symlinks "
        f"({report['bytes']} bytes) of commit {report['commit'][:12]} to {report['target']} "
        f"in {report['timings']['total']} s ({report['engine']})",
    )


COMMANDS = [export]
