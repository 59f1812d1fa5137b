"""Helpers for tests that mount through the kernel: start a mount process, stop it, and never leak a mount.

A mount runs ``lakemount mount --foreground`` (or another program speaking the
same ready protocol) in a child process with the test's ``LAKEMOUNT_HOME``;
its log goes to a file next to the mountpoint and is printed if the test
fails.  ``stop`` asks politely (SIGTERM), then kills, then lazily unmounts
whatever is left, so a failing test cannot leave a mount behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import pytest

from lakemount.fuse import process, runner

HAVE_FUSE = os.path.exists("/dev/fuse") and (shutil.which("fusermount3") or shutil.which("fusermount")) is not None
needs_fuse = [
    pytest.mark.fuse,
    pytest.mark.skipif(not HAVE_FUSE, reason="needs /dev/fuse and fusermount3"),
]


def lakemount_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "lakemount.cli.main", *args]


@dataclass
class Mount:
    mountpoint: str
    home: str
    proc: subprocess.Popen[bytes]
    log_path: str

    def log(self) -> str:
        with contextlib.suppress(OSError), open(self.log_path, errors="replace") as f:
            return f.read()
        return ""


def env_for(home: str, **extra: str) -> dict[str, str]:
    env = dict(os.environ, LAKEMOUNT_HOME=home, **extra)
    env.pop("LAKEMOUNT_CONFIG", None)
    return env


def start(
    home: str,
    mountpoint: str,
    args: Sequence[str] = (),
    *,
    command: Callable[[int], list[str]] | None = None,
    env: dict[str, str] | None = None,
) -> Mount:
    os.makedirs(mountpoint, exist_ok=True)
    log_path = mountpoint.rstrip("/") + ".log"
    with open(log_path, "ab") as log:
        build = command or (lambda fd: process.mount_command(None, mountpoint, ["--head-ttl", "0.2", *args], fd))
        try:
            started = process.start(build, mountpoint, detach=False, log=log, env=env or env_for(home), timeout=180)
        except Exception:
            with open(log_path, errors="replace") as f:
                print(f.read())
            raise
    return Mount(mountpoint, home, started.process, log_path)


@contextlib.contextmanager
def mount_set(home: str, base: str) -> Iterator[Callable[..., Mount]]:
    """A test's mounts under ``base``: ``make(name, args, command)`` starts one; on exit (pass or fail) each is
    stopped and its log printed, and nothing may stay mounted under ``base``."""
    made: list[Mount] = []

    def make(name: str = "mnt", args: tuple[str, ...] = (), command: Callable[[int], list[str]] | None = None) -> Mount:
        m = start(home, os.path.join(base, name), args, command=command)
        made.append(m)
        return m

    try:
        yield make
    finally:
        problems = []
        for m in made:
            try:
                stop(m)
            except Exception as exc:
                problems.append(f"{m.mountpoint}: {exc}")
            print(f"--- log of {m.mountpoint} ---\n{m.log()}")
        leftover = sorted(p for p in mounted_points() if p.startswith(base))
        assert not leftover and not problems, (leftover, problems)


def stop(m: Mount, *, timeout: float = 30.0) -> None:
    """End the mount process and make sure nothing stays mounted."""
    try:
        if m.proc.poll() is None:
            m.proc.send_signal(signal.SIGTERM)
            try:
                m.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                m.proc.kill()
        if m.proc.poll() is None:
            reap(m)
    finally:
        cleanup_mountpoint(m.mountpoint)


def reap(m: Mount, timeout: float = 30.0) -> None:
    """Wait for a mount process told to end; if it cannot exit (a thread held in the kernel by a directory lock
    that a syscall in flight to it holds: runner.abort_connection), abort its FUSE connection, then wait."""
    try:
        m.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        assert runner.abort_connection(m.mountpoint), f"{m.mountpoint}: the process never exited and its connection could not be aborted"
        m.proc.wait(60)


def write_faults(path: str, text: str) -> None:
    """Hand ``text`` to flaky_mount.py's fault file in one step (a new file renamed over it): the mount reads the
    file and then empties it, so lines written into the file in place could land between its read and its
    truncate and be lost (the store then stayed up where a test had taken it down)."""
    tmp = f"{path}.{os.getpid()}.new"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def cleanup_mountpoint(mountpoint: str) -> None:
    for _ in range(50):
        if runner.find_mount(mountpoint) is None:
            return
        with contextlib.suppress(Exception):
            runner.lazy_unmount(mountpoint)
        time.sleep(0.1)
    raise AssertionError(f"{mountpoint} is still mounted")


def mounted_points() -> set[str]:
    with open("/proc/self/mountinfo") as f:
        return {runner.unescape(line.split()[4]) for line in f if " - fuse" in line}


def kernel_counts(mountpoint: str) -> dict[str, int]:
    """The shim's counters (``lakemount_fuse_kernel_*``), the requests Python's handlers counted, by op
    (``op_<name>``), and the closes saved on the request loop (``quick_saves``, stop 58), from ``.lakefs/stats``."""
    counts = {}
    with open(f"{mountpoint}/.lakefs/stats") as f:
        for line in f:
            name, value = line.rsplit(" ", 1)
            if name.startswith("lakemount_fuse_kernel_"):
                counts[name.removeprefix("lakemount_fuse_kernel_")] = int(float(value))  # large ones print as 1.2e+08
            elif name.startswith('lakemount_fuse_ops_total{op="'):
                counts["op_" + name.removeprefix('lakemount_fuse_ops_total{op="').removesuffix('"}')] = int(value)
            elif name.startswith("lakemount_fuse_quick_saves"):
                counts[name.removeprefix("lakemount_fuse_").removesuffix("_total")] = int(value)
    return counts


def wait_for(pred: Callable[[], bool], timeout: float = 10.0, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(interval)
    return pred()


def flaky_mount(mounts: Callable[..., Mount], tmp: str, repo: str) -> tuple[Mount, str, Callable[[str], None]]:
    """A mount of tests/fuse/flaky_mount.py (its block store fails as its fault file says) under ``tmp``, its
    ``repo``'s branch main, and a call that hands the mount one fault line and waits until the mount took it."""
    faults = os.path.join(tmp, "faults")
    script = os.path.join(os.path.dirname(__file__), "flaky_mount.py")
    mp = os.path.join(tmp, "flaky")
    m = mounts("flaky", command=lambda fd: [sys.executable, script, mp, faults, str(fd)])

    def inject(line: str) -> None:
        write_faults(faults, line + "\n")  # the mount took the last one: the file is empty
        assert wait_for(lambda: os.path.getsize(faults) == 0, timeout=5)

    return m, f"{m.mountpoint}/{repo}/main", inject
