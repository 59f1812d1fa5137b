"""Through the kernel: real mounts in child processes, shell-level operations, crashes, two mounts, failures.

Every test that mounts does so through the ``mounts`` fixture, whose teardown
stops each mount process and lazily unmounts anything left, then checks
/proc/self/mountinfo: no test leaves a mount behind, pass or fail.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from lakemount.app import App
from lakemount.fuse import runner
from tests import budget
from tests.fuse.conftest import REPO
from tests.fuse.model import FsModel, OsDriver
from tests.fuse.mounting import (
    Mount,
    cleanup_mountpoint,
    env_for,
    flaky_mount,
    lakemount_cmd,
    needs_fuse,
    wait_for,
)

pytestmark = needs_fuse

MountFactory = Callable[..., Mount]


def sh(script: str, *, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"{script!r} failed ({proc.returncode}): {proc.stderr}")
    return proc


def bash(script: str) -> subprocess.CompletedProcess[str]:
    """``script`` run by bash, which prints a failed write's strerror (dash's echo says "I/O error" for any)."""
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60, check=False)


def oserror(fn: Callable[[], object]) -> int:
    with pytest.raises(OSError) as info:
        fn()
    assert info.value.errno is not None
    return info.value.errno


def write_control(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


# ---------------------------------------------------------------------------- shell
def test_shell_operations_on_a_branch(app: App, mounts: MountFactory) -> None:
    m = mounts()
    main = f"{m.mountpoint}/{REPO}/main"
    assert sorted(os.listdir(m.mountpoint)) == [".lakefs", REPO]
    assert sh(f"echo hello > {main}/a.txt && cat {main}/a.txt").stdout == "hello\n"
    sh(f"echo more >> {main}/a.txt")
    sh(f"mkdir -p {main}/d/e/f && echo x > {main}/d/e/f/g && mkdir {main}/d/empty")
    sh(f"mv {main}/d {main}/d2")
    assert sh(f"cd {main} && find . -path ./.lakefs -prune -o -print | sort").stdout.split() == [
        ".", "./a.txt", "./d2", "./d2/e", "./d2/e/f", "./d2/e/f/g", "./d2/empty",
    ]
    sh(f"ln -s a.txt {main}/link")
    assert os.readlink(f"{main}/link") == "a.txt"
    assert sh(f"cat {main}/link").stdout == "hello\nmore\n"
    sh(f"truncate -s 3 {main}/a.txt")
    assert open(f"{main}/a.txt", "rb").read() == b"hel"
    sh(f"chmod 600 {main}/a.txt && touch -d 2020-01-02T03:04:05Z {main}/a.txt")
    st = os.stat(f"{main}/a.txt")
    assert oct(st.st_mode & 0o777) == oct(0o600) and int(st.st_mtime) == 1577934245
    fd = os.open(f"{main}/r.bin", os.O_RDWR | os.O_CREAT, 0o644)
    os.pwrite(fd, b"0123456789", 0)
    os.pwrite(fd, b"AB", 4)
    os.pwrite(fd, b"Z", 12)
    os.close(fd)
    assert open(f"{main}/r.bin", "rb").read() == b"0123AB6789\0\0Z"
    os.setxattr(f"{main}/r.bin", "user.owner", b"team-a")
    assert os.getxattr(f"{main}/r.bin", "user.owner") == b"team-a"
    assert "user.owner" in os.listxattr(f"{main}/r.bin")
    sh(f"cp -r {main}/d2 {main}/d3 && rm -r {main}/d2")
    assert sorted(os.listdir(main)) == [".lakefs", "a.txt", "d3", "link", "r.bin"]
    assert os.listdir(f"{main}/d3/empty") == []
    assert os.statvfs(main).f_namemax == 255
    # everything is staged on the branch, with its metadata
    cat = app.catalog
    e = cat.stat(REPO, "main", "a.txt")
    assert (e.size, e.mode & 0o777, e.mtime_ns // 10**9) == (3, 0o600, 1577934245)
    assert cat.stat(REPO, "main", "link").target == "a.txt"
    assert dict(cat.stat(REPO, "main", "r.bin").metadata) == {"owner": "team-a"}
    assert cat.stat(REPO, "main", "d3/empty/").is_dir
    assert cat.get_optional(REPO, "main", "d2/e/f/g") is None


def test_one_ref_as_the_root(app: App, mounts: MountFactory) -> None:
    app.catalog.put(REPO, "main", "data/x.csv", b"1,2\n")
    m = mounts("one", args=("--ref", f"{REPO}/main"))
    assert sorted(os.listdir(m.mountpoint)) == [".lakefs", "data"]
    assert "stats" in os.listdir(f"{m.mountpoint}/.lakefs") and "commit" in os.listdir(f"{m.mountpoint}/.lakefs")
    with open(f"{m.mountpoint}/data/y.csv", "w") as f:
        f.write("3,4\n")
    write_control(f"{m.mountpoint}/.lakefs/commit", "via --ref mount")
    assert app.graveler.commit_of(REPO, "main").message == "via --ref mount"
    assert app.catalog.stat(REPO, "main@", "data/y.csv").size == 4


def test_errors_through_the_kernel(app: App, mounts: MountFactory) -> None:
    app.catalog.put(REPO, "main", "dir/f", b"x")
    app.graveler.commit(REPO, "main", "c1")
    app.graveler.create_tag(REPO, "v1", "main")
    app.graveler.create_branch(REPO, "dev", "main")
    m = mounts()
    root = f"{m.mountpoint}/{REPO}"
    assert sorted(os.listdir(root)) == ["dev", "main", "v1"]
    assert open(f"{root}/v1/dir/f", "rb").read() == b"x"
    assert open(f"{root}/main~1/.lakefs/head").read().strip() == app.graveler.resolve(REPO, "main~1").commit_id
    assert oserror(lambda: open(f"{root}/v1/new", "w")) == errno.EROFS
    assert oserror(lambda: os.mkdir(f"{root}/main@/d")) == errno.EROFS
    assert oserror(lambda: os.unlink(f"{root}/v1/dir/f")) == errno.EROFS
    assert oserror(lambda: os.stat(f"{root}/nope")) == errno.ENOENT
    assert oserror(lambda: os.stat(f"{m.mountpoint}/norepo")) == errno.ENOENT
    assert oserror(lambda: open(f"{root}/main/{'n' * 256}", "w")) == errno.ENAMETOOLONG
    assert oserror(lambda: os.rename(f"{root}/main/dir/f", f"{root}/dev/f")) == errno.EXDEV
    assert oserror(lambda: os.rmdir(f"{root}/main/dir")) == errno.ENOTEMPTY
    # mv(1) crosses branches by copying, since rename says EXDEV
    sh(f"mv {root}/main/dir/f {root}/dev/moved")
    assert open(f"{root}/dev/moved", "rb").read() == b"x"
    assert os.path.isdir(f"{root}/main/dir")  # the last entry left; the directory stays


def test_control_files_through_the_kernel(app: App, mounts: MountFactory) -> None:
    app.catalog.put(REPO, "main", "shared", b"base")
    app.graveler.commit(REPO, "main", "base")
    app.graveler.create_branch(REPO, "dev", "main")
    app.catalog.create_tag(REPO, "v1", "main")
    m = mounts()
    main, dev = f"{m.mountpoint}/{REPO}/main", f"{m.mountpoint}/{REPO}/dev"
    sh(f"echo 'main side' > {main}/shared && echo 'main edit' > {main}/.lakefs/commit")
    head = open(f"{main}/.lakefs/head").read().strip()
    assert head == app.graveler.get_branch(REPO, "main").commit_id
    assert json.loads(open(f"{main}/.lakefs/commit").read())["message"] == "main edit"
    sh(f"echo 'dev side' > {dev}/shared && echo 'dev edit' > {dev}/.lakefs/commit")
    refused = bash(f"echo dev > {main}/.lakefs/merge")  # dash says "I/O error" whatever the errno; bash says which
    assert refused.returncode != 0 and "Operation canceled" in refused.stderr, refused.stderr
    assert oserror(lambda: write_control(f"{main}/.lakefs/merge", "dev")) == errno.ECANCELED
    error = open(f"{main}/.lakefs/error").read()
    assert "conflict" in error and "shared" in error.splitlines()
    assert "write 'SOURCE --strategy source-wins' (or dest-wins) to .lakefs/merge" in error
    assert oserror(lambda: write_control(f"{main}/.lakefs/merge", "dev --strategy sideways")) == errno.EINVAL
    write_control(f"{main}/.lakefs/merge", "dev --strategy source-wins")
    assert open(f"{main}/shared").read() == "dev side\n"
    assert json.loads(open(f"{main}/.lakefs/merge").read())["merged"] is True
    log = json.loads(open(f"{main}/.lakefs/log").read())
    assert log[0]["message"].startswith("Merge")
    empty = bash(f"echo nothing > {dev}/.lakefs/commit")  # what a shell user reads (issue 38)
    assert empty.returncode != 0 and "No data available" in empty.stderr, empty.stderr
    assert '"allow_empty": true' in open(f"{dev}/.lakefs/error").read()
    moved = sh(f"mv {main}/.lakefs {main}/x", check=False)
    assert moved.returncode != 0 and "Operation not permitted" in moved.stderr, moved.stderr
    on_tag = bash(f"echo release > {m.mountpoint}/{REPO}/v1/.lakefs/commit")  # a tag is read-only, its .lakefs too
    assert on_tag.returncode != 0 and "Read-only file system" in on_tag.stderr, on_tag.stderr
    stats = open(f"{m.mountpoint}/.lakefs/stats").read()
    assert 'lakemount_fuse_ops_total{op="lookup"}' in stats and "lakemount_fuse_control_merge_total" in stats


def test_sparse_file_counts_the_blocks_written_while_open_and_the_object_once_saved(app: App, mounts: MountFactory) -> None:
    m = mounts()
    path = f"{m.mountpoint}/{REPO}/main/sparse.bin"
    mib = 1 << 20
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        os.ftruncate(fd, 100 * mib)  # what `truncate -s 100M` does
        st = os.stat(path)
        assert st.st_size == 100 * mib and st.st_blocks * 512 < 64 * 1024, st  # a hole: `du` says ~0, not 100 MiB
        os.pwrite(fd, b"x" * mib, 50 * mib)  # one MiB written in the middle of the hole
        st = os.fstat(fd)
        assert st.st_size == 100 * mib and mib <= st.st_blocks * 512 < 2 * mib, st
    finally:
        os.close(fd)
    # Saved, the content is one content-addressed object holding all 100 MiB (zeros included): counted whole.
    st = os.stat(path)
    assert st.st_size == 100 * mib and st.st_blocks * 512 == 100 * mib, st
    with open(path, "rb") as f:
        f.seek(50 * mib - 1)
        assert f.read(2) == b"\0x"


# ---------------------------------------------------------------------------- consistency
def test_two_mounts_see_each_others_closed_files(app: App, mounts: MountFactory) -> None:
    a, b = mounts("a"), mounts("b")
    pa, pb = f"{a.mountpoint}/{REPO}/main", f"{b.mountpoint}/{REPO}/main"
    assert os.listdir(pb) == [".lakefs"]
    for version in (b"one", b"version two"):
        with open(f"{pa}/shared.txt", "wb") as f:
            f.write(version)

        def b_sees(v: bytes = version) -> bool:
            try:
                with open(f"{pb}/shared.txt", "rb") as f:
                    return f.read() == v
            except FileNotFoundError:
                return False

        # within head-ttl (0.2 s) + the kernel's entry timeout (0.2 s); the deadline only bounds a failure
        assert wait_for(b_sees, timeout=60), f"mount b never read {version!r} that a closed"
    os.unlink(f"{pa}/shared.txt")
    assert wait_for(lambda: not os.path.exists(f"{pb}/shared.txt"), timeout=60), "mount b never saw the unlink on a"


def test_kill_9_loses_nothing_closed_or_fsynced_and_the_next_mount_cleans_up(
    app: App, home: str, tmp_path: os.PathLike[str], mounts: MountFactory
) -> None:
    m = mounts("crash")
    main = f"{m.mountpoint}/{REPO}/main"
    with open(f"{main}/closed.txt", "w") as f:
        f.write("closed before the crash")
    fd = os.open(f"{main}/synced.txt", os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"fsynced before the crash")
    os.fsync(fd)
    os.kill(m.proc.pid, signal.SIGKILL)
    assert m.proc.wait() == -signal.SIGKILL  # the mount died of the kill, not of anything else
    assert wait_for(lambda: runner.is_stale(m.mountpoint), timeout=5)
    try:
        os.close(fd)
    except OSError:
        pass
    env = env_for(home)
    try:
        out = subprocess.run(
            lakemount_cmd("mount", m.mountpoint, "--head-ttl", "0.2", "--json"), env=env, capture_output=True, text=True, timeout=90
        )
        assert out.returncode == 0, out.stderr
        pid = json.loads(out.stdout)["pid"]
        assert open(f"{main}/closed.txt").read() == "closed before the crash"
        assert open(f"{main}/synced.txt").read() == "fsynced before the crash"
        again = subprocess.run(lakemount_cmd("mount", m.mountpoint), env=env, capture_output=True, text=True, timeout=90)
        assert again.returncode == 4 and "already mounted" in again.stderr
        down = subprocess.run(lakemount_cmd("umount", m.mountpoint), env=env, capture_output=True, text=True, timeout=90)
        assert down.returncode == 0, down.stderr
        assert runner.find_mount(m.mountpoint) is None
        assert wait_for(lambda: not _alive(pid), timeout=10)
    finally:
        pid_now = runner.read_pid(runner.pid_file(home, m.mountpoint))
        if pid_now is not None:
            os.kill(pid_now, signal.SIGKILL)
        cleanup_mountpoint(m.mountpoint)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"


def test_sigterm_saves_files_still_open(app: App, mounts: MountFactory) -> None:
    m = mounts("term")
    f = open(f"{m.mountpoint}/{REPO}/main/open.txt", "wb")
    f.write(b"written, never closed")
    f.flush()
    m.proc.send_signal(signal.SIGTERM)
    m.proc.wait(30)
    assert app.catalog.read(app.catalog.repository(REPO), app.catalog.stat(REPO, "main", "open.txt")) == b"written, never closed"
    try:
        f.close()
    except OSError:
        pass
    assert runner.find_mount(m.mountpoint) is None


# ---------------------------------------------------------------------------- failures
def test_block_store_failures_are_eio_and_the_mount_keeps_serving(
    app: App, home: str, tmp_path: os.PathLike[str], mounts: MountFactory
) -> None:
    app.catalog.put(REPO, "main", "f", b"payload")
    m, main, inject = flaky_mount(mounts, os.fspath(tmp_path), REPO)

    inject("get 1000")  # the kernel retries a failed read-ahead: fail them all
    assert oserror(lambda: open(f"{main}/f", "rb").read()) == errno.EIO
    assert "injected fault: get" in m.log()  # the EIO was the injected fault's (the mount logs the first)
    inject("heal")
    assert open(f"{main}/f", "rb").read() == b"payload"
    inject("put_file 1000")
    inject("put 1000")
    with pytest.raises(OSError) as info:
        with open(f"{main}/new", "wb") as f:
            f.write(b"data")
    assert info.value.errno == errno.EIO
    assert "injected fault: put" in m.log()
    inject("heal")
    with open(f"{main}/new2", "wb") as f:
        f.write(b"fine again")
    assert open(f"{main}/new2", "rb").read() == b"fine again"
    assert "f" in os.listdir(main)
    assert "unexpected error" not in m.log()


# ---------------------------------------------------------------------------- the model, through the kernel
# At ~4 ms an operation through the kernel, the full suite affords many more runs than the fast tier: 300 x 50
# is about a minute on a 2-core machine (15,000 operations, `slow`, what CI runs), 40 x 30 (the core model's) a
# few seconds, run in every tier (10 x 30 in scripts/test.sh --fast, tests/budget.py). LAKEMOUNT_KERNEL_MODEL_EXAMPLES
# and _STEPS set the short run's budget.
KERNEL_MODEL_RUNS = (40, 30)
KERNEL_MODEL_LONG_RUNS = (300, 50)


def test_mount_behaves_like_a_local_directory(app: App, mounts: MountFactory, tmp_path: os.PathLike[str]) -> None:
    examples = int(os.environ.get("LAKEMOUNT_KERNEL_MODEL_EXAMPLES", budget.examples(KERNEL_MODEL_RUNS[0])))
    steps = int(os.environ.get("LAKEMOUNT_KERNEL_MODEL_STEPS", KERNEL_MODEL_RUNS[1]))
    _kernel_model(app, mounts, tmp_path, examples, steps)


@pytest.mark.slow
def test_mount_behaves_like_a_local_directory_at_length(app: App, mounts: MountFactory, tmp_path: os.PathLike[str]) -> None:
    _kernel_model(app, mounts, tmp_path, *KERNEL_MODEL_LONG_RUNS)


def _kernel_model(app: App, mounts: MountFactory, tmp_path: os.PathLike[str], examples: int, steps: int) -> None:
    m = mounts("model")
    made: list[FsModel] = []

    def machine() -> FsModel:
        branch = f"model{len(made)}"
        app.graveler.create_branch(REPO, branch, "main")
        reference = tempfile.mkdtemp(prefix="ref-", dir=os.fspath(tmp_path))
        made.append(FsModel(OsDriver(f"{m.mountpoint}/{REPO}/{branch}", hide=frozenset({".lakefs"})), OsDriver(reference)))
        return made[-1]

    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=steps,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
    # The run was as long as asked (hypothesis averages well over a quarter of the step budget per example).
    done = sum(fm.steps for fm in made)
    print(f"kernel model: {len(made)} machines, {done} operations")
    assert len(made) >= examples and done >= examples * steps // 4, (len(made), done)


# ---------------------------------------------------------------------------- services
def test_lakemount_up_service_mounts_at_mount_path(home: str, tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from lakemount.fuse import service

    mp = os.path.join(os.fspath(tmp_path), "up-mnt")
    monkeypatch.setenv("LAKEMOUNT_MOUNT_PATH", mp)
    monkeypatch.setenv("LAKEMOUNT_MOUNT_HEAD_TTL", "0.2")
    app = App.from_config()
    app.catalog.create_repository("demo")
    try:
        service.start_for_up(app)
        assert os.listdir(f"{mp}/demo/main") == [".lakefs"]
        with open(f"{mp}/demo/main/hello", "w") as f:
            f.write("hi")
        service.stop_for_up(app)
        assert runner.find_mount(mp) is None
        assert app.catalog.stat("demo", "main", "hello").size == 2
    finally:
        service.stop_for_up(app)
        cleanup_mountpoint(mp)


def test_up_whose_api_port_is_taken_stops_the_mount_and_names_the_address(home: str, tmp_path: os.PathLike[str]) -> None:
    # `up` with api.listen_address in use exited 1 with a bare "Address already in use" and left the
    # mount it had started (a detached process) behind.
    import socket

    mp = os.path.join(os.fspath(tmp_path), "up-mnt")
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    env = {**os.environ, "LAKEMOUNT_MOUNT_PATH": mp, "LAKEMOUNT_GATEWAYS_S3_LISTEN_ADDRESS": "127.0.0.1:0",
           "LAKEMOUNT_API_LISTEN_ADDRESS": f"127.0.0.1:{port}", "LAKEMOUNT_GATEWAYS_S3_WORKERS": "1"}
    try:
        p = subprocess.run([sys.executable, "-m", "lakemount.cli.main", "up"], env=env, capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 1, p.stderr
        assert p.stderr.strip().splitlines()[-1] == (
            f"error: cannot listen on 127.0.0.1:{port} (api.listen_address): Address already in use"), p.stderr
        assert runner.find_mount(mp) is None, "up exited and left its mount behind"
    finally:
        taken.close()
        cleanup_mountpoint(mp)


def test_a_second_up_on_the_same_home_says_up_is_running(home: str, tmp_path: os.PathLike[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # The second `up` answered "... is already mounted by lakemount (pid N); run 'lakemount umount' first",
    # advice that breaks the running `up` instead of naming it.
    from lakemount.fuse import service

    mp = os.path.join(os.fspath(tmp_path), "up-mnt")
    monkeypatch.setenv("LAKEMOUNT_MOUNT_PATH", mp)
    app = App.from_config()
    try:
        service.start_for_up(app)
        env = {**os.environ, "LAKEMOUNT_GATEWAYS_S3_LISTEN_ADDRESS": "127.0.0.1:0", "LAKEMOUNT_API_LISTEN_ADDRESS": "127.0.0.1:0"}
        p = subprocess.run([sys.executable, "-m", "lakemount.cli.main", "up"], env=env, capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 4, p.stderr
        last = p.stderr.strip().splitlines()[-1]
        assert last.startswith(f"error: {mp} (mount.path) is already mounted (pid ") and "is 'lakemount up' already running" in last, last
        assert runner.find_mount(mp) is not None  # the first one's mount is untouched
    finally:
        service.stop_for_up(app)
        cleanup_mountpoint(mp)


def test_mount_on_a_non_empty_directory_warns_that_its_files_are_hidden(home: str, tmp_path: os.PathLike[str]) -> None:
    # FUSE mounts over a non-empty directory without a word: the files seemed gone.
    mp = os.path.join(os.fspath(tmp_path), "full")
    os.makedirs(mp)
    with open(os.path.join(mp, "mine.txt"), "w") as f:
        f.write("kept\n")
    cli = [sys.executable, "-m", "lakemount.cli.main"]
    try:
        p = subprocess.run([*cli, "mount", mp], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        assert p.stderr == f"warning: {mp} is not empty: its 1 entries are hidden while the mount is there\n"
        assert runner.find_mount(mp) is not None
    finally:
        subprocess.run([*cli, "umount", mp], capture_output=True, timeout=120)
        cleanup_mountpoint(mp)
    with open(os.path.join(mp, "mine.txt")) as f:
        assert f.read() == "kept\n"


def _ops(mountpoint: str) -> dict[str, int]:
    counts = {}
    with open(f"{mountpoint}/.lakefs/stats") as f:
        for line in f:
            if line.startswith("lakemount_fuse_ops_total{") or line.startswith("lakemount_fuse_kernel_"):
                name, value = line.rsplit(" ", 1)
                name = name.removeprefix('lakemount_fuse_ops_total{op="').removesuffix('"}').removeprefix("lakemount_fuse_")
                counts[name] = int(value)
    return counts


def test_read_only_closes_skip_flush_and_immutable_listings_stay_in_the_kernel(app: App, mounts: MountFactory) -> None:
    """The open-reply shim (lakemount/fuse/_kflags.c) is built and the kernel honours its flags."""
    from lakemount.fuse import _kflags  # noqa: F401  (install.sh installs libfuse3-dev: the build must not be skipped)

    for i in range(30):
        app.catalog.put(REPO, "main", f"d/f{i:02d}", f"{i}\n".encode())
    commit = app.graveler.commit(REPO, "main", "thirty").commit.id
    m = mounts()
    at_commit, on_branch = f"{m.mountpoint}/{REPO}/{commit}/d", f"{m.mountpoint}/{REPO}/main/d"
    assert sorted(os.listdir(at_commit)) == [f"f{i:02d}" for i in range(30)]
    for _ in range(3):
        with open(f"{at_commit}/f07") as f:
            assert f.read() == "7\n"
    before = _ops(m.mountpoint)
    for _ in range(5):
        with open(f"{on_branch}/f08") as f:  # read-only on a branch: no flush either
            assert f.read() == "8\n"
        assert len(os.listdir(at_commit)) == 30
    after = _ops(m.mountpoint)
    assert after.get("flush", 0) == before.get("flush", 0), (before, after)
    assert after.get("readdir", 0) == before.get("readdir", 0), "a commit's listing was read again"
    assert after["kernel_noflush_opens_total"] >= before["kernel_noflush_opens_total"] + 5
    assert after["kernel_cached_dir_opens_total"] >= before["kernel_cached_dir_opens_total"] + 5

    # Writable handles still save on close, and a branch's listing is never served stale from the cache.
    with open(f"{on_branch}/new", "w") as f:
        f.write("written\n")
    assert app.catalog.read(app.graveler.get_repository(REPO), app.catalog.stat(REPO, "main", "d/new")) == b"written\n"
    assert "new" in os.listdir(on_branch)
    assert _ops(m.mountpoint)["flush"] > after.get("flush", 0)


def _counter(mountpoint: str, name: str) -> int:
    with open(f"{mountpoint}/.lakefs/stats") as f:
        for line in f:
            if line.startswith(f"lakemount_fuse_{name}_total "):
                return int(line.split()[1])
    return 0


def test_a_childs_close_of_an_inherited_descriptor_saves_nothing_and_the_openers_close_saves(
    app: App, mounts: MountFactory
) -> None:
    """A child process that closes a descriptor it inherited (Java's process spawn closes every one: Hadoop's
    local file system spawns ``chmod`` per file it makes) sends a FLUSH of the parent's handle; it saves
    nothing, where it saved the file half-written.  The opener's close, from another of its threads, saves."""
    from lakemount.fuse import kflags

    assert kflags.closer(0) == 0 and kflags._wraps_flush, "the shim does not see FLUSH requests"
    m = mounts()
    path = f"{m.mountpoint}/{REPO}/main/half.txt"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, b"first half\n")
        saved, foreign = _counter(m.mountpoint, "saved_files"), _counter(m.mountpoint, "foreign_flushes")
        for _ in range(3):  # each child holds the descriptor and closes it as it exits
            subprocess.run(["true"], pass_fds=(fd,), check=True, timeout=30)
        assert _counter(m.mountpoint, "foreign_flushes") == foreign + 3, "the children's closes were not told apart"
        assert _counter(m.mountpoint, "saved_files") == saved, "a child's close saved the half-written file"
        os.write(fd, b"second half\n")
    finally:
        closer = threading.Thread(target=os.close, args=(fd,))  # the opener's close, from another thread of it
        closer.start()
        closer.join(30)
    assert _counter(m.mountpoint, "saved_files") == saved + 1
    assert _counter(m.mountpoint, "foreign_flushes") == foreign + 3
    entry = app.catalog.stat(REPO, "main", "half.txt")
    assert app.catalog.read(app.graveler.get_repository(REPO), entry) == b"first half\nsecond half\n"


