"""``lakemount up``: the embedded setup on one machine, with a demo repository.

Creates LAKEMOUNT_HOME (SQLite ref store, local block store), a ``demo``
repository with a small committed dataset (two commits on ``main``, a tag
``v1``, a branch ``dev`` to merge: what README.md's examples use), and runs the services this install
provides (the mount and the S3 gateway) in the foreground until interrupted.
"""

from __future__ import annotations

import csv
import io
import os
import random
import time

import click

from lakemount.cli.common import ctx_obj, emit, json_option
from lakemount.errors import NotFound

DEMO = "demo"


def _events(rng: random.Random, day: str, rows: int = 50, part: int = 0) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["event_id", "user", "amount"])
    for i in range(rows):
        w.writerow([f"{day}-{part}{i:03d}", f"user{rng.randrange(20)}", f"{rng.random() * 100:.2f}"])
    return buf.getvalue().encode()


def ensure_demo(app: object) -> bool:
    """Create the demo repository; False if it existed.

    It carries what README.md's examples use: on ``main`` two commits (so
    ``main~1`` has the dataset too), daily event files under ``events/`` and the
    empty directory ``events/dt=2026-11-04/`` the mount example copies into; a
    tag ``v1``; and a branch ``dev`` one commit ahead, to merge.
    """
    from lakemount.app import App
    from lakemount.catalog.model import DIR_MODE, Entry

    assert isinstance(app, App)
    try:
        app.catalog.repository(DEMO)
        return False
    except NotFound:
        pass
    cat = app.catalog
    cat.create_repository(DEMO)
    rng = random.Random(7)
    for day in ("2026-11-01", "2026-11-02"):
        cat.put(DEMO, "main", f"events/dt={day}/part-0000.csv", _events(rng, day), content_type="text/csv")
    cat.put(DEMO, "main", "README.md", b"# demo\n\nA lakemount demo repository: daily event files under events/.\n", content_type="text/markdown")
    cat.commit(DEMO, "main", "Demo dataset", committer="lakemount")
    cat.put(DEMO, "main", "events/dt=2026-11-03/part-0000.csv", _events(rng, "2026-11-03"), content_type="text/csv")
    now = time.time_ns()
    cat.put_entry(DEMO, "main", "events/dt=2026-11-04/", Entry("", 0, "", now, "", (), DIR_MODE))
    cat.commit(DEMO, "main", "Add 2026-11-03", committer="lakemount")
    cat.create_tag(DEMO, "v1", "main")
    cat.create_branch(DEMO, "dev", "main")
    cat.put(DEMO, "dev", "events/dt=2026-11-03/part-0001.csv", _events(rng, "2026-11-03", 10, 1), content_type="text/csv")
    cat.commit(DEMO, "dev", "Late events of 2026-11-03", committer="lakemount")
    return True


@click.command("up")
@click.option("--no-services", is_flag=True, help="Only prepare the embedded setup and the demo repository, then exit.")
@json_option
def up(no_services: bool) -> None:
    """Bring up lakemount on embedded defaults with a demo repository.

    Then, in the foreground until Ctrl-C: the mount at mount.path (default
    LAKEMOUNT_HOME/mnt), the S3 gateway on gateways.s3.listen_address
    (127.0.0.1:8000) and the REST API and web UI on api.listen_address
    (127.0.0.1:8001).  The first run creates the user admin and prints its key
    once.  Ctrl-C, SIGINT or SIGTERM (also when started in the background) or a
    service that fails to start stops them all and unmounts.  Run again on the
    same home, it keeps the existing repository.
    """
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
