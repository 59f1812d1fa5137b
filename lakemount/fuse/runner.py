"""One mount's life in this process: stale-mount cleanup, mounting, serving, signals, saving, unmounting.

``run_mount`` blocks until the file system is unmounted (``lakemount umount``,
``fusermount3 -u``: in every mount namespace holding it; a copy ``unshare -m`` made
while it was mounted keeps it serving there) or the process gets SIGTERM/SIGINT; either way every file
still open for writing is saved before the process exits.  A mount left behind
by a killed process (the kernel answers ENOTCONN on it) is lazily unmounted
first, so a restarted mount takes over its mountpoint.  A pid file under
``LAKEMOUNT_HOME/run`` names the serving process, for ``umount`` to wait on.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from lakemount.app import App
from lakemount.errors import AlreadyExists, ConfigError, InvalidArgument, Unavailable
from lakemount.fuse import kflags, passthrough
from lakemount.fuse.access import MountAccess, parse_users
from lakemount.fuse.core import FileSystem, MountOptions
from lakemount.node import pid_file, read_pid

log = logging.getLogger(__name__)

FSNAME: Final = "lakemount"
UNMOUNT_WAIT: Final = 60.0
# How long ``umount --lazy`` waits for a mount with nothing open to finish before it reports a detach only.
LAZY_UNMOUNT_WAIT: Final = 3.0


@dataclass(frozen=True, slots=True)
class MountEntry:
    """A line of /proc/self/mountinfo that concerns us."""

    mountpoint: str
    fstype: str
    source: str
    device: str = ""  # major:minor, the name of its backing device info under /sys/class/bdi


def unescape(field: str) -> str:
    """A /proc/self/mountinfo field with its ``\\ooo`` octal escapes (space, tab, newline, backslash) decoded."""
    # mountinfo escapes space, tab, newline and backslash as \ooo octal.
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1 : i + 4].isdigit() and len(field[i + 1 : i + 4]) == 3:
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def find_mount(mountpoint: str) -> MountEntry | None:
    """The mount at ``mountpoint`` (the last one stacked there), or None."""
    target = os.path.abspath(mountpoint)
    found = None
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fields = left.split()
                rfields = right.split()
                if len(fields) >= 5 and len(rfields) >= 2 and unescape(fields[4]) == target:
                    found = MountEntry(target, rfields[0], rfields[1], fields[2])
    except OSError:
        return None
    return found


def set_read_ahead(mountpoint: str, kb: int) -> bool:
    """Set the kernel's read-ahead window for the mount at ``mountpoint`` to ``kb`` KiB.

    The kernel starts a FUSE mount at 128 KiB, so a sequential read reaches
    the daemon as 128 KiB requests; at 1024 KiB they are 1 MiB (the most a
    request carries), an eighth of the round trips, and a first read of a
    local-store file here went from about 600 to 1,170 MiB/s.  Only root may
    write the setting; anyone else keeps the kernel's default (logged).
    """
    entry = find_mount(mountpoint)
    if kb <= 0 or entry is None or not entry.device:
        return False
    path = f"/sys/class/bdi/{entry.device}/read_ahead_kb"
    try:
        with open(path, "w") as f:
            f.write(str(kb))
    except OSError as exc:
        log.info("kernel read-ahead of %s stays at its default: %s: %s", mountpoint, path, exc.strerror)
        return False
    return True


def is_stale(mountpoint: str) -> bool:
    """True if a FUSE mount at ``mountpoint`` has lost its process (the kernel answers ENOTCONN)."""
    try:
        os.stat(mountpoint)
    except OSError as exc:
        return exc.errno in (errno.ENOTCONN, errno.ECONNABORTED)
    return False


FUSECTL: Final = "/sys/fs/fuse/connections"


def abort_connection(mountpoint: str) -> bool:
    """Abort the kernel's FUSE connection of the mount at ``mountpoint`` (fusectl's ``abort``); True if done.

    What frees a mount whose process was killed while one of its threads waited in the kernel: a reverse
    invalidation of a directory waits for the directory's lock, which a syscall in flight to the dead process
    holds (a rename), so the killed process can never exit and its file descriptor never closes.  Aborting
    fails every request in flight (ECONNABORTED) and lets it go.  Mounts fusectl there if needed (root).
    """
    entry = find_mount(mountpoint)
    if entry is None or not entry.fstype.startswith("fuse") or ":" not in entry.device:
        return False
    major, minor = (int(x) for x in entry.device.split(":"))
    name = str((major << 20) | minor)
    if not os.path.isdir(os.path.join(FUSECTL, name)):
        subprocess.run(["mount", "-t", "fusectl", "none", FUSECTL], capture_output=True, check=False)
    try:
        with open(os.path.join(FUSECTL, name, "abort"), "w") as f:
            f.write("1")
    except OSError as exc:
        log.warning("%s: cannot abort its FUSE connection %s: %s", mountpoint, name, exc.strerror)
        return False
    log.warning("%s: aborted its FUSE connection %s (its process could not exit)", mountpoint, name)
    return True


def lazy_unmount(mountpoint: str) -> None:
    """Detach the mount at ``mountpoint`` now (busy or stale); raises ``Unavailable`` if that fails."""
    _unmount(mountpoint, lazy=True)


def _unmount(mountpoint: str, *, lazy: bool) -> None:
    tool = shutil.which("fusermount3") or shutil.which("fusermount")
    if tool is not None:
        cmd = [tool, "-u", *(["-z"] if lazy else []), mountpoint]
    else:
        cmd = ["umount", *(["-l"] if lazy else []), mountpoint]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        message = (proc.stderr or proc.stdout).strip()
        if "busy" in message.lower():
            raise Unavailable(
                f"{mountpoint} is busy (files are open there; close them, or detach now with `lakemount umount --lazy`): {message}"
            )
        raise Unavailable(f"cannot unmount {mountpoint}: {message or 'exit status ' + str(proc.returncode)}")




def prepare_mountpoint(home: str, mountpoint: str) -> str:
    """Make ``mountpoint`` ready: create it, clean a stale mount; ``AlreadyExists`` if a live mount is there."""
    mp = os.path.abspath(mountpoint)
    entry = find_mount(mp)
    if entry is not None:
        if is_stale(mp):
            log.warning("%s: cleaning a stale mount left by a dead process", mp)
            lazy_unmount(mp)
        else:
            pid = read_pid(pid_file(home, mp))
            owner = f" by lakemount (pid {pid})" if pid else f" ({entry.fstype} {entry.source})"
            raise AlreadyExists(f"{mp} is already mounted{owner}; run 'lakemount umount {mp}' first")
    try:
        os.makedirs(mp, exist_ok=True)
    except OSError as exc:
        raise InvalidArgument(f"cannot use mountpoint {mp}: {exc.strerror}") from None
    if not os.path.isdir(mp):
        raise InvalidArgument(f"mountpoint {mp} is not a directory")
    return mp


def build_filesystem(app: App, options: MountOptions) -> FileSystem:
    """Wire a filesystem core from the composition root's stores and caches."""
    from lakemount.fuse.access import parse_users
    from lakemount.fuse.auditing import MountAudit

    cache = app.cache
    audit = None
    if app.audit is not None:
        app.start()  # the audit flusher; counts, at once, the trail a crashed mount of this host left unwritten
        audit = MountAudit(app.audit, parse_users(app.config.mount.users, owners=frozenset({os.getuid()})))
    return FileSystem(app.catalog, app.catalog.block_source(), cache.ram, cache.disk, options, cache_stats=cache.stats,
                      audit=audit)