def test_a_directory_being_filled_answers_the_kernels_getattr_after_each_create_without_python(
    app: App, mounts: MountFactory
) -> None:
    """Each create makes the kernel drop its directory's attributes and ask for them (a GETATTR) before the
    next name's permission check: the adapter hands the shim the directory's attributes right after the
    create and the shim answers that GETATTR (issue 36, stop 51).  What ``stat`` shows is what the mount
    would have answered: the create's mtime, a link per subdirectory, also after a mkdir and an rmdir."""
    from lakemount.fuse import kflags

    assert kflags._wraps_flush, "the shim does not see the session's requests"
    # The shim keeps attributes for their timeout, capped at 1 s: the tests' --head-ttl 0.2 made that 0.2 s, so
    # how many GETATTRs reached Python depended on how fast the next create came (6 in a full run beside two
    # loops, stop 51); a long --head-ttl leaves the 1 s cap, and no head check while the directory fills.
    m = mounts(args=("--head-ttl", "3600"))
    d = f"{m.mountpoint}/{REPO}/main/fill"
    os.mkdir(d)
    before = _ops(m.mountpoint)
    for i in range(50):
        with open(f"{d}/f{i:02d}", "wb") as f:
            f.write(b"x" * 1024)
    after = _ops(m.mountpoint)
    answered = after["kernel_kept_dir_getattrs"] - before["kernel_kept_dir_getattrs"]
    asked = after.get("getattr", 0) - before.get("getattr", 0)
    assert answered >= 45, (answered, asked)  # 49 GETATTRs of the directory, one per create after the first
    assert asked <= 5, (f"{asked} GETATTRs reached Python for 50 creates",  # 50 before stop 51
                        {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)})

    os.mkdir(f"{d}/sub")
    was = os.stat(d).st_mtime_ns
    with open(f"{d}/g", "w") as f:  # the mkdir's attributes (nlink 3) then the create's mtime
        f.write("g\n")
    st = os.stat(d)
    assert st.st_nlink == 3 and st.st_mtime_ns > was, (st, was)
    os.rmdir(f"{d}/sub")
    was = os.stat(d).st_mtime_ns
    with open(f"{d}/h", "w") as f:
        f.write("h\n")
    st = os.stat(d)
    assert st.st_nlink == 2 and st.st_mtime_ns > was, (st, was)
    assert sorted(os.listdir(d)) == sorted([f"f{i:02d}" for i in range(50)] + ["g", "h"])


