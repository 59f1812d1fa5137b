"""A mount whose block store fails on demand (tests only).

Usage: ``python flaky_mount.py MOUNTPOINT FAULT_FILE READY_FD``.  Every 50 ms
the mount reads FAULT_FILE; each line ``OP N [WHERE]`` makes the next N block-store
calls of OP fail (``Unavailable``; with WHERE, the next N whose URL holds that text), ``heal`` drops all faults; then the file
is emptied (after they apply) (faults already in the file at start apply before the mount is built).  Everything else
is the real mount: ``runner.run_mount`` with signals, flush and unmount.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from lakemount.app import App
from lakemount.block import FlakyAdapter
from lakemount.errors import LakeMountError
from lakemount.fuse import process, runner


def main() -> None:
    mountpoint, fault_file, ready_fd = sys.argv[1], sys.argv[2], int(sys.argv[3])
    app = App.from_config()
    adapter = FlakyAdapter(app.adapter)
    app.__dict__["adapter"] = adapter  # before the catalog and stores are built

    def apply() -> None:
        # Emptied only once its lines apply: a test that waits for the empty file (tests/fuse/test_mount.py's
        # inject) then meets the faults it wrote, never the ones before (emptied first, a loaded machine let the
        # test read through a fault it had just healed). A test writes its next lines once the file is empty.
        try:
            with open(fault_file, "r+") as f:
                lines = f.read().split("\n")
                for line in lines:
                    if line.strip() == "heal":
                        adapter.heal()
                    elif line.strip():
                        op, n, *where = line.split()
                        adapter.fail_next(op, int(n), where=where[0] if where else "")
                f.seek(0)
                f.truncate()
        except FileNotFoundError:
            return

    def watch() -> None:
        while True:
            time.sleep(0.05)
            apply()

    apply()  # faults written before the start hit the mount's first calls (a write-back replay's)
    threading.Thread(target=watch, daemon=True).start()
    options = runner.mount_options(app, ref=None, head_ttl=0.2, mountpoint=mountpoint)
    try:
        runner.run_mount(app, mountpoint, options, ready=lambda: process.report_ready(ready_fd, "ok"))
    except LakeMountError as exc:
        process.report_error(ready_fd, exc)
        raise


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