def mount_options(
    app: App, *, ref: tuple[str, str] | None, head_ttl: float | None, read_ahead_kb: int | None = None, notify: bool = True,
    writeback: bool | None = None, mountpoint: str = "",
) -> MountOptions:
    """The ``MountOptions`` for a mount of ``app`` at ``mountpoint``; flags override the ``mount`` config section.

    With write-back the journal (and the spool of written files, which become its data files) lives under
    ``mount.journal_dir``, one directory per mountpoint, so a restarted mount finds what the last one left.
    Raises ``InvalidArgument`` for a negative ``head_ttl`` or ``read_ahead_kb``.
    """
    home = app.config.home
    ttl = float(app.config.mount.head_ttl if head_ttl is None else head_ttl)
    if ttl < 0:
        raise InvalidArgument("--head-ttl must be >= 0")
    ra = int(app.config.mount.read_ahead_kb if read_ahead_kb is None else read_ahead_kb)
    if ra < 0:
        raise InvalidArgument("--read-ahead-kb must be >= 0")
    cfg = app.config.mount
    if cfg.passthrough not in passthrough.MODES:
        raise ConfigError(f"mount.passthrough: expected auto, on or off, got {cfg.passthrough!r}", "mount.passthrough",
                          "configuration")
    wb = cfg.writeback if writeback is None else writeback
    journal = ""
    spool = os.path.join(home, "tmp", f"mount-{os.getpid()}")
    if wb:
        slug = os.path.basename(pid_file(home, mountpoint or "/".join(ref or ("all",))))[len("mount-"):-len(".pid")]
        journal = os.path.join(cfg.journal_dir or os.path.join(home, "journal"), slug)
        spool = os.path.join(journal, "spool")
    return MountOptions(
        writeback=wb,
        journal_dir=journal,
        journal_bytes=cfg.journal_bytes,
        journal_fsync=cfg.journal_fsync,
        writeback_retry=cfg.writeback_retry,
        passthrough=cfg.passthrough,
        spool_dir=spool,
        ref=ref,
        head_ttl=ttl,
        recovered_dir=os.path.join(home, "recovered"),
        read_ahead_kb=ra,
        notify=notify,
    )