def _absent_lookups(mountpoint: str) -> int:
    with open(f"{mountpoint}/.lakefs/stats") as f:
        for line in f:
            if line.startswith('lakemount_fuse_op_errors_total{op="lookup",errno="ENOENT"} '):
                return int(line.split()[1])
    return 0


def test_a_name_found_absent_is_kept_by_the_kernel_until_the_mount_learns_otherwise(app: App, mounts: MountFactory) -> None:
    """Hadoop's local file system asks for each path it is about to make, again and again: a name the mount
    answered absent from what it holds fresh is kept by the kernel as a negative entry (at most
    ``--head-ttl``), so asking again costs no round trip.  A create through the mount shows at once, a
    file written by another process within ``--head-ttl``, and one once the mount changes the branch's
    content itself (a reset through the control file) at once."""
    ttl = 5.0
    m = mounts(args=("--head-ttl", str(ttl)))
    d = f"{m.mountpoint}/{REPO}/main/d"
    os.mkdir(d)  # its listing is fresh in the mount (empty)
    before, negatives = _absent_lookups(m.mountpoint), _counter(m.mountpoint, "kernel_negative_entries")
    t0 = time.monotonic()
    for _ in range(20):
        assert not os.path.exists(f"{d}/x")
    if time.monotonic() - t0 < ttl / 2:  # every stat within the negative entry's life: one round trip
        assert _absent_lookups(m.mountpoint) - before == 1, "each stat of an absent name reached the mount"
    assert _counter(m.mountpoint, "kernel_negative_entries") > negatives

    with open(f"{d}/y", "w") as f:  # absent a moment ago; made through the mount: there at once
        assert not os.path.exists(f"{d}/y2")
        f.write("y\n")
    assert os.path.exists(f"{d}/y")

    app.catalog.put(REPO, "main", "d/x", b"elsewhere\n")  # another process (SQLite: no change notice)
    assert wait_for(lambda: os.path.exists(f"{d}/x"), timeout=2 * ttl + 5), "a file made elsewhere never showed"

    # At the branch's root: no entry above it whose invalidation would take the negative one along.
    w = f"{m.mountpoint}/{REPO}/main/w"
    assert not os.path.exists(w)  # a negative entry, for up to ttl
    app.catalog.put(REPO, "main", "w", b"elsewhere, then a reset here\n")
    t1 = time.monotonic()
    write_control(f"{m.mountpoint}/{REPO}/main/.lakefs/reset", "d/y")  # the content changed: the kernel must ask again
    assert not os.path.exists(f"{d}/y")
    assert wait_for(lambda: os.path.exists(w), timeout=1.0), "w hidden by a negative entry past the reset"
    assert time.monotonic() - t1 < ttl, "too slow to tell an invalidated entry from an expired one"


