"""Starting a mount in its own process and waiting until it serves.

One FUSE session per process: ``lakemount mount`` (background mode) and
``lakemount up`` both run ``lakemount mount --foreground`` as a child and wait
on a pipe for it to say ``ok`` (mounted and serving) or ``error: ...``.  The
child of a background mount starts a new session so it outlives the shell.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Final

from lakemount.errors import CATEGORIES, LakeMountError, Unavailable, category_of

if TYPE_CHECKING:
    from lakemount.fuse.runner import MountEntry

READY_TIMEOUT: Final = 60.0
ABANDON_GRACE: Final = 10.0  # seconds a mount that failed to report gets to stop on SIGTERM


@dataclass
class Started:
    """A mount process that reported it serves."""

    process: subprocess.Popen[bytes]
    mountpoint: str


def mount_command(config_path: str | None, mountpoint: str, options: Sequence[str], ready_fd: int) -> list[str]:
    """The argv that runs ``lakemount mount`` in the foreground, reporting readiness on ``ready_fd``."""
    cmd = [sys.executable, "-m", "lakemount.cli.main"]
    if config_path:
        cmd += ["--config", config_path]
    return [*cmd, "mount", mountpoint, "--foreground", "--ready-fd", str(ready_fd), *options]


def spawn(
    config_path: str | None,
    mountpoint: str,
    options: Sequence[str] = (),
    *,
    detach: bool,
    log: IO[bytes] | None = None,
    env: dict[str, str] | None = None,
    timeout: float = READY_TIMEOUT,
    pass_fds: Sequence[int] = (),
) -> Started:
    """Run a foreground mount in a child process; return once it serves.

    ``pass_fds`` are inherited by the child besides its ready pipe (e.g. a pipe
    it reads its configuration from).  Raises ``Unavailable`` with the child's
    own message if it fails to mount (or does not report within ``timeout``;
    the child is then killed).
    """
    return start(
        lambda fd: mount_command(config_path, mountpoint, options, fd),
        mountpoint, detach=detach, log=log, env=env, timeout=timeout, pass_fds=pass_fds,
    )


def start(
    command: Callable[[int], list[str]],
    mountpoint: str,
    *,
    detach: bool,
    log: IO[bytes] | None = None,
    env: dict[str, str] | None = None,
    timeout: float = READY_TIMEOUT,
    pass_fds: Sequence[int] = (),
) -> Started:
    """Run ``command(ready_fd)`` — any program that reports on ``ready_fd`` like ``report_ready`` — and wait for it.

    If it fails or does not report in time it is stopped, and a mount it made
    meanwhile at ``mountpoint`` (slow to report, not failed) is detached: a
    failed start never leaves a mount behind.
    """
    from lakemount.fuse.runner import find_mount

    before = find_mount(mountpoint)
    r, w = os.pipe()
    try:
        proc = subprocess.Popen(
            command(w),
            stdin=subprocess.DEVNULL,
            stdout=log if log is not None else None,
            stderr=subprocess.STDOUT if log is not None else None,
            pass_fds=(w, *pass_fds),
            start_new_session=detach,
            env=env,
        )
    finally:
        os.close(w)
    try:
        message = _read_ready(r, proc, timeout)
    except BaseException:
        # Interrupted while waiting (``up`` got SIGINT or SIGTERM): the child is no one's to stop otherwise.
        _abandon(proc, mountpoint, before)
        raise
    finally:
        os.close(r)
    if message == "ok":
        return Started(proc, mountpoint)
    _abandon(proc, mountpoint, before)
    raise _error_from(message) if message else Unavailable(f"the mount process exited with status {proc.returncode}")


def _abandon(proc: subprocess.Popen[bytes], mountpoint: str, before: MountEntry | None) -> None:
    """Stop a mount process that did not report ``ok`` (SIGTERM: it unmounts what it mounted; then SIGKILL)
    and detach any mount at ``mountpoint`` that was not there before it started."""
    from lakemount.fuse.runner import find_mount, lazy_unmount

    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(ABANDON_GRACE)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    now = find_mount(mountpoint)
    if now is not None and now != before:
        with contextlib.suppress(LakeMountError):
            lazy_unmount(mountpoint)


def _error_from(message: str) -> LakeMountError:
    """Rebuild the child's error: ``error: <Category>: text`` keeps its category (and exit status)."""
    text = message.removeprefix("error: ")
    name, sep, rest = text.partition(": ")
    for category in CATEGORIES:
        if sep and category.__name__ == name:
            return category(rest)
    return Unavailable(text)


def _read_ready(fd: int, proc: subprocess.Popen[bytes], timeout: float) -> str:
    deadline = time.monotonic() + timeout
    data = b""
    waiter = select.poll()  # not select(): it refuses descriptors >= 1024
    waiter.register(fd, select.POLLIN | select.POLLHUP)
    while time.monotonic() < deadline:
        if waiter.poll(200):
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
            if b"\n" in data:
                break
        elif proc.poll() is not None:
            with contextlib.suppress(OSError):
                data += os.read(fd, 4096)
            break
    else:
        return f"error: the mount process did not report within {timeout:.0f}s"
    return data.decode("utf-8", "replace").strip()


def report_error(fd: int | None, exc: LakeMountError) -> None:
    """Tell the parent (if any) why the mount failed, with the error's category."""
    report_ready(fd, f"error: {category_of(exc).__name__}: {exc}")


def report_ready(fd: int | None, message: str) -> None:
    """Tell the parent (if any) ``ok`` or ``error: ...``; closes the pipe."""
    if fd is None:
        return
    with contextlib.suppress(OSError):
        os.write(fd, (message.replace("\n", " ") + "\n").encode())
    with contextlib.suppress(OSError):
        os.close(fd)
