"""``lakemount up``: the embedded setup on one machine, with a demo repository.

Creates LAKEMOUNT_HOME (SQLite ref store, local block store), a ``demo``
repository with a small committed dataset, and runs the services this install
provides (the mount and the S3 gateway) in the foreground until interrupted.
"""

from __future__ import annotations

import csv
import io
import os
import random

import click

from lakemount.cli.common import ctx_obj, emit, json_option
from lakemount.errors import NotFound

DEMO = "demo"


def ensure_demo(app: object) -> bool:
    """Create the demo repository with a committed dataset; False if it existed."""
    from lakemount.app import App

    assert isinstance(app, App)
    try:
        app.catalog.repository(DEMO)
        return False
    except NotFound:
        pass
    cat = app.catalog
    cat.create_repository(DEMO)
    rng = random.Random(7)
    for day in ("2026-11-01", "2026-11-02", "2026-11-03"):
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(["event_id", "user", "amount"])
        for i in range(50):
            w.writerow([f"{day}-{i:04d}", f"user{rng.randrange(20)}", f"{rng.random() * 100:.2f}"])
        cat.put(DEMO, "main", f"events/dt={day}/part-0000.csv", buf.getvalue().encode(), content_type="text/csv")
    cat.put(DEMO, "main", "README.md", b"# demo\n\nA lakemount demo repository: daily event files under events/.\n", content_type="text/markdown")
    app.catalog.commit(DEMO, "main", "Demo dataset", committer="lakemount")
    app.catalog.create_tag(DEMO, "v1", "main")
    return True


@click.command("up")
@click.option("--no-services", is_flag=True, help="Only prepare the embedded setup and the demo repository, then exit.")
@json_option
def up(no_services: bool) -> None:
    """Bring up lakemount on embedded defaults with a demo repository."""
    app = ctx_obj().app
    os.makedirs(app.config.home, exist_ok=True)
    created = ensure_demo(app)
    listing = [it.path for it in app.catalog.list(DEMO, "main", "")]
    head = app.catalog.get_branch(DEMO, "main").commit_id
    emit(
        {"home": app.config.home, "repository": DEMO, "created": created, "head": head, "objects": listing},
        [
            f"lakemount home: {app.config.home}",
            f"repository lakefs://{DEMO} ({'created' if created else 'exists'}), main at {head[:12]}",
            *(f"  {p}" for p in listing),
            "",
            f"try: lakemount fs cat lakefs://{DEMO}/main/README.md",
            f"     lakemount log lakefs://{DEMO}/main",
        ],
    )
    if no_services:
        return
    from lakemount.cli.services import run_services

    run_services(app)


COMMANDS = [up]