@pytest.mark.skipif(os.geteuid() != 0, reason="only root may set a mount's read-ahead window")
def test_sequential_reads_reach_the_daemon_in_large_requests(app: App, mounts: MountFactory) -> None:
    data = os.urandom(16 << 20)
    app.catalog.put(REPO, "main", "seq.bin", data)
    commit = app.graveler.commit(REPO, "main", "sequential").commit.id
    m = mounts()
    device = runner.find_mount(m.mountpoint).device  # type: ignore[union-attr]
    with open(f"/sys/class/bdi/{device}/read_ahead_kb") as f:
        assert int(f.read()) == 1024
    before = _ops(m.mountpoint).get("read", 0)
    with open(f"{m.mountpoint}/{REPO}/{commit}/seq.bin", "rb", buffering=0) as f:
        assert b"".join(iter(lambda: f.read(1 << 20), b"")) == data
    # 16 MiB in 1 MiB requests (with the kernel's 128 KiB window it takes 128).
    assert _ops(m.mountpoint)["read"] - before <= 24

    small = mounts("small", args=("--read-ahead-kb", "0"))
    device = runner.find_mount(small.mountpoint).device  # type: ignore[union-attr]
    with open(f"/sys/class/bdi/{device}/read_ahead_kb") as f:
        assert int(f.read()) == 128  # 0 leaves the kernel's default


