"""``lakemount doctor``: check that configuration, stores and tools work."""

from __future__ import annotations

import os
import shutil
import time

import click

from lakemount.cli.common import ctx_obj, emit, json_option
from lakemount.errors import LakeMountError


@click.command("doctor")
@json_option
def doctor() -> None:
    """Check the configuration, the ref store, the block store and FUSE; exit non-zero on a failure."""
    app = ctx_obj().app
    checks: list[dict[str, object]] = []

    def check(name: str, fn: object) -> None:
        t = time.perf_counter()
        try:
            detail = fn()  # type: ignore[operator]
            checks.append({"check": name, "ok": True, "detail": detail, "ms": round((time.perf_counter() - t) * 1000, 1)})
        except (LakeMountError, OSError) as exc:
            checks.append({"check": name, "ok": False, "detail": str(exc)})

    check("config", lambda: f"home {app.config.home}")
    check("ref store", app.check_metastore)
    check("block store", app.check_block_store)

    def repos() -> str:
        bad = []
        for r in app.catalog.list_repositories():
            try:
                head = app.catalog.get_branch(r.name, r.default_branch)
                app.catalog.ranges(r.name, head.commit_id)
            except LakeMountError as exc:
                bad.append(f"{r.name}: {exc}")
        if bad:
            raise OSError("; ".join(bad))
        return "every default branch head readable"

    check("repositories", repos)

    def fuse() -> str:
        if not os.path.exists("/dev/fuse"):
            raise OSError("/dev/fuse missing: the mount cannot work here")
        if shutil.which("fusermount3") is None:
            raise OSError("fusermount3 not installed (apt-get install fuse3)")
        return "/dev/fuse and fusermount3 present"

    check("fuse", fuse)
    ok = all(c["ok"] for c in checks)
    emit({"ok": ok, "checks": checks}, [f"{'ok ' if c['ok'] else 'FAIL'} {c['check']:<14} {c['detail']}" for c in checks])
    if not ok:
        raise SystemExit(1)


COMMANDS = [doctor]
