"""``lakemount mount`` and ``lakemount umount``: the repositories as a POSIX file system.

``mount MOUNTPOINT`` shows every repository (``MOUNTPOINT/<repo>/<ref>/...``);
``--ref repo/branch`` mounts one ref as the root.  By default the mount runs
in the background and the command returns once it serves; ``--foreground``
keeps it attached (for systemd and other supervisors).  A stale mount left by
a killed process is cleaned up first.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from dataclasses import replace

import click

from lakemount.cli.common import ctx_obj, emit, json_option
from lakemount.errors import InvalidArgument, LakeMountError

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b?)\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``10G``, ``512MiB``, ``1048576`` -> bytes (powers of 1024); raises ``InvalidArgument``."""
    m = _SIZE.match(text)
    if not m:
        raise InvalidArgument(f"not a size: {text!r} (use e.g. 512M, 10G)")
    factor = 1024 ** " kmgtp".index((m.group(2) or " ").lower())
    return int(float(m.group(1)) * factor)


def parse_ref(text: str) -> tuple[str, str]:
    """``REPO/REF`` (optionally ``lakefs://``-prefixed) as (repo, ref); InvalidArgument for any other shape."""
    body = text.removeprefix("lakefs://").strip("/")
    repo, _, ref = body.partition("/")
    if not repo or not ref or "/" in ref:
        raise InvalidArgument(f"--ref must look like REPO/REF (e.g. demo/main), got {text!r}")
    return repo, ref


def _log_path(home: str, mountpoint: str) -> str:
    from lakemount.node import pid_file

    return os.path.join(home, "log", os.path.basename(pid_file(home, mountpoint))[: -len(".pid")] + ".log")


