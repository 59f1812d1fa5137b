"""A mount that stops dead inside a directory rename (tests only), for a kill -9 to land there.

Usage: ``python paused_mount.py MOUNTPOINT WHERE MARKER READY_FD``.  The first directory rename that reaches
:meth:`Catalog.move_directory` writes this process's pid to MARKER and sleeps until killed: ``before`` the
move record is staged (the old parent's marker already is), or ``after`` it is staged and before the mount
answers the kernel.  Everything else is the real mount (``runner.run_mount``).
"""

from __future__ import annotations

import os
import sys
import time

from lakemount.app import App
from lakemount.catalog.catalog import Catalog
from lakemount.errors import LakeMountError
from lakemount.fuse import process, runner


def main() -> None:
    mountpoint, where, marker, ready_fd = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    assert where in ("before", "after"), where
    real = Catalog.move_directory

    def reached() -> None:
        with open(marker + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(marker + ".tmp", marker)
        while True:
            time.sleep(1)

    def paused(self: Catalog, repo: str, ref: object, old: str, new: str) -> bool:
        if where == "before":
            reached()
        moved = real(self, repo, ref, old, new)  # type: ignore[arg-type]
        reached()
        return moved

    Catalog.move_directory = paused  # type: ignore[method-assign]
    app = App.from_config()
    options = runner.mount_options(app, ref=None, head_ttl=0.2, mountpoint=mountpoint)
    try:
        runner.run_mount(app, mountpoint, options, ready=lambda: process.report_ready(ready_fd, "ok"))
    except LakeMountError as exc:
        process.report_error(ready_fd, exc)
        raise


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
