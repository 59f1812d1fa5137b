"""``lakemount up`` started in the background stops everything it started on SIGINT and on SIGTERM.

Started as ``setsid scripts/up.sh > up.log 2>&1 &`` does: a new session, and
SIGINT ignored in the inherited disposition (what a shell gives a background
job).  Before, SIGINT did nothing at all and SIGTERM ended ``up`` alone: the
mount process, the gateway's and the API's workers, their ports and the FUSE
mount stayed.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.fuse.mounting import cleanup_mountpoint, needs_fuse, wait_for

pytestmark = needs_fuse

READY_WAIT = 120.0
STOP_WAIT = 30.0


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc: children of children too)."""
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z":
            parents[int(name)] = int(fields[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def cmdline(pid: int) -> str:
    """``pid`` and its command line, for a failure's message."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f"{pid}: " + f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return f"{pid}: (gone)"


def alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def in_proc_mounts(mountpoint: str) -> bool:
    with open("/proc/mounts") as f:
        return any(line.split()[1] == mountpoint for line in f)


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def up_env(tmp_path: os.PathLike[str]) -> Iterator[tuple[dict[str, str], str]]:
    home = os.path.join(os.fspath(tmp_path), "home")
    mp = os.path.join(os.fspath(tmp_path), "up-mnt")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEMOUNT_")}
    env.update(
        LAKEMOUNT_HOME=home, LAKEMOUNT_MOUNT_PATH=mp, LAKEMOUNT_CACHE_RAM_BYTES=str(64 << 20),
        LAKEMOUNT_GATEWAYS_S3_LISTEN_ADDRESS="127.0.0.1:0", LAKEMOUNT_API_LISTEN_ADDRESS="127.0.0.1:0",
        LAKEMOUNT_GATEWAYS_S3_WORKERS="2", LAKEMOUNT_API_WORKERS="2",
        PYTHONPATH=os.pathsep.join(p for p in (os.getcwd(), env.get("PYTHONPATH", "")) if p),
    )
    try:
        yield env, mp
    finally:
        cleanup_mountpoint(mp)


def start_up_in_background(env: dict[str, str]) -> subprocess.Popen[bytes]:
    """``lakemount up`` as scripts/up.sh's last line runs it under ``setsid scripts/up.sh > up.log 2>&1 &``."""
    # A shell gives a background job SIGINT ignored; `exec` keeps that disposition for `up`.
    script = f'trap "" INT; exec {sys.executable} -m lakemount.cli.main up'
    return subprocess.Popen(["sh", "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)


def read_until(proc: subprocess.Popen[bytes], text: str, timeout: float) -> str:
    """``proc``'s output up to and including ``text`` (or all of it, if it ended first or the time ran out)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    out = b""
    deadline = time.monotonic() + timeout
    while text.encode() not in out and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            out += chunk
    return out.decode(errors="replace")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_up_in_the_background_stops_everything_on_a_stop_signal(
    up_env: tuple[dict[str, str], str], signum: signal.Signals
) -> None:
    env, mp = up_env
    proc = start_up_in_background(env)
    children: set[int] = set()
    try:
        out = read_until(proc, "web UI:", READY_WAIT)
        assert "web UI:" in out and proc.poll() is None, f"up did not come up (status {proc.poll()}):\n{out}"
        ports = [int(p) for p in re.findall(r"http://127\.0\.0\.1:(\d+)", out)]
        assert len(set(ports)) == 2, out  # the gateway's and the API's
        children = descendants(proc.pid)
        # The mount process and 2 + 2 workers at least (multiprocessing may add a resource tracker).
        assert len(children) >= 5, (children, out)
        assert in_proc_mounts(mp) and all(port_open(p) for p in ports), out

        proc.send_signal(signum)
        try:
            status = proc.wait(STOP_WAIT)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"up still runs {STOP_WAIT:.0f}s after {signum.name}") from None
        rest = read_until(proc, "\0", 5)  # what is left: up has ended
        # Died of the signal itself: it was delivered, and whoever waits on `up` can tell.
        assert status == -signum, (status, out + rest)
        assert wait_for(lambda: not any(alive(pid) for pid in children), timeout=10), (
            [cmdline(pid) for pid in children if alive(pid)], rest)
        assert not in_proc_mounts(mp), rest
        assert not any(port_open(p) for p in ports), rest
        assert f"{signum.name}: stopped every service" in rest, rest
    finally:
        # Whatever a failure left: the whole session (`up` and every child stayed in its group).
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        for pid in children:
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
