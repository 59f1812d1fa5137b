"""A cluster on one machine: PostgreSQL, S3 (moto) and three hosts each mounting ``/lake``.

One cluster per module (built in ~5 s); each test uses its own branch so they
do not depend on each other's order.  Faults are real: PostgreSQL is stopped,
or crashed with durable settings, and restarted, the S3 host's link is cut; each
test asserts that its fault happened and reached the operation under test.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Iterator

import pytest

from tests.cluster.harness import Cluster, Host, available, cluster, remove_stale, running, stat_total
from tests.skip_policy import under_ci

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.fuse, pytest.mark.postgres]

WHY = available()


@pytest.fixture(scope="module")
def lake() -> Iterator[Cluster]:
    if WHY is not None:
        pytest.fail(f"cluster tests cannot run here: {WHY}") if under_ci() else pytest.skip(WHY)
    remove_stale()
    with cluster(["db", "s3", "w1", "w2", "client"], deadline=900, mounts=["w1", "w2", "client"], durable=True) as c:
        c["w1"].lakemount("repo", "create", "lakefs://repo")
        yield c


def branch(c: Cluster, name: str) -> str:
    c["w1"].lakemount("branch", "create", f"lakefs://repo/{name}", "--source", "lakefs://repo/main")
    return f"/lake/repo/{name}"


def wait_read(h: Host, path: str, timeout: float = 60) -> bytes:
    """``path``'s bytes on ``h`` once it reads; ``timeout`` only bounds a failure (a loaded machine is slow)."""
    end = time.monotonic() + timeout
    while True:
        p = h.run("cat", path, check=False, text=False)
        if p.returncode == 0:
            return p.stdout
        if time.monotonic() > end:
            raise AssertionError(f"{h.name}: {path} did not read in {timeout:.0f} s: {p.stderr!r}")
        time.sleep(0.05)


def head(h: Host, root: str) -> str:
    return h.run("cat", f"{root}/.lakefs/head").stdout.strip()


def test_commits_on_one_host_are_read_byte_identical_everywhere(lake: Cluster) -> None:
    root = branch(lake, "share")
    w1 = lake["w1"]
    data = os.urandom(300_000)
    w1.run("sh", "-c", f"mkdir -p {root}/d && cat > {root}/d/blob.bin", input=data, text=False)
    w1.run("sh", "-c", f"echo first > {root}/.lakefs/commit")
    commit = head(w1, root)
    for name in ("w2", "client"):
        h = lake[name]
        end = time.monotonic() + 60  # notify: immediate; the poll would take head_ttl (1 s); a minute bounds a failure
        while head(h, root) != commit:
            assert time.monotonic() < end, f"{name} never saw commit {commit} made on w1"
            time.sleep(0.05)
        assert h.read(f"{root}/d/blob.bin") == data
        assert h.read(f"/lake/repo/{commit}/d/blob.bin") == data


def test_postgres_restart_while_one_host_writes_and_another_reads(lake: Cluster) -> None:
    root = branch(lake, "pgfault")
    w1, w2, db = lake["w1"], lake["w2"], lake["db"]
    data = os.urandom(200_000)
    w1.run("sh", "-c", f"cat > {root}/kept.bin", input=data, text=False)
    w1.run("sh", "-c", f"echo base > {root}/.lakefs/commit")
    commit = head(w1, root)
    committed = f"/lake/repo/{commit}/kept.bin"
    assert w2.read(committed) == data  # warms w2's caches
    eio_before = eio_count(w1)
    dead = lake.pg_pid()
    lake.pg_stop(db)
    try:
        assert not running(dead), "PostgreSQL is still running: the outage never happened"
        # committed data keeps reading from the caches of w2
        assert w2.read(committed) == data
        # a write while the ref store is down meets the outage: it fails with EIO (never a wrong success),
        # and the mount counts it
        p = w1.run("sh", "-c", f"echo during > {root}/during.txt", check=False)
        assert p.returncode != 0 and "Input/output error" in p.stderr, (p.returncode, p.stderr)
        assert eio_count(w1) > eio_before, "w1's mount counted no EIO: the write never met the outage"
    finally:
        lake.pg_start(db)
    # the next write and commit succeed without remounting (connections are re-made)
    end = time.monotonic() + 30
    while True:
        p = w1.run("sh", "-c", f"echo after > {root}/after.txt && echo after > {root}/.lakefs/commit", check=False)
        if p.returncode == 0:
            break
        assert time.monotonic() < end, p.stderr
        time.sleep(0.5)
    names = set(w2.run("ls", f"/lake/repo/{head(w1, root)}/").stdout.split())
    assert {"kept.bin", "after.txt"} <= names
    assert "during.txt" not in names  # the write that failed left nothing behind