def clean_dead_spools(home: str) -> None:
    """Remove temp directories of mount processes that no longer exist (their content was saved or kept aside)."""
    tmp = os.path.join(home, "tmp")
    with contextlib.suppress(OSError):
        for name in os.listdir(tmp):
            if not name.startswith("mount-"):
                continue
            try:
                pid = int(name.split("-", 1)[1])
            except ValueError:
                continue
            try:
                os.kill(pid, 0)
                continue
            except ProcessLookupError:
                pass
            except PermissionError:
                continue
            shutil.rmtree(os.path.join(tmp, name), ignore_errors=True)


def run_mount(
    app: App,
    mountpoint: str,
    options: MountOptions,
    *,
    allow_other: bool = False,
    threads: int = 16,
    ready: Callable[[], None] | None = None,
) -> None:
    """Mount, serve until unmounted or signalled, save open files, unmount.  Raises before mounting on bad input."""
    import pyfuse3
    import trio

    from lakemount.fuse.adapter import FuseOperations

    home = app.config.home
    access = shared_access(app) if allow_other else None
    mp = prepare_mountpoint(home, mountpoint)
    clean_dead_spools(home)
    fs = build_filesystem(app, options)
    ops = FuseOperations(fs, threads=threads, access=access)
    fuse_options = set(pyfuse3.default_options) | {f"fsname={FSNAME}", f"subtype={FSNAME}"}
    if allow_other:
        # As root the kernel takes allow_other without /etc/fuse.conf's user_allow_other (fusermount3 asks for it
        # from other users only); the access control below is what keeps other users to their policies.
        fuse_options.add("allow_other")
    kflags.want_passthrough(passthrough.wanted(options.passthrough))
    try:
        pyfuse3.init(ops, mp, fuse_options)
    except RuntimeError as exc:
        fs.close()
        raise Unavailable(f"cannot mount {mp}: {exc} (is /dev/fuse available and fuse3 installed?)") from None
    listener = _listen(app, fs) if options.notify else None
    pid_path = pid_file(home, mp)
    os.makedirs(os.path.dirname(pid_path), exist_ok=True)
    with open(pid_path, "w") as f:
        f.write(f"{os.getpid()}\n")
    log.info("mounted %s at %s (pid %d)", "/".join(options.ref) if options.ref else "all repositories", mp, os.getpid())
    if access is not None:
        mapped = ", ".join(f"uid {uid} as {user}" for uid, user in sorted(access.users.items()))
        log.info("shared with other users: %s act as the mount; %s", " and ".join(f"uid {u}" for u in sorted(access.owners)),
                 f"{mapped}; any other uid is refused" if mapped else "any other uid is refused (no mount.users)")
    elif app.config.mount.users:
        log.info("mount.users applies only to a mount shared with other users (--allow-other): only this user reaches this one")
    if not kflags.active():
        log.info("open-reply shim not loaded: the kernel sends FLUSH on every close and re-reads immutable directories")
    try:
        trio.run(_serve, ops, ready, functools.partial(_tune_kernel, mp, options))
    finally:
        kflags.set_fast(None)  # the session has ended: the shim keeps no reference to this mount's handlers
        ops.join_flushes()  # closes handed to threads answer while the session still exists
        if listener is not None:
            listener.stop()
        failed = fs.flush_all()
        if failed:
            log.error("%d open file(s) could not be saved; their content is kept under %s", failed, options.recovered_dir)
        try:
            pyfuse3.close(unmount=True)
        except Exception:
            log.exception("unmounting %s", mp)
        fs.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(pid_path)
        log.info("unmounted %s", mp)


