"""Two mounts with separate homes over one PostgreSQL ref store: changes are pushed, not polled.

Both mounts poll heads only every hour (``--head-ttl 3600``), so what the second sees within the
tests' deadlines (a minute at most, only a bound on a failure: a change is seen as soon as its notice
lands) it learnt from the ref store's LISTEN/NOTIFY (``lakemount.metastore.notify``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fuse.mounting import Mount, env_for, needs_fuse, start, stop, wait_for

pytestmark = [*needs_fuse, pytest.mark.postgres]

HEAD_TTL = 3600  # seconds: no poll lands within a test
SEEN = 60.0  # seconds a change may take to show on the other mount before the test fails


def _mounts(tmp_path: Path, url: str, *extra: str, staging: str = "sql") -> Iterator[tuple[Mount, Mount]]:
    shared = {"LAKEMOUNT_METADATA_DB_URL": url, "LAKEMOUNT_BLOCKSTORE_LOCAL_PATH": str(tmp_path / "blocks"),
              "LAKEMOUNT_STAGING_BACKEND": staging}
    env_a = env_for(str(tmp_path / "a"), **shared)
    subprocess.run(
        [sys.executable, "-m", "lakemount.cli.main", "repo", "create", "lakefs://demo"],
        env=env_a, check=True, capture_output=True, timeout=60,
    )
    mounts: list[Mount] = []
    try:
        for name in ("a", "b"):
            home = str(tmp_path / name)
            mounts.append(start(home, str(tmp_path / f"mnt-{name}"), ["--head-ttl", str(HEAD_TTL), *extra], env=env_for(home, **shared)))
        yield mounts[0], mounts[1]
    finally:
        for m in mounts:
            stop(m)


@pytest.fixture
def notified(tmp_path: Path, pg_url: str) -> Iterator[tuple[Mount, Mount]]:  # noqa: F811
    yield from _mounts(tmp_path, pg_url)


@pytest.fixture
def notified_lsm(tmp_path: Path, pg_url: str) -> Iterator[tuple[Mount, Mount]]:  # noqa: F811
    yield from _mounts(tmp_path, pg_url, staging="lsm")


@pytest.fixture
def polled(tmp_path: Path, pg_url: str) -> Iterator[tuple[Mount, Mount]]:  # noqa: F811
    yield from _mounts(tmp_path, pg_url, "--no-notify")


def _head(m: Mount) -> str:
    with open(os.path.join(m.mountpoint, "demo/main/.lakefs/head")) as f:
        return f.read().strip()


def test_a_commit_on_one_node_is_seen_by_the_other_at_once(notified: tuple[Mount, Mount]) -> None:
    a, b = notified
    main_b = os.path.join(b.mountpoint, "demo/main")
    assert os.listdir(main_b) == [".lakefs"]  # b now caches main's (empty) listing for head_ttl
    with open(os.path.join(a.mountpoint, "demo/main/x.txt"), "w") as f:
        f.write("staged on a\n")
    # staging pushed: the file appears on b without waiting for head_ttl
    assert wait_for(lambda: "x.txt" in os.listdir(main_b), timeout=SEEN), b.log()
    with open(os.path.join(a.mountpoint, ".lakefs/stats")) as f:  # a's notices are counted (stop 54)
        counts = {line.split()[0]: float(line.split()[1]) for line in f if line.startswith("lakemount_fuse_staging_notices_")}
    assert counts["lakemount_fuse_staging_notices_inline"] >= 1, counts
    assert {"lakemount_fuse_staging_notices_carried", "lakemount_fuse_staging_notices_alone",
            "lakemount_fuse_staging_notices_held"} <= set(counts), counts
    with open(os.path.join(a.mountpoint, "demo/main/.lakefs/commit"), "w") as f:
        f.write("from a\n")
    assert wait_for(lambda: _head(b) == _head(a), timeout=SEEN), b.log()
    with open(os.path.join(main_b, "x.txt")) as f:
        assert f.read() == "staged on a\n"


def test_with_lsm_staging_a_write_on_one_node_is_seen_by_the_other_at_once(
    notified_lsm: tuple[Mount, Mount], tmp_path: Path, pg_url: str  # noqa: F811
) -> None:
    """The L1 append's own statement sends the change notice (a paced one: the second write's, within ``PACE_S``
    of the first, goes owed by the pacer, stop 51): b drops what it knew of main's staging (its listing and a
    file it has read), though it would trust both for an hour (head_ttl)."""
    a, b = notified_lsm
    main_a, main_b = (os.path.join(m.mountpoint, "demo/main") for m in (a, b))
    assert os.listdir(main_b) == [".lakefs"]
    with open(os.path.join(main_a, "x.txt"), "w") as f:
        f.write("first\n")
    assert wait_for(lambda: "x.txt" in os.listdir(main_b), timeout=SEEN), b.log()
    with open(os.path.join(main_b, "x.txt")) as f:
        assert f.read() == "first\n"
    with open(os.path.join(main_a, "x.txt"), "w") as f:
        f.write("second\n")

    def fresh() -> bool:
        with open(os.path.join(main_b, "x.txt")) as f:
            return f.read() == "second\n"

    assert wait_for(fresh, timeout=SEEN), b.log()
    # the writes went through staging files (lsm: small ones are inline, in their list rows), not the sql rows
    from lakemount.metastore.sql import SqlRefStore

    refs = SqlRefStore(pg_url)
    assert refs._query("SELECT count(*) FROM lm_staging_files", ())[0][0] > 0, "no staging file was written"
    assert refs._query("SELECT count(*) FROM lm_staging", ())[0][0] == 0


def test_a_partial_reset_and_a_deleted_repository_are_seen_by_the_other_at_once(
    notified: tuple[Mount, Mount], tmp_path: Path, pg_url: str  # noqa: F811
) -> None:
    """No head moves in a partial reset, and a deleted repository has no head left: both are pushed all the same."""
    a, b = notified
    main_a, main_b = (os.path.join(m.mountpoint, "demo/main") for m in (a, b))
    os.makedirs(os.path.join(main_a, "data"))
    for name in ("data/x.txt", "datalake.txt"):
        with open(os.path.join(main_a, name), "w") as f:
            f.write("staged on a\n")
    assert wait_for(lambda: "x.txt" in os.listdir(os.path.join(main_b, "data")) and "datalake.txt" in os.listdir(main_b), timeout=SEEN), b.log()
    with open(os.path.join(main_a, ".lakefs/reset"), "w") as f:
        f.write("data\n")
    # b caches main's listing for an hour (head_ttl); the reset reaches it as a staging notice
    assert wait_for(lambda: sorted(os.listdir(main_b)) == [".lakefs", "datalake.txt"], timeout=SEEN), b.log()
    subprocess.run(
        [sys.executable, "-m", "lakemount.cli.main", "repo", "delete", "lakefs://demo", "-y"],
        env=env_for(a.home, LAKEMOUNT_METADATA_DB_URL=pg_url, LAKEMOUNT_BLOCKSTORE_LOCAL_PATH=str(tmp_path / "blocks")),
        check=True, capture_output=True, timeout=60,
    )
    assert wait_for(lambda: not os.path.exists(os.path.join(main_b, "datalake.txt")), timeout=SEEN), b.log()


def test_without_notices_the_other_node_waits_for_head_ttl(polled: tuple[Mount, Mount], pg_url: str) -> None:  # noqa: F811
    """The write's notice is sent all the same (a listener of the test's own hears it), and b, which does not
    listen, still shows its cached listing after it: no fixed sleep, the notice is the event b would have acted on."""
    from lakemount.metastore.sql import SqlRefStore

    a, b = polled
    main_b = os.path.join(b.mountpoint, "demo/main")
    assert os.listdir(main_b) == [".lakefs"]
    heard = threading.Event()
    listener = SqlRefStore(pg_url).listen(
        lambda batch: heard.set() if batch and any((c.kind, c.repo, c.branch) == ("staging", "demo", "main") for c in batch) else None)
    assert listener is not None
    try:
        assert listener.connected.wait(30), "the test's listener never connected"
        with open(os.path.join(a.mountpoint, "demo/main/x.txt"), "w") as f:
            f.write("staged on a\n")
        assert heard.wait(SEEN), "the write's staging notice never arrived"
    finally:
        listener.stop()
    assert os.listdir(main_b) == [".lakefs"]  # still the cached listing: polling alone is slow
