"""A mount that stops dead inside a directory rename or a hard link (tests only), for a kill -9 to land there.

Usage: ``python paused_mount.py MOUNTPOINT WHERE MARKER READY_FD``.  The first directory rename that reaches
:meth:`Catalog.move_directory` writes this process's pid to MARKER and sleeps until killed: ``before`` the
move record is staged (the old parent's marker already is), or ``after`` it is staged and before the mount
answers the kernel.  The ``link-`` places stop the first compare-and-set the mount stages
(:meth:`Catalog.apply_if`, which only a link, an unlink or a rename of a linked name makes):
``link-before`` it, ``link-mid`` inside its ref-store transaction, nothing committed (``staging.backend
sql``: once the first of its rows, the group's first name, is written; ``lsm``: once the staging file holding
every name's entry is written and its row inserted), ``link-after``
it committed and before the mount answers.  Everything else is the real mount (``runner.run_mount``).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from lakemount.app import App
from lakemount.catalog.catalog import Catalog
from lakemount.errors import LakeMountError
from lakemount.fuse import process, runner
from lakemount.metastore.fastsql import FastSql
from lakemount.metastore.staging_lists import SqlStagingLists


def main() -> None:
    mountpoint, where, marker, ready_fd = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    assert where in ("before", "after", "link-before", "link-mid", "link-after"), where

    def reached() -> None:
        with open(marker + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(marker + ".tmp", marker)
        while True:
            time.sleep(1)

    if where.startswith("link-"):
        pause_link(where, reached)
    else:
        pause_rename(where, reached)
    app = App.from_config()
    options = runner.mount_options(app, ref=None, head_ttl=0.2, mountpoint=mountpoint)
    try:
        runner.run_mount(app, mountpoint, options, ready=lambda: process.report_ready(ready_fd, "ok"))
    except LakeMountError as exc:
        process.report_error(ready_fd, exc)
        raise


def pause_rename(where: str, reached: Callable[[], None]) -> None:
    """Stop the first directory rename ``before`` or ``after`` its move record is staged."""
    real = Catalog.move_directory

    def paused(self: Catalog, repo: str, ref: object, old: str, new: str) -> bool:
        if where == "before":
            reached()
        moved = real(self, repo, ref, old, new)  # type: ignore[arg-type]
        reached()
        return moved

    Catalog.move_directory = paused  # type: ignore[method-assign]


def pause_link(where: str, reached: Callable[[], None]) -> None:
    """Stop the first compare-and-set staged (a link's) at ``where`` (``link-before``, ``-mid``, ``-after``)."""
    real_apply, real_put, real_run = Catalog.apply_if, SqlStagingLists._put_inline, FastSql.run
    inside = threading.local()

    def apply_if(self: Catalog, *args: Any, **kwargs: Any) -> None:
        if where == "link-before":
            reached()
        inside.armed = True
        try:
            real_apply(self, *args, **kwargs)
        finally:
            inside.armed = False
        reached()

    def put_inline(self: SqlStagingLists, cur: Any, seq: int, inline: bytes | None) -> None:
        real_put(self, cur, seq, inline)
        if where == "link-mid" and getattr(inside, "armed", False):
            reached()  # in the transaction: the file's row inserted, not committed

    class HalfCursor:
        """A cursor whose staging upsert (``staging.backend = sql``) writes its rows one by one and stops
        after the first: the group's first name written, the others and the new name not."""

        def __init__(self, cur: Any) -> None:
            self._cur = cur

        def executemany(self, sql: str, rows: Any) -> Any:
            if "INTO lm_staging " not in sql:
                return self._cur.executemany(sql, rows)
            for i, row in enumerate(rows):
                self._cur.execute(sql, row)
                if i == 0:
                    reached()
            return None

        def __getattr__(self, name: str) -> Any:
            return getattr(self._cur, name)

    def run(self: FastSql, work: Callable[[Any], Any], **kwargs: Any) -> Any:
        if where == "link-mid" and getattr(inside, "armed", False):
            return real_run(self, lambda cur: work(HalfCursor(cur)), **kwargs)
        return real_run(self, work, **kwargs)

    Catalog.apply_if = apply_if  # type: ignore[method-assign]
    SqlStagingLists._put_inline = put_inline  # type: ignore[method-assign]
    FastSql.run = run  # type: ignore[method-assign]


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
