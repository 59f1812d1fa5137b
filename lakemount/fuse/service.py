"""The mount as a service of ``lakemount up``: mounted at ``mount.path`` in a child process.

``start_for_up`` returns once the mount serves, ``wait_for_up`` blocks until
the mount process ends (or the user interrupts ``up``), ``stop_for_up``
unmounts it (SIGTERM: the process saves open files and unmounts itself).
The child gets the same configuration as ``up`` without it touching the disk
(it holds secrets: database password, S3 keys, the auth key): the effective
settings go as YAML into a pipe the child inherits and reads as ``--config
/dev/fd/N``, and the environment is inherited, so environment variables keep
their precedence.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess

import click

from lakemount import config
from lakemount.app import App
from lakemount.fuse import process

_running: dict[int, process.Started] = {}
STOP_WAIT = 60.0
# Where versions before issue 10 wrote the effective configuration, secrets included.
_OLD_CONFIG_FILE = os.path.join("run", "up-config.yaml")


def config_pipe(app: App) -> int:
    """The read end of a pipe holding ``app``'s effective configuration (see ``lakemount.config.config_pipe``)."""
    return config.config_pipe(app.config)


def start_for_up(app: App) -> None:
    """Mount every repository at ``mount.path``; returns once the mount serves.

    Raises ``Unavailable`` (or the child's own error category) if the mount fails.
    """
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(app.config.home, _OLD_CONFIG_FILE))
    mountpoint = os.path.abspath(os.path.expanduser(app.config.mount.path))
    _check_free(app.config.home, mountpoint)
    env = dict(os.environ, LAKEMOUNT_HOME=app.config.home)
    r = config_pipe(app)
    try:
        started = process.spawn(f"/dev/fd/{r}", mountpoint, (), detach=False, env=env, pass_fds=(r,))
    finally:
        os.close(r)
    _running[id(app)] = started
    click.echo(f"mount: {mountpoint}/<repo>/<ref>/  (e.g. ls {mountpoint}/demo/main)")


def _check_free(home: str, mountpoint: str) -> None:
    """``AlreadyExists`` if a live mount holds ``mountpoint``, most likely another ``up`` on the same home.

    The mount process would say "run 'lakemount umount'", which for a running
    ``up`` is the wrong advice: that ``up`` is what to stop.
    """
    from lakemount.errors import AlreadyExists
    from lakemount.fuse import runner

    if runner.find_mount(mountpoint) is None or runner.is_stale(mountpoint):
        return
    pid = runner.read_pid(runner.pid_file(home, mountpoint))
    raise AlreadyExists(
        f"{mountpoint} (mount.path) is already mounted{f' (pid {pid})' if pid else ''}: is 'lakemount up' already "
        f"running on {home}? Stop it (Ctrl-C) first, or set another mount.path; a mount made by "
        f"'lakemount mount' is removed with 'lakemount umount {mountpoint}'"
    )


def wait_for_up(app: App) -> None:
    """Block until the mount started by ``start_for_up(app)`` exits (returns at once if none was started)."""
    started = _running.get(id(app))
    if started is not None:
        started.process.wait()


def stop_for_up(app: App) -> None:
    """Stop the mount started for ``app``: SIGTERM, then SIGKILL after ``STOP_WAIT`` seconds; no-op if none."""
    started = _running.pop(id(app), None)
    if started is None:
        return
    proc = started.process
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_WAIT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