CLOSER = r"""
import sys, time
root, until = sys.argv[1], time.time() + float(sys.argv[2])
i = 0
while time.time() < until:  # a writer closing files; each acknowledged name is printed
    try:
        with open(f"{root}/c{i}.txt", "w") as f:
            f.write(f"c{i}")
        print(f"c{i}.txt", flush=True)
    except OSError as exc:
        print("error", exc.errno, flush=True)
        time.sleep(0.1)
    i += 1
"""


# Over TCP a backend killed by "-m immediate" still sends "terminating connection" (an
# OperationalError, always retried); a unix socket's client sees only the closed socket (a bare
# DatabaseError, EIO before): tests/metastore/test_pg_crash.py reproduces that one.
READER = r"""
import os, sys, time
from lakemount.app import App
branch, go = sys.argv[1], sys.argv[2]
cat = App.from_config().catalog  # a long-lived reader on the catalog, as a Spark executor is
def read(name):
    return cat.read(cat.repository("repo"), cat.stat("repo", branch, name))
read("kept.bin")  # this process keeps its connections to PostgreSQL now
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.05)
for name in ["kept.bin", *sys.argv[3:]]:
    try:
        data = read(name)
        good = len(data) == 100_000 if name == "kept.bin" else data == name.removesuffix(".txt").encode()
        print("ok" if good else "wrong", name, flush=True)
    except Exception as exc:
        print("error", name, type(exc).__name__, str(exc).splitlines()[0], flush=True)
"""


def test_postgres_crash_while_one_host_writes_and_another_reads(lake: Cluster) -> None:
    root = branch(lake, "pgcrash")
    w1, w2, db = lake["w1"], lake["w2"], lake["db"]
    data = os.urandom(100_000)
    w1.run("sh", "-c", f"cat > {root}/kept.bin", input=data, text=False)
    assert wait_read(w2, f"{root}/kept.bin") == data  # w2 keeps connections to PostgreSQL now
    out = f"{w1.home}/closer.out"
    closer = w1.spawn(sys.executable, "-c", CLOSER, root, "60", log=out)
    end = time.monotonic() + 60
    while open(out).read().count("\n") < 8:
        assert closer.poll() is None and time.monotonic() < end, open(out).read()
        time.sleep(0.05)
    first = [line for line in open(out).read().splitlines() if line.startswith("c")]
    for name in first[:4]:  # w2's worker threads look names up, on connections they keep
        assert wait_read(w2, f"{root}/{name}") == name.removesuffix(".txt").encode()
    go, rout = f"{w2.home}/reader.go", f"{w2.home}/reader.out"
    reader = w2.spawn(sys.executable, "-c", READER, "pgcrash", go, *first[4:8], env=lake.env(w2), log=rout)
    while "ready" not in open(rout).read():
        assert reader.poll() is None and time.monotonic() < end, open(rout).read()
        time.sleep(0.05)
    dead = lake.pg_crash(db)  # fsync on (the module's cluster is durable): a crash, not a shutdown
    lake.pg_start(db)
    assert lake.pg_pid() != dead and running(lake.pg_pid())
    # The reader's first reads after the restart, on the connections the crash broke: no error.
    open(go, "w").close()
    assert reader.wait(timeout=60) == 0, open(rout).read()
    results = open(rout).read().splitlines()[1:]
    assert results == [f"ok {n}" for n in ["kept.bin", *first[4:8]]], results
    # The first reads on w2 after the restart, of files it never looked up (the kernel has
    # not cached them): each asks PostgreSQL, on a connection the crash broke.  No EIO, no retry.
    for name in first[4:8]:
        p = w2.run("cat", f"{root}/{name}", check=False)
        assert p.returncode == 0 and p.stdout == name.removesuffix(".txt"), (name, p.stderr)
    while closer.poll() is None and open(out).read().splitlines()[-1].startswith("error"):
        assert time.monotonic() < end + 60, open(out).read()[-500:]  # the writer recovers without a remount
        time.sleep(0.1)
    closer.terminate()
    closer.wait(timeout=30)
    lines = open(out).read().splitlines()
    assert any(line.startswith("error") for line in lines), "no write met the crash"
    # nothing acknowledged was lost: every file the writer was told it closed shows on w2
    # (within head_ttl and the kernel's entry timeout: close-to-open across mounts)
    written = {line for line in lines if line.startswith("c")}
    end = time.monotonic() + 60  # a failure bound: a loaded machine is slow
    while not written <= (names := set(w2.run("ls", root).stdout.split())):
        assert time.monotonic() < end, f"acknowledged files never showed on w2 in 60 s: {sorted(written - names)}"
        time.sleep(0.2)
    for name in sorted(written)[-3:]:
        assert w2.read(f"{root}/{name}") == name.removesuffix(".txt").encode()