def test_umount_of_a_busy_mount_says_so_and_lazy_detaches_keeping_open_files(app: App, home: str, tmp_path: os.PathLike[str]) -> None:
    """Plain ``umount`` refuses a busy mount and names ``--lazy``; ``--lazy`` detaches (exit 0) while an
    open file keeps working and is saved when closed, then the mount process exits."""
    mp = os.path.join(os.fspath(tmp_path), "busy")
    os.makedirs(mp)
    env = env_for(home)
    pid = None
    try:
        up = subprocess.run(lakemount_cmd("mount", mp, "--head-ttl", "0.2", "--json"), env=env, capture_output=True, text=True, timeout=90)
        assert up.returncode == 0, up.stderr
        pid = json.loads(up.stdout)["pid"]
        f = open(f"{mp}/{REPO}/main/open.txt", "w")
        f.write("written while detached")
        f.flush()
        busy = subprocess.run(lakemount_cmd("umount", mp), env=env, capture_output=True, text=True, timeout=90)
        assert busy.returncode == 9 and "--lazy" in busy.stderr, busy.stderr
        assert runner.find_mount(mp) is not None
        lazy = subprocess.run(lakemount_cmd("umount", "--lazy", mp, "--json"), env=env, capture_output=True, text=True, timeout=90)
        assert lazy.returncode == 0, lazy.stderr
        out = json.loads(lazy.stdout)
        assert out["pid"] == pid and out["finished"] is False
        assert runner.find_mount(mp) is None and _alive(pid)
        f.write(" and closed")
        f.close()
        assert wait_for(lambda: not _alive(pid), timeout=30)
        assert app.catalog.read(app.catalog.repository(REPO), app.catalog.stat(REPO, "main", "open.txt")) == b"written while detached and closed"
        again = subprocess.run(lakemount_cmd("mount", mp, "--json"), env=env, capture_output=True, text=True, timeout=90)
        assert again.returncode == 0, again.stderr
        pid = json.loads(again.stdout)["pid"]
        idle = subprocess.run(lakemount_cmd("umount", "-l", mp), env=env, capture_output=True, text=True, timeout=90)
        assert idle.returncode == 0 and idle.stdout.startswith("unmounted"), (idle.stdout, idle.stderr)
        assert wait_for(lambda: not _alive(pid), timeout=10)
    finally:
        if pid is not None and _alive(pid):
            os.kill(pid, signal.SIGKILL)
        cleanup_mountpoint(mp)