def _setup_logging(level: str, debug: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if debug else getattr(logging, str(level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


@click.command("mount")
@click.argument("mountpoint", type=click.Path(file_okay=False))
@click.option("--ref", "ref", default=None, metavar="REPO/REF", help="Mount one ref (e.g. demo/main) as the root.")
@click.option("--foreground", "-f", is_flag=True, help="Stay attached until unmounted (for systemd).")
@click.option("--cache-dir", default=None, help="Disk cache directory (default: config cache.dir).")
@click.option("--cache-size", default=None, help="Disk cache bound, e.g. 10G; 0 disables it (default: config cache.disk_bytes).")
@click.option("--head-ttl", type=float, default=None, help="Seconds between checks of a branch, and of its repository's protection rules, for changes made elsewhere (default: config mount.head_ttl, 1).")
@click.option("--read-ahead-kb", type=click.IntRange(0, 1 << 20), default=None, help="Kernel read-ahead window in KiB for sequential reads (as root; 0: the kernel's 128; default: config mount.read_ahead_kb, 1024).")
@click.option("--notify/--no-notify", default=True, help="Follow branch changes other nodes make as the ref store pushes them (PostgreSQL LISTEN/NOTIFY); --head-ttl polling stays the fallback.")
@click.option("--writeback/--no-writeback", default=None, help="Return from close once the file is in this node's journal; upload and stage in the background (default: config mount.writeback, off; docs/SEMANTICS.md).")
@click.option("--allow-other/--no-allow-other", default=None, help="Let other users access the mount (default: on when run as root).")
@click.option("--threads", type=click.IntRange(1, 256), default=16, show_default=True, help="Worker threads for blocking work.")
@click.option("--debug", is_flag=True, help="Log every failure in detail.")
@click.option("--ready-fd", type=int, default=None, hidden=True)
@json_option
def mount(
    mountpoint: str,
    ref: str | None,
    foreground: bool,
    cache_dir: str | None,
    cache_size: str | None,
    head_ttl: float | None,
    read_ahead_kb: int | None,
    notify: bool,
    writeback: bool | None,
    allow_other: bool | None,
    threads: int,
    debug: bool,
    ready_fd: int | None,
) -> None:
    """Mount the repositories at MOUNTPOINT: MOUNTPOINT/<repo>/<ref>/... (branches read-write).

    Commit, merge, revert and reset by writing to MOUNTPOINT/<repo>/<branch>/.lakefs/*.

    The mount runs in the background (its log under LAKEMOUNT_HOME/log) and the
    command returns once it serves; --foreground stays attached.  MOUNTPOINT is
    created if missing; files already in it are hidden while mounted (a warning
    says so).
    """
    from lakemount.fuse import process, runner

    ctx = ctx_obj()
    mp = os.path.abspath(mountpoint)
    one_ref = parse_ref(ref) if ref else None
    if cache_size is not None:
        parse_size(cache_size)
    if ready_fd is None:  # said once, by the command the user ran (not again by the process it spawns)
        _warn_if_not_empty(mp)
    if not foreground:
        app = ctx.app
        home = app.config.home
        log_path = _log_path(home, mp)
        os.makedirs(os.path.dirname(log_path), exist_ok=True)
        passthrough = [
            *(["--ref", ref] if ref else []),
            *(["--cache-dir", cache_dir] if cache_dir else []),
            *(["--cache-size", cache_size] if cache_size else []),
            *(["--head-ttl", str(head_ttl)] if head_ttl is not None else []),
            *(["--read-ahead-kb", str(read_ahead_kb)] if read_ahead_kb is not None else []),
            *([] if notify else ["--no-notify"]),
            *([] if writeback is None else ["--writeback" if writeback else "--no-writeback"]),
            *([] if allow_other is None else ["--allow-other" if allow_other else "--no-allow-other"]),
            "--threads", str(threads),
            *(["--debug"] if debug else []),
        ]
        with open(log_path, "ab") as log:
            started = process.spawn(ctx.config_path, mp, passthrough, detach=True, log=log)
        emit(
            {"mountpoint": mp, "pid": started.process.pid, "log": log_path, "ref": ref},
            f"mounted at {mp} (pid {started.process.pid}; log {log_path}); unmount with: lakemount umount {mp}",
        )
        return
    try:
        app = ctx.app
        _setup_logging(app.config.logging.level, debug)
        if cache_dir:
            app.config = replace(app.config, cache=replace(app.config.cache, dir=os.path.abspath(cache_dir)))
        if cache_size is not None:
            app.config = replace(app.config, cache=replace(app.config.cache, disk_bytes=parse_size(cache_size)))
        options = runner.mount_options(app, ref=one_ref, head_ttl=head_ttl, read_ahead_kb=read_ahead_kb, notify=notify,
                                       writeback=writeback, mountpoint=mp)
        runner.run_mount(
            app,
            mp,
            options,
            allow_other=(os.getuid() == 0) if allow_other is None else allow_other,
            threads=threads,
            ready=lambda: process.report_ready(ready_fd, "ok"),
        )
    except LakeMountError as exc:
        process.report_error(ready_fd, exc)
        raise


def _warn_if_not_empty(mp: str) -> None:
    """Warn that the files in ``mp`` will be hidden by the mount (FUSE mounts over them without a word)."""
    from lakemount.fuse import runner

    if runner.find_mount(mp) is not None:
        return  # a mount already there: the mount itself reports it
    try:
        names = os.listdir(mp)
    except OSError:
        return  # missing (it is created) or unreadable (the mount reports it)
    if names:
        click.echo(f"warning: {mp} is not empty: its {len(names)} entries are hidden while the mount is there", err=True)


@click.command("umount")
@click.argument("mountpoint")  # a plain string: click.Path would stat it, and a stat of a stuck mount never returns
@click.option("--lazy", "-l", is_flag=True, help="Detach at once even if files are open there (they keep working until closed).")
@click.option("--abort-after", type=click.FloatRange(min=0.1), default=10.0, show_default=True, metavar="SECONDS",
              help="A mount that answers nothing this long (its process stopped, or killed but held in the kernel) has "
                   "its FUSE connection aborted: syscalls waiting there fail (ECONNABORTED), and it is detached.")
@json_option
def umount(mountpoint: str, lazy: bool, abort_after: float) -> None:
    """Unmount MOUNTPOINT; waits until the mount process has saved everything and exited."""
    from lakemount.fuse import runner

    mp = os.path.abspath(mountpoint)
    done = runner.unmount(
        ctx_obj().app.config.home, mp, lazy=lazy, wait=runner.LAZY_UNMOUNT_WAIT if lazy else runner.UNMOUNT_WAIT,
        answer_wait=abort_after,
    )
    pid, finished = done.pid, done.finished
    text = f"unmounted {mp}"
    if done.aborted:
        text = (f"aborted the FUSE connection of {mp} (the mount answered nothing for {abort_after:g} s; the syscalls "
                f"waiting there failed with ECONNABORTED) and detached it")
        if not finished:
            text += f"; its process (pid {pid}) still runs: end it with kill -9 {pid}"
    elif not finished:
        text = f"detached {mp}; the mount process (pid {pid}) saves the files still open there and exits once they are closed"
    emit({"mountpoint": mp, "pid": pid, "lazy": lazy, "finished": finished, "aborted": done.aborted}, text)


COMMANDS = [mount, umount]