def shared_access(app: App) -> MountAccess:
    """The access control of a mount shared with other users (``mount.users``); ``InvalidArgument`` for a bad mapping."""
    owners = frozenset({os.getuid(), 0})
    users = parse_users(app.config.mount.users, owners=owners)
    return MountAccess(users, lambda user, action, repo: app.auth.authorize(user, action, repo), owners=owners)


def _listen(app: App, fs: FileSystem) -> Any:
    """Push other nodes' branch changes into ``fs`` as they commit (PostgreSQL); ``None`` where unsupported."""
    listener = app.catalog.watch_branches(fs.refs_changed)
    if listener is not None:
        fs.scopes.push_live = listener.connected.is_set
        log.info("listening for branch changes on the ref store (head_ttl %.1fs stays the fallback)", fs.options.head_ttl)
    return listener


def _tune_kernel(mountpoint: str, options: MountOptions) -> None:
    """Settings the kernel takes only once the mount is up (run in a thread while the mount serves)."""
    # The INIT handshake sets the read-ahead window from what the daemon
    # replied, so it is raised after it: a stat waits until INIT is answered.
    try:
        os.stat(mountpoint)
    except OSError:
        return
    set_read_ahead(mountpoint, options.read_ahead_kb)


async def _serve(ops: object, ready: Callable[[], None] | None, tune: Callable[[], None] | None = None) -> None:
    import pyfuse3
    import trio

    from lakemount.fuse.adapter import FuseOperations

    assert isinstance(ops, FuseOperations)
    async with trio.open_nursery() as nursery:
        await nursery.start(ops.poll_heads)
        await nursery.start(ops.invalidate)
        nursery.start_soon(_on_signal, ops)
        nursery.start_soon(_when_serving, tune, ready)
        await pyfuse3.main()
        nursery.cancel_scope.cancel()


async def _when_serving(tune: Callable[[], None] | None, ready: Callable[[], None] | None) -> None:
    """Tune the kernel once the mount answers (``tune`` waits for that), then report ready."""
    import trio

    if tune is not None:
        await trio.to_thread.run_sync(tune, abandon_on_cancel=True)
    if ready is not None:
        ready()


async def _on_signal(ops: object) -> None:
    import pyfuse3
    import trio

    from lakemount.fuse.adapter import FuseOperations

    assert isinstance(ops, FuseOperations)
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.info("%s: saving open files, then unmounting", signal.Signals(signum).name)
            await trio.to_thread.run_sync(ops.fs.flush_all)
            pyfuse3.terminate()
            return


@dataclass(frozen=True, slots=True)
class Unmounted:
    """What ``unmount`` did: the mount process's pid, whether it has exited, whether its connection was aborted."""

    pid: int | None
    finished: bool
    aborted: bool = False