def test_tar_of_a_branch_and_a_tag_succeeds_and_round_trips(app: App, mounts: MountFactory, tmp_path: os.PathLike[str]) -> None:
    """GNU tar checks each file's ctime after reading it: control files must not claim to change on every stat,
    or ``tar c`` of a branch warns "file changed as we read it" and exits 1, failing backup scripts."""
    m = mounts()
    main = f"{m.mountpoint}/{REPO}/main"
    sh(f"mkdir -p {main}/d && echo one > {main}/d/a && head -c 300000 /dev/urandom > {main}/b.bin")
    with open(f"{main}/.lakefs/commit", "w") as f:
        f.write("for tar")
    app.catalog.create_tag(REPO, "v1", "main")
    out = os.path.join(os.fspath(tmp_path), "out")
    for ref in ("main", "v1"):
        os.makedirs(f"{out}/{ref}")
        time.sleep(1.1)  # a clock tick between stats, as a slow tar over many files would see
        made = sh(f"tar cf {out}/{ref}.tar -C {m.mountpoint}/{REPO} {ref} && tar xf {out}/{ref}.tar -C {out}/{ref}", check=False)
        assert made.returncode == 0 and "changed as we read it" not in made.stderr, made.stderr
        assert open(f"{out}/{ref}/{ref}/d/a").read() == "one\n"
        assert open(f"{out}/{ref}/{ref}/b.bin", "rb").read() == open(f"{main}/b.bin", "rb").read()


