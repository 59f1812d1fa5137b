"""The harness itself: hosts are isolated, teardown is complete, stale clusters go but live ones stay."""

from __future__ import annotations

import os

import pytest

from tests.cluster.harness import PYTHON, RUN_DIR, Cluster, _run, available, remove_stale
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