def eio_count(h: Host) -> int:
    """Operations ``h``'s mount has answered EIO so far (its ``.lakefs/stats``)."""
    return stat_total(h.run("cat", "/lake/.lakefs/stats").stdout, "lakemount_fuse_op_errors_total", errno="EIO")


def mount_counter(h: Host, name: str) -> int:
    """The mount's counter ``lakemount_fuse_<name>_total`` (``.lakefs/stats``; 0 before it first counts)."""
    metric = f"lakemount_fuse_{name}_total "
    lines = [line for line in h.run("cat", "/lake/.lakefs/stats").stdout.splitlines() if line.startswith(metric)]
    return int(float(lines[0].split()[1])) if lines else 0


def test_s3_unreachable_for_ten_seconds(lake: Cluster) -> None:
    root = branch(lake, "s3fault")
    w1, w2, s3 = lake["w1"], lake["w2"], lake["s3"]
    cached, uncached = os.urandom(100_000), os.urandom(100_000)
    w1.run("sh", "-c", f"cat > {root}/cached.bin", input=cached, text=False)
    w1.run("sh", "-c", f"cat > {root}/uncached.bin", input=uncached, text=False)
    w1.run("sh", "-c", f"echo two > {root}/.lakefs/commit")
    commit = head(w1, root)
    assert w2.read(f"/lake/repo/{commit}/cached.bin") == cached
    w2.run("stat", f"/lake/repo/{commit}/uncached.bin")  # its metadata is known: only its bytes need S3
    eio_before = eio_count(w2)
    s3.link(False)
    cut = time.monotonic()
    try:
        # The cached bytes need no S3: read right while it is cut off, fetching nothing from the store.
        misses = mount_counter(w2, "block_misses")
        assert w2.read(f"/lake/repo/{commit}/cached.bin") == cached
        assert mount_counter(w2, "block_misses") == misses, "the cached read went to S3"
        # The uncached bytes are only in S3, and the link stays down until this read returns: it
        # must fail, after S3's connect timeout (5 s), never succeed nor return wrong bytes.
        t = time.monotonic()
        p = w2.run("cat", f"/lake/repo/{commit}/uncached.bin", check=False, text=False, timeout=180)
        waited = time.monotonic() - t
        assert p.returncode != 0 and b"Input/output error" in p.stderr, (p.returncode, p.stderr, len(p.stdout))
        assert waited >= 5, f"EIO after {waited:.1f}s: not S3's connect timeout, so not the cut"
        time.sleep(max(0.0, 10 - (time.monotonic() - cut)))
    finally:
        s3.link(True)
    assert eio_count(w2) > eio_before  # the mount counted the failed S3 access
    end = time.monotonic() + 60
    while True:  # recovery without remounting
        p = w2.run("cat", f"/lake/repo/{commit}/uncached.bin", check=False, text=False, timeout=120)
        if p.returncode == 0:
            assert p.stdout == uncached
            break
        assert time.monotonic() < end, p.stderr
        time.sleep(1)


WRITER = r"""
import json, os, sys, multiprocessing as mp
root, host, procs, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def work(p):
    errors = []
    ok = 0
    for i in range(rounds):
        name = f"{root}/{host}-{p}-{i}.txt"
        with open(name, "w") as f:
            f.write(name)
        try:
            with open(f"{root}/.lakefs/commit", "w") as f:
                f.write(f"{host} {p} {i}\n")
            ok += 1
        except OSError as exc:
            try:
                msg = open(f"{root}/.lakefs/error").read().strip()
            except OSError:
                msg = ""
            errors.append(f"{exc.strerror}: {msg}")
    return ok, errors
with mp.Pool(procs) as pool:
    res = pool.map(work, range(procs))
print(json.dumps({"ok": sum(r[0] for r in res), "errors": [e for r in res for e in r[1]]}))
"""


