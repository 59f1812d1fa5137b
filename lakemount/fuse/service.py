"""The mount as a service of ``lakemount up``: mounted at ``mount.path`` in a child process.

``start_for_up`` returns once the mount serves, ``wait_for_up`` blocks until
the mount process ends (or the user interrupts ``up``), ``stop_for_up``
unmounts it (SIGTERM: the process saves open files and unmounts itself).
The child gets the same configuration as ``up``: the effective settings are
written to ``LAKEMOUNT_HOME/run/up-config.yaml`` (mode 0600) and the
environment is inherited, so environment variables keep their precedence.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess

import click
import yaml

from lakemount.app import App
from lakemount.fuse import process

_running: dict[int, process.Started] = {}
STOP_WAIT = 60.0


def _config_file(app: App) -> str:
    path = os.path.join(app.config.home, "run", "up-config.yaml")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(app.config.data, f, sort_keys=True)
    return path


def start_for_up(app: App) -> None:
    """Mount every repository at ``mount.path``; returns once the mount serves."""
    mountpoint = os.path.abspath(os.path.expanduser(str(app.config.get("mount.path"))))
    env = dict(os.environ, LAKEMOUNT_HOME=app.config.home)
    started = process.spawn(_config_file(app), mountpoint, (), detach=False, env=env)
    _running[id(app)] = started
    click.echo(f"mount: {mountpoint}/<repo>/<ref>/  (e.g. ls {mountpoint}/demo/main)")


def wait_for_up(app: App) -> None:
    started = _running.get(id(app))
    if started is not None:
        started.process.wait()


def stop_for_up(app: App) -> None:
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
