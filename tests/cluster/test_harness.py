"""The harness itself: hosts are isolated, teardown is complete, stale clusters go but live ones stay."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.cluster.harness import (
    PYTHON,
    RUN_DIR,
    Cluster,
    _run,
    available,
    drop_copied_fuse_mounts,
    fuse_mounts,
    remove_stale,
)
from tests.skip_policy import under_ci

pytestmark = [pytest.mark.cluster]

PROBE = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], 9), timeout=2).close()
    print("connected")
except Exception as exc:
    print(type(exc).__name__)
"""


@pytest.fixture(autouse=True)
def _root() -> None:
    why = available()
    if why is not None:
        pytest.fail(f"cluster tests cannot run here: {why}") if under_ci() else pytest.skip(why)


def test_hosts_have_their_own_addresses_and_mount_namespaces() -> None:
    with Cluster(deadline=120) as c:
        a, b = c.add_host("a"), c.add_host("b")
        assert a.ip in a.run("ip", "-4", "-o", "addr").stdout and a.ip not in b.run("ip", "-4", "-o", "addr").stdout
        a.run("mount", "-t", "tmpfs", "none", "/mnt")
        a.run("touch", "/mnt/only-on-a")
        assert "only-on-a" not in b.run("ls", "/mnt").stdout
        assert not os.path.exists("/mnt/only-on-a")
        assert a.run(PYTHON, "-c", PROBE, b.ip).stdout.strip() == "ConnectionRefusedError"  # b answers (nothing listens)
        b.link(False)
        assert a.run(PYTHON, "-c", PROBE, b.ip).stdout.strip() in ("TimeoutError", "OSError")  # cut off
        names = (a.ns, b.ns, c.bridge)
    listed = _run("ip", "netns", "list").stdout + _run("ip", "-o", "link").stdout
    assert not any(n in listed for n in names)  # torn down


def test_remove_stale_spares_live_clusters_and_removes_dead_ones() -> None:
    with Cluster(deadline=60) as c:
        h = c.add_host("a")
        assert not any(c.id in x for x in remove_stale())
        assert h.ns in _run("ip", "netns", "list").stdout
        (RUN_DIR / c.id).write_text("999999999")  # the owner "died"
        assert h.ns in remove_stale()


def test_a_host_holds_no_copy_of_a_mount_made_before_it(tmp_path: Path) -> None:
    """A host's ``unshare -m`` copies every mount of ours, a lakemount mount too; the copy holds its FUSE
    connection, so ``fusermount3 -u`` out here detached it without ending its process, which served the copy
    until the host went (stop 55: Spark runs' mounts outlived their unmount until SIGTERM while another
    session's cluster tests ran).  A host now drops the FUSE mounts it copied; a namespace made the old way
    still shows the fault."""
    from tests.fuse.mounting import start, stop

    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    m = start(str(home), str(tmp_path / "mnt"))
    anchors: list[subprocess.Popen[bytes]] = []

    def anchor() -> subprocess.Popen[bytes]:
        p = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sleep", "infinity"])
        anchors.append(p)
        end = time.monotonic() + 60
        while os.readlink(f"/proc/{p.pid}/ns/mnt") == os.readlink("/proc/self/ns/mnt"):
            assert p.poll() is None and time.monotonic() < end, "the namespace anchor did not start"
            time.sleep(0.02)
        return p

    try:
        old_way, host = anchor(), anchor()
        assert m.mountpoint in fuse_mounts(old_way.pid)  # the copy that holds the connection
        assert m.mountpoint in drop_copied_fuse_mounts(host.pid)
        assert m.mountpoint not in fuse_mounts(host.pid)
        _run("fusermount3", "-u", m.mountpoint)
        assert m.mountpoint not in fuse_mounts()
        time.sleep(3)
        assert m.proc.poll() is None, "the fault did not happen: the mount ended while a copy held it"
        old_way.kill()
        old_way.wait()
        m.proc.wait(30)  # the host's copy is gone: with the old way's, nothing holds the connection
    finally:
        for p in anchors:
            p.kill()
            p.wait()
        stop(m)