def test_three_hosts_times_four_processes_commit_to_one_branch(lake: Cluster) -> None:
    root = branch(lake, "conc")
    hosts = [lake[n] for n in ("w1", "w2", "client")]
    procs, rounds = 4, 3
    t = time.monotonic()
    runs = [h.spawn(sys.executable, "-c", WRITER, root, h.name, str(procs), str(rounds),
                    log=f"{h.home}/conc.out") for h in hosts]
    for r in runs:
        assert r.wait(timeout=600) == 0
    elapsed = time.monotonic() - t
    results = [json.loads(open(f"{h.home}/conc.out").read().strip().splitlines()[-1]) for h in hosts]
    errors = [e for r in results for e in r["errors"]]
    assert all("nothing to commit" in e.lower() for e in errors), errors
    commits = sum(r["ok"] for r in results)
    print(f"\n3 hosts x {procs} processes: {commits} commits in {elapsed:.1f}s = {commits / elapsed:.2f} commits/s")
    lakemount = lake["client"]
    final = head(lakemount, root)
    listed = set(lakemount.run("ls", f"/lake/repo/{final}/").stdout.split())
    want = {f"{h.name}-{p}-{i}.txt" for h in hosts for p in range(procs) for i in range(rounds)}
    assert want <= listed, sorted(want - listed)
    digest = hashlib.sha256()
    for name in sorted(want):
        body = lakemount.read(f"/lake/repo/{final}/{name}")
        assert body == f"{root}/{name}".encode()
        digest.update(body)


SLOW_WRITER = r"""
import os, sys, time
path, size = sys.argv[1], int(sys.argv[2])
block = bytes(range(256)) * 4096  # 1 MiB, a pattern any partial copy would break
f = open(path, "wb")
for i in range(size):
    f.write(block)
print("closing", flush=True)
t = time.time()
f.close()
print("closed", round(time.time() - t, 1), time.time(), flush=True)
"""


def test_a_workers_link_cut_mid_write_harms_no_one_else(lake: Cluster) -> None:
    root = branch(lake, "cut")
    w1, w2, client = lake["w1"], lake["w2"], lake["client"]
    out = f"{w2.home}/cut-writer.out"
    writer = w2.spawn(sys.executable, "-c", SLOW_WRITER, f"{root}/big.bin", "24", log=out)
    end = time.monotonic() + 60
    while "closing" not in open(out).read():  # the close uploads to S3 and stages in PostgreSQL
        assert writer.poll() is None and time.monotonic() < end, open(out).read()
        time.sleep(0.01)
    w2.link(False)
    try:
        # "closed" is printed when close() returns: not there after the cut, the cut hit the close
        assert "closed" not in open(out).read(), f"the writer's close ended before the cut: {open(out).read()!r}"
        # the other hosts keep working while w2 is cut off (a minute only bounds a failure)
        t = time.monotonic()
        w1.run("sh", "-c", f"echo other > {root}/other.txt && echo other > {root}/.lakefs/commit", timeout=60)
        assert client.read(f"/lake/repo/{head(w1, root)}/other.txt", timeout=60) == b"other\n"
        time.sleep(max(0.0, 8 - (time.monotonic() - t)))  # the cut lasts 8 s: the close must outlast its retries
    finally:
        restored = time.time()
        w2.link(True)
    writer.wait(timeout=180)
    print(f"\nwriter on the cut host: {open(out).read().strip()!r} (exit {writer.returncode})")
    # The cut met the close: it failed, or it returned only once the link was back.
    closed = [line.split() for line in open(out).read().splitlines() if line.startswith("closed")]
    assert writer.returncode != 0 or (closed and float(closed[0][2]) >= restored), (
        f"the close ended before the link came back: the cut never met it: {open(out).read()!r}")
    # whatever the writer was told, no host ever sees a partial object: the file is whole, or it is the empty
    # file its create staged (content is staged on close: the close that failed staged none of it), or absent
    expected = (bytes(range(256)) * 4096) * 24
    for h in (w1, client, w2):
        p = h.run("cat", f"{root}/big.bin", check=False, text=False, timeout=120)
        assert p.returncode != 0 or p.stdout in (b"", expected), (h.name, len(p.stdout))
    if writer.returncode == 0:  # told "closed": it must be there, whole
        assert wait_read(client, f"{root}/big.bin", timeout=60) == expected
    else:  # told EIO: w2's mount kept the content aside, whole, and said where
        log = open(f"{w2.home}/mount.log").read()
        kept = re.search(r"could not save big\.bin: its content is kept in (\S+)", log)
        assert kept, log[-3000:]
        assert os.path.getsize(kept.group(1)) == len(expected), kept.group(1)
    # and w2 works again without remounting
    end = time.monotonic() + 60
    while True:
        p = w2.run("sh", "-c", f"echo back > {root}/back.txt && cat {root}/back.txt", check=False)
        if p.returncode == 0 and p.stdout == "back\n":
            break
        assert time.monotonic() < end, p.stderr
        time.sleep(1)