ANSWER_WAIT: Final = 10.0  # how long umount waits for a mount to answer a lookup before it aborts its connection
ABORTED_EXIT_WAIT: Final = 5.0  # a killed process held in the kernel exits once its connection is aborted
ANSWERS: Final = "answers"
STALE: Final = "stale"
SILENT: Final = "silent"


def unmount(
    home: str, mountpoint: str, *, lazy: bool = False, wait: float = UNMOUNT_WAIT, answer_wait: float = ANSWER_WAIT,
) -> Unmounted:
    """Unmount ``mountpoint`` and wait up to ``wait`` seconds for its lakemount process to exit.

    A lazy unmount succeeds once the mount is detached: files still open there keep working, and the
    process saves them and exits when the last one is closed, so it may still be running
    (``finished`` False).  A mount whose process answers nothing for ``answer_wait`` seconds (stopped,
    or killed while a thread of it waits in the kernel, so it can never exit) would keep every syscall
    there waiting and refuse the unmount as busy: its FUSE connection is aborted (those syscalls fail
    with ECONNABORTED), then it is detached (``aborted``); its process may still run then.  Raises
    ``InvalidArgument`` if nothing is mounted there, ``Unavailable`` if the mount is busy (without
    ``lazy``), the process does not exit in time, or a silent mount's connection cannot be aborted.
    """
    mp = os.path.abspath(mountpoint)
    pid = read_pid(pid_file(home, mp))
    if find_mount(mp) is None:
        raise InvalidArgument(f"nothing is mounted at {mp}")
    answer = probe(mp, answer_wait)
    if answer == SILENT:
        return _abort(home, mp, pid, answer_wait)
    # Like umount(8): a busy mount stays (unless lazy).  Once the kernel lets
    # go, the serving process saves what is open and exits; wait for that.
    _unmount(mp, lazy=lazy or answer == STALE)
    deadline = time.monotonic() + wait
    while True:
        detached = find_mount(mp) is None
        alive = pid is not None and read_pid(pid_file(home, mp)) == pid
        if detached and not alive:
            return Unmounted(pid, True)
        if time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    if lazy and detached:
        return Unmounted(pid, False)
    raise Unavailable(f"{mp}: the mount process did not finish within {wait:.0f}s")


def probe(mountpoint: str, timeout: float) -> str:
    """Whether the mount at ``mountpoint`` answers the kernel: ``ANSWERS``, ``STALE`` (its process is gone: the
    kernel answers ENOTCONN) or ``SILENT`` (no answer within ``timeout`` seconds).  The lookup is of a new name
    in the control folder, which no cache of the kernel holds, so it reaches the mount and needs no store; a
    silent mount keeps the probing thread in the kernel until its connection is aborted."""
    import threading
    import uuid

    got: list[int] = []

    def look() -> None:
        try:
            os.stat(os.path.join(mountpoint, ".lakefs", f"umount-probe-{uuid.uuid4().hex}"))
            got.append(0)
        except OSError as exc:
            got.append(exc.errno or 0)

    thread = threading.Thread(target=look, name="umount-probe", daemon=True)
    thread.start()
    thread.join(timeout)
    if not got:
        return SILENT
    return STALE if got[0] in (errno.ENOTCONN, errno.ECONNABORTED) else ANSWERS


def _abort(home: str, mp: str, pid: int | None, answer_wait: float) -> Unmounted:
    """Free a mount that answers nothing: abort its connection, detach it, give its process a moment to exit."""
    log.warning("%s: the mount answered nothing for %.0f s: aborting its FUSE connection", mp, answer_wait)
    if not abort_connection(mp):
        raise Unavailable(f"{mp}: the mount answers nothing and its FUSE connection could not be aborted "
                          f"(needs root, or fusectl at {FUSECTL})")
    if find_mount(mp) is not None:
        _unmount(mp, lazy=True)
    deadline = time.monotonic() + ABORTED_EXIT_WAIT
    while pid is not None and read_pid(pid_file(home, mp)) == pid and time.monotonic() < deadline:
        time.sleep(0.05)
    return Unmounted(pid, pid is None or read_pid(pid_file(home, mp)) != pid, aborted=True)