def test_hard_links_through_the_kernel_and_in_a_committed_checkout(app: App, mounts: MountFactory) -> None:
    m = mounts()
    main = f"{m.mountpoint}/{REPO}/main"
    sh(f"mkdir -p {main}/src/sub && echo one > {main}/src/a && echo two > {main}/src/sub/b")
    sh(f"ln {main}/src/a {main}/a-link")
    a, link = os.stat(f"{main}/src/a"), os.stat(f"{main}/a-link")
    assert a.st_ino == link.st_ino and a.st_nlink == link.st_nlink == 2
    sh(f"echo more >> {main}/a-link")  # a write through one name shows through the other
    assert open(f"{main}/src/a").read() == "one\nmore\n"
    sh(f"cp -al {main}/src {main}/snap")  # a snapshot of hard links, as rsync --link-dest makes
    assert os.stat(f"{main}/snap/sub/b").st_ino == os.stat(f"{main}/src/sub/b").st_ino
    assert os.stat(f"{main}/src/a").st_nlink == 3
    assert oserror(lambda: os.link(f"{main}/src", f"{main}/dirlink")) == errno.EPERM
    app.graveler.create_branch(REPO, "dev", "main")
    assert oserror(lambda: os.link(f"{main}/src/a", f"{m.mountpoint}/{REPO}/dev/a")) == errno.EXDEV
    with open(f"{main}/.lakefs/commit", "w") as f:
        f.write("links")
    cid = app.graveler.resolve(REPO, "main").commit_id
    checkout = f"{m.mountpoint}/{REPO}/{cid}"
    b1, b2 = os.stat(f"{checkout}/src/sub/b"), os.stat(f"{checkout}/snap/sub/b")
    assert b1.st_ino == b2.st_ino and b1.st_nlink == 2
    assert os.stat(f"{checkout}/a-link").st_nlink == 3 and open(f"{checkout}/snap/a").read() == "one\nmore\n"
    assert oserror(lambda: os.link(f"{checkout}/src/a", f"{checkout}/x")) == errno.EROFS
    os.unlink(f"{main}/src/a")
    assert os.stat(f"{main}/a-link").st_nlink == 2 and os.stat(f"{checkout}/a-link").st_nlink == 3
    assert app.catalog.stat(REPO, "main", "snap/a").address == app.catalog.stat(REPO, "main", "a-link").address
