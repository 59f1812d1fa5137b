"""A mount shared with other local users (``allow_other``) applies each uid's lakemount user's policies.

Before, a root mount (``allow_other`` by default) let every local user read
every repository and write wherever the file modes allowed: the policies the
gateway and the API enforce did not exist for the mount.  Now the mount's own
user and root act as the mount; a uid mapped in ``mount.users`` gets its
lakemount user's ``ReadRepo``/``WriteRepo``; any other uid gets EACCES.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable

import pytest

from lakemount.app import App
from lakemount.fuse import runner
from tests.fuse.conftest import REPO
from tests.fuse.mounting import env_for, needs_fuse, start, stop

pytestmark = [*needs_fuse, pytest.mark.skipif(os.getuid() != 0, reason="switches to other uids: needs root")]

READER, WRITER, STRANGER = 54321, 54322, 54323


def as_uid(uid: int, cwd: str, ops: dict[str, Callable[[], object]]) -> dict[str, str]:
    """Run each of ``ops`` in a child process that changed to ``cwd`` and then to ``uid`` (no groups).

    Returns ``{name: "ok" | errno name}``.  ``cwd`` is entered as root first, so
    the test's private temporary directories above it need not be open to ``uid``.
    """
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: only system calls, then _exit
        try:
            os.close(r)
            os.chdir(cwd)
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            out = {}
            for name, op in ops.items():
                try:
                    op()
                    out[name] = "ok"
                except OSError as exc:
                    out[name] = errno.errorcode.get(exc.errno or 0, str(exc))
            os.write(w, json.dumps(out).encode())
            os._exit(0)
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, never raised in a forked pytest
            os.write(w, json.dumps({"child failed": repr(exc)}).encode())
            os._exit(1)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(data)


def read(path: str) -> Callable[[], object]:
    def op() -> bytes:
        with open(path, "rb") as f:
            return f.read()
    return op


def write(path: str, flags: int = os.O_WRONLY | os.O_CREAT) -> Callable[[], object]:
    def op() -> None:
        fd = os.open(path, flags, 0o666)
        try:
            os.write(fd, b"x")
        finally:
            os.close(fd)
    return op


def test_other_uids_get_their_mapped_users_policies_and_unmapped_ones_nothing(
    app: App, home: str, tmp_path: os.PathLike[str]
) -> None:
    auth = app.auth
    auth.create_user("reader")
    auth.attach_policy("reader", "Analyst")  # ReadRepo only
    auth.create_user("writer")
    auth.attach_policy("writer", "Developer")
    app.catalog.put(REPO, "main", "f.txt", b"hello")
    mp = os.path.join(os.fspath(tmp_path), "mnt")
    users = f"{READER}=reader,{WRITER}=writer"
    m = start(home, mp, ["--allow-other"], env=env_for(home, LAKEMOUNT_MOUNT_USERS=users))
    try:
        options = runner.find_mount(mp)
        assert options is not None
        with open("/proc/mounts") as f:
            line = next(line for line in f if line.split()[1] == mp)
        assert "allow_other" in line.split()[3].split(","), line  # root needs no user_allow_other in /etc/fuse.conf
        # A directory and a file every uid may write as far as modes go: only the policies can refuse.
        os.mkdir(f"{mp}/{REPO}/main/open", 0o777)
        os.chmod(f"{mp}/{REPO}/main/open", 0o777)
        write(f"{mp}/{REPO}/main/open/shared.txt")()
        os.chmod(f"{mp}/{REPO}/main/open/shared.txt", 0o666)
        base = f"{REPO}/main"

        reader = as_uid(READER, mp, {
            "list root": lambda: os.listdir("."),
            "list branch": lambda: os.listdir(base),
            "read": read(f"{base}/f.txt"),
            "create": write(f"{base}/open/new-by-reader.txt"),
            "write": write(f"{base}/open/shared.txt", os.O_WRONLY),
            "mkdir": lambda: os.mkdir(f"{base}/open/dir-by-reader"),
            "unlink": lambda: os.unlink(f"{base}/open/shared.txt"),
            "commit": write(f"{base}/.lakefs/commit", os.O_WRONLY),
        })
        assert reader == {"list root": "ok", "list branch": "ok", "read": "ok", "create": "EACCES", "write": "EACCES",
                          "mkdir": "EACCES", "unlink": "EACCES", "commit": "EACCES"}, reader

        writer = as_uid(WRITER, mp, {
            "read": read(f"{base}/f.txt"),
            "create": write(f"{base}/open/new-by-writer.txt"),
            "write": write(f"{base}/open/shared.txt", os.O_WRONLY),
        })
        assert writer == {"read": "ok", "create": "ok", "write": "ok"}, writer

        stranger = as_uid(STRANGER, mp, {
            "list root": lambda: os.listdir("."),
            "list branch": lambda: os.listdir(base),
            "read": read(f"{base}/f.txt"),
            "create": write(f"{base}/open/new-by-stranger.txt"),
            "write": write(f"{base}/open/shared.txt", os.O_WRONLY),
        })
        assert stranger == dict.fromkeys(stranger, "EACCES") and len(stranger) == 5, stranger

        # The mount's own user (root here) is the mount itself, as before.
        assert read(f"{mp}/{REPO}/main/f.txt")() == b"hello"
        names = set(os.listdir(f"{mp}/{REPO}/main/open"))
        assert names == {"shared.txt", "new-by-writer.txt"}, names
    finally:
        stop(m)
    assert app.catalog.stat(REPO, "main", "open/new-by-writer.txt").size == 1


def test_a_bad_user_mapping_is_refused_before_mounting(app: App, home: str, tmp_path: os.PathLike[str]) -> None:
    from lakemount.errors import InvalidArgument

    mp = os.path.join(os.fspath(tmp_path), "mnt")
    with pytest.raises(InvalidArgument, match="mount.users: no local user named 'no-such-user-here'"):
        start(home, mp, ["--allow-other"], env=env_for(home, LAKEMOUNT_MOUNT_USERS="no-such-user-here=reader"))
    assert runner.find_mount(mp) is None


def _gauges(mp: str) -> dict[str, float]:
    with open(f"{mp}/.lakefs/stats") as f:
        pairs = (line.split() for line in f if line.startswith("lakemount_fuse_kernel_"))
        return {name.removeprefix("lakemount_fuse_"): float(value) for name, value in pairs}


def test_the_mount_clears_setuid_and_setgid_as_the_kernel_would_once_it_leaves_that_to_the_mount(
    app: App, home: str, tmp_path: os.PathLike[str]
) -> None:
    """Under HANDLE_KILLPRIV_V2 (the shim adds it to the INIT reply) the kernel asks no security.capability per
    write and no longer clears set-user-ID/set-group-ID itself: the mount does, on a write, truncate, O_TRUNC
    open by a uid other than root, and on any chown; a root write keeps the bits, as CAP_FSETID does."""
    app.auth.create_user("writer")
    app.auth.attach_policy("writer", "Developer")
    mp = os.path.join(os.fspath(tmp_path), "mnt")
    m = start(home, mp, ["--allow-other"], env=env_for(home, LAKEMOUNT_MOUNT_USERS=f"{WRITER}=writer"))
    try:
        base = f"{mp}/{REPO}/main"
        assert _gauges(mp)["kernel_kills_suidgid_here"] == 1  # the kernel took the flag: the kill is the mount's
        before = _gauges(mp)["kernel_capability_getxattrs"]
        fd = os.open(f"{base}/many", os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            for _ in range(256):
                os.write(fd, b"x" * 4096)
        finally:
            os.close(fd)
        asked = _gauges(mp)["kernel_capability_getxattrs"] - before
        assert asked <= 2, f"{asked:.0f} security.capability lookups for 256 writes"  # 256 without the flag

        modes = {"w": 0o6777, "t": 0o6777, "o": 0o6777, "c": 0o6777, "root": 0o6777, "g-noexec": 0o2767}
        for name, mode in modes.items():
            write(f"{base}/{name}")()
            os.chmod(f"{base}/{name}", mode)
        done = as_uid(WRITER, mp, {
            "w": write(f"{REPO}/main/w", os.O_WRONLY),
            "t": lambda: os.truncate(f"{REPO}/main/t", 0),
            "o": lambda: os.close(os.open(f"{REPO}/main/o", os.O_WRONLY | os.O_TRUNC)),
            "g-noexec": write(f"{REPO}/main/g-noexec", os.O_WRONLY),
        })
        assert done == dict.fromkeys(done, "ok") and len(done) == 4, done
        write(f"{base}/root", os.O_WRONLY)()
        os.chown(f"{base}/c", WRITER, -1)
        seen = {name: os.stat(f"{base}/{name}").st_mode & 0o7777 for name in modes}
        want = {"w": 0o777, "t": 0o777, "o": 0o777, "c": 0o777, "root": 0o6777, "g-noexec": 0o2767}
        assert seen == want, {k: oct(v) for k, v in seen.items()}
    finally:
        stop(m)
    staged = {name: app.catalog.stat(REPO, "main", name).mode & 0o7777 for name in modes}
    assert staged == want, {k: oct(v) for k, v in staged.items()}


def test_a_directorys_attributes_kept_after_a_create_are_given_to_the_creators_uid_only(
    app: App, home: str, tmp_path: os.PathLike[str]
) -> None:
    """After a create the shim answers the kernel's next GETATTR of the directory from the attributes the
    mount kept (stop 51), but only to the uid that created: any other uid's GETATTR still asks the mount,
    which applies its policy (an unmapped uid: EACCES), and drops what was kept."""
    mp = os.path.join(os.fspath(tmp_path), "mnt")
    # The shim keeps attributes for their timeout, capped at 1 s: the tests' --head-ttl 0.2 made that 0.2 s, which
    # a loaded machine overran between the create and the stat (1 run in 20 of stop 51's loop).
    m = start(home, mp, ["--allow-other", "--head-ttl", "3600"])
    try:
        d = f"{mp}/{REPO}/main/d"
        os.mkdir(d)
        write(f"{d}/a")()
        answered = _gauges(mp)["kernel_kept_dir_getattrs"]
        os.stat(d)  # the creator: answered by the shim
        assert _gauges(mp)["kernel_kept_dir_getattrs"] == answered + 1, "the mount kept nothing for its own uid"
        write(f"{d}/b")()  # kept again, for root
        done = as_uid(STRANGER, mp, {"stat": lambda: os.stat(f"{REPO}/main/d")})
        assert done == {"stat": "EACCES"}, done
        assert _gauges(mp)["kernel_kept_dir_getattrs"] == answered + 1, "another uid was answered from what root's create kept"
        assert os.stat(d).st_nlink == 2  # root again: asks the mount (the stranger's GETATTR dropped what was kept)
        assert _gauges(mp)["kernel_kept_dir_getattrs"] == answered + 1
    finally:
        stop(m)
