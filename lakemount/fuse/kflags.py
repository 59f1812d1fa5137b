"""Open-reply flags pyfuse3 cannot express (``noflush``, ``cache_readdir``), and who sent a FLUSH, through a C shim.

``lakemount/fuse/_kflags.c`` defines libfuse's ``fuse_reply_open``; loaded with
``RTLD_GLOBAL`` *before* pyfuse3, it is the definition pyfuse3 binds to.  The
adapter asks for the flags with two high bits of the handle number it gives
the kernel (``FH_NOFLUSH``, ``FH_CACHE_DIR``) and masks them off every handle
it is given back (``FH_MASK``).  Without the shim (no compiler at install, or
pyfuse3 imported first) the bits are inert and the kernel behaves as before:
a FLUSH per close, uncached directory reads.

The shim also wraps the session's FLUSH handler (its ``fuse_session_new``):
:func:`closer` names the thread whose close(2) sent a handle's pending FLUSH,
which pyfuse3's ``flush(fh)`` does not say, so the mount can tell a forked
child's close of an inherited descriptor from its opener's (0 without the
shim, as every close then counts as the opener's).

Two more, for writes (issue 36, stop 50).  The kernel asks ``security.capability``
before every write(2) of a file (its check whether the write must clear
privileges): the shim answers names outside ``user.*`` in C, as the adapter would,
without a trip into Python.  And it adds ``FUSE_HANDLE_KILLPRIV_V2`` to the INIT
reply (libfuse 3.14 cannot ask for it; the shim sees the session's reads and
writes of ``/dev/fuse`` through libfuse's custom-io hooks, installed by its
``fuse_session_mount``, and changes nothing else): the kernel then marks a file
found to have no privileges to clear, and asks nothing more for its writes until
it refreshes the file's attributes.  A 4 KiB writer (Hadoop's local file system)
makes one request per write instead of two.  In return the mount clears
set-user-ID/set-group-ID on a write, truncation, ``O_TRUNC`` open or chown itself
(:func:`killpriv`, ``FileSystem.kills_suidgid``, ``Metadata.kill_suidgid``).

One more, for a directory being filled (issue 36, stop 51).  Every create in a directory makes the kernel
drop the directory's attributes, and with ``default_permissions`` it asks for them (a GETATTR) before the
next name's permission check: one of the six round trips a small file's ``cp`` costs.  The adapter hands
the shim the directory's attributes as they stand right after the create (:func:`keep_attr`, only if no
other request was read meanwhile) and the shim answers that one GETATTR in C, to the creator's uid, within a
second (or the attributes' timeout if shorter), as if the create's reply had carried them.  The shim drops
every kept attribute when it reads any request that may change a directory (a create, mkdir, unlink, rename,
setattr...) or a FORGET (see ``keeps_attrs`` in the C), and the adapter drops them before issuing a kernel
invalidation and after a control file's write.

And a fast path past pyfuse3's request loop (issue 36, stop 52).  pyfuse3 serves each request in a trio
task: a lock, a wait for the fd through the scheduler, a coroutine the loop awaits; for a small file's
LOOKUP, CREATE, WRITE, FLUSH and RELEASE that loop, not the handlers, was most of the mount's CPU.  The shim
wraps those five handlers: with an object registered (:func:`set_fast`, the adapter's ``fast_*`` methods),
a wrapper calls its method synchronously, on the loop thread, with plain arguments (inode, name, mode,
flags, the request's uid/gid/pid, handle, offset, the data as bytes).  The method runs the core operation
under ``nonblocking()`` and returns what the shim replies with (an entry tuple, a create's entry and open
flags, a write's count, 0, or ``-errno``), or None when the core needs a thread (``NeedsThread``: nothing
changed) or the request is not for the fast path (an undecided access check on a shared mount, a control
file's write): pyfuse3's own handler then takes it, the async way.  After a request answered in C the shim
drains: it reads the requests already waiting on the session fd (poll with timeout 0, at most 64) into its
own buffer and has libfuse dispatch them to the same wrapped handlers, stopping at the first that goes to a
pyfuse3 handler (its coroutine must be awaited by pyfuse3's loop next).  :func:`fast_counts` counts both.
Stop 53: a FLUSH whose save needs a thread (a close without write-back: the object's put and the staging) is
not handed to pyfuse3's handler, whose loop would await a trio thread and be woken to reply (~110 us of CPU a
close in trio's hop alone), but to the adapter's ``hand_flush``: a thread of the adapter's runs the core's flush
and answers the request itself (:func:`reply`), and the drain goes on.
Stop 57: when a drain finds no request waiting, it waits for the next one in ``ppoll`` up to 300 us
(``DRAIN_WAIT_US``) *keeping the GIL*, instead of going back to pyfuse3's loop, whose trio ``epoll`` and task cost
~50 us of CPU a request: a writer's next syscall usually comes within tens of microseconds of its reply, so a
``cp -r`` of small files is served by one drain after another.  The wait sleeps (no CPU); holding the GIL keeps the
pipeline's threads from taking it for a switch interval (5 ms) at the wait's first syscall (stop 55's wait let it
go: worse).  It waits only while no request is being answered by another thread: :func:`threads_out` counts the
adapter's threads running a request's core call (the async handlers' ``_call``), and the shim counts the FLUSHes
handed to ``hand_flush`` until :func:`reply` answers them; such a thread needs the GIL (and trio's loop, for pyfuse3's
threads), and none can start during the wait, which runs on the loop thread.  ``fast_counts``' ``drain_waits``,
``drain_waited`` (ended by a request) and ``drain_waits_skipped`` (a thread was answering) say what it did.
The environment variables ``KFLAGS_FAST`` (``off``, ``calls``: no drain; default both) and ``KFLAGS_DRAIN_WAIT_US``
(the wait; 0: none) are for A/B runs and tests only.

And a large file's appends written by the shim itself (issue 36, stop 57).  Even through ``fast_write``, each 1 MiB
WRITE of a large file cost a ``bytes`` made of libfuse's buffer, a Python call, a ``pwrite`` from it and the bytes
fed to the file's hash threads: about a quarter of a 1 GiB ``cp``'s mount CPU.  Once a file lives in its temp file
past ``MD5_MAX`` (8 MiB, only its SHA-256 left to compute), the handle that wrote it is registered
(:func:`direct_write_register`: the handle, the temp file's descriptor, its size) by ``DirtyFile.hand_writes``; the
WRITE wrapper then ``pwrite``s a WRITE of that handle at exactly the file's end straight from libfuse's buffer into
the temp file with the GIL released, replies, and counts it (the end, writes, bytes, the last one's wall time), with
no Python at all.  The file's SHA-256 is computed by a thread of the shim's own (``lm-shim-hash``, stop 58), which
never takes the GIL: the registration hands it a :func:`new_sha256` (libcrypto's EVP context, the library hashlib
uses), and it feeds it the temp file's bytes from its start as they are written (through ``mmap``: the pages the
``pwrite`` just filled).  The shim makes a write wait while the file's end is more than 16 MiB past what was hashed,
as the old hash queue bounded it, and wakes the mount's follower thread (``writes.py``'s ``lm-pass-follow``) each
time a file's hash passes the next 16 MiB (:func:`direct_write_wait`), to write back and drop what is hashed.  (Stop
57's follower hashed in Python and needed the GIL between every two windows, which the request loop holds but for
each ``pwrite``: both ran about half the time.)  Python reads the shim's count (:func:`direct_write_state`) where it needs the size,
version or mtime (``getattr``, ``flush``, ``fsync``, a save, a release) and takes the registration back
(:func:`direct_write_unregister`, after which no write of it is under way and the hash thread is out of the file, which
Python hashes on from where it stopped) before it changes, saves or closes the
file itself, or serves a ``setattr``; any WRITE the shim does not take (not registered, not at the end) goes to
``fast_write`` or pyfuse3 as before, and that write takes the registration back first.  ``KFLAGS_DIRECT=off`` (A/B
runs) registers nothing.

It must load before anything imports pyfuse3: ``lakemount/fuse/__init__.py``
imports it, so any import of the mount's modules does.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Final, Protocol

log = logging.getLogger(__name__)

FH_NOFLUSH: Final = 1 << 62  # keep in sync with _kflags.c
FH_CACHE_DIR: Final = 1 << 61
FH_MASK: Final = FH_CACHE_DIR - 1


def _load() -> object | None:
    if "pyfuse3" in sys.modules:
        log.debug("pyfuse3 was imported before the open-reply shim: noflush and cache_readdir are off")
        return None
    flags = sys.getdlopenflags()
    sys.setdlopenflags(flags | os.RTLD_GLOBAL)
    try:
        from lakemount.fuse import _kflags  # type: ignore[attr-defined]
    except ImportError as exc:
        log.debug("open-reply shim unavailable: %s", exc)
        return None
    finally:
        sys.setdlopenflags(flags)
    return _kflags


_shim = _load()
_wraps_flush = _shim is not None and bool(_shim.wraps_flush())  # type: ignore[attr-defined]


def closer(fh: int) -> int:
    """The thread id whose close(2) sent the pending FLUSH of handle ``fh`` (as the kernel gave it); 0 if not
    known: no shim, the FLUSH did not pass through it, or two of the handle were pending at once.  Asked once
    per FLUSH, on the request loop (where the shim noted it)."""
    if _shim is None or not _wraps_flush:
        return 0
    return int(_shim.closer(fh))  # type: ignore[attr-defined]


def killpriv() -> bool:
    """True if the kernel leaves killing set-user-ID/set-group-ID on write, truncate and chown to the mount
    (``FUSE_HANDLE_KILLPRIV_V2``, added to the INIT reply by the shim; known once the INIT request was read)."""
    return _shim is not None and bool(_shim.killpriv())  # type: ignore[attr-defined]


def answered_getxattrs() -> int:
    """getxattr requests of names outside ``user.*`` the shim answered (EOPNOTSUPP) without Python."""
    return int(_shim.answered_getxattrs()) if _shim is not None else 0  # type: ignore[attr-defined]


def drops() -> int:
    """Times the shim dropped every kept attribute so far: a request that may change a directory was read, or
    :func:`drop_attrs` ran.  Taken before a create, so :func:`keep_attr` can refuse attributes that may have
    changed meanwhile (requests that change no directory, such as another file's RELEASE, do not count)."""
    return int(_shim.drops()) if _shim is not None else 0  # type: ignore[attr-defined]


def keeps_attrs() -> bool:
    """True if the shim answers a kept directory's next GETATTR (it sees every request read and every GETATTR)."""
    return _shim is not None and _wraps_flush and bool(_shim.keeps_attrs())  # type: ignore[attr-defined]


def keep_attr(seq: int, caller: int, ino: int, mode: int, nlink: int, uid: int, gid: int, rdev: int, size: int, blksize: int,
              blocks: int, atime_ns: int, mtime_ns: int, ctime_ns: int, timeout: float) -> bool:
    """Answer the next GETATTR of ``ino`` sent by uid ``caller`` with these attributes, once, within ``timeout`` seconds
    (one sent by another uid goes to Python and drops them); refused
    (False) if they were dropped since :func:`drops` gave ``seq``, or the shim cannot."""
    if _shim is None:
        return False
    return bool(_shim.keep_attr(seq, caller, ino, mode, nlink, uid, gid, rdev, size, blksize, blocks,  # type: ignore[attr-defined]
                                atime_ns, mtime_ns, ctime_ns, timeout))


def drop_attrs() -> None:
    """Forget every kept attribute (before a kernel invalidation, after a control file's write)."""
    if _shim is not None:
        _shim.drop_attrs()  # type: ignore[attr-defined]


def answered_getattrs() -> int:
    """GETATTR requests the shim answered from kept attributes, without Python."""
    return int(_shim.answered_getattrs()) if _shim is not None else 0  # type: ignore[attr-defined]


def active() -> bool:
    """True if the kernel gets ``noflush``/``cache_readdir`` when the adapter asks for them."""
    return _shim is not None and bool(_shim.active())  # type: ignore[attr-defined]


FAST_MODES: Final = ("drain", "calls", "off")
DRAIN_WAIT_US: Final = 300  # how long a drain that finds no request waiting waits for one, keeping the GIL (stop 57)


def fast_mode() -> str:
    """``drain`` (fast handlers and the drain), ``calls`` (fast handlers only) or ``off``: ``KFLAGS_FAST``, for A/B
    runs of the fast path against pyfuse3's loop (an unknown value is ``drain``, the default)."""
    mode = os.environ.get("KFLAGS_FAST", "drain")
    return mode if mode in FAST_MODES else "drain"


def set_fast(obj: object | None) -> bool:
    """Have the shim call ``obj``'s ``fast_lookup``, ``fast_create``, ``fast_write``, ``fast_flush`` and
    ``fast_release`` before pyfuse3's handlers (None: stop); False if it cannot (no shim, or the session was not
    made through it), or ``KFLAGS_FAST=off``."""
    if _shim is None or not _wraps_flush or not _shim.fast_wrapped():  # type: ignore[attr-defined]
        return False
    mode = fast_mode()
    if obj is None or mode == "off":
        _shim.set_fast(None, False)  # type: ignore[attr-defined]
        return False
    _shim.set_drain_wait(drain_wait_us())  # type: ignore[attr-defined]
    _shim.set_fast(obj, mode == "drain")  # type: ignore[attr-defined]
    return True


def drain_wait_us() -> int:
    """How long a drain that finds no request waiting waits for the next (us): ``KFLAGS_DRAIN_WAIT_US`` if it is a
    whole number from 0 (no wait) to 10,000,000, else ``DRAIN_WAIT_US``."""
    raw = os.environ.get("KFLAGS_DRAIN_WAIT_US", "")
    return int(raw) if raw.isdigit() and int(raw) <= 10_000_000 else DRAIN_WAIT_US


def threads_out(n: int) -> int:
    """``n`` more (negative: fewer) of the adapter's threads are answering a request: the shim's drain waits for the
    next request only while none is (their reply needs the GIL the wait holds).  How many are now (0 without the
    shim).  Called on the loop thread, as the shim's drain runs there."""
    return int(_shim.threads_out(n)) if _shim is not None else 0  # type: ignore[attr-defined]


def reply(request: object, code: int) -> None:
    """Answer a FLUSH the shim handed to the adapter's ``hand_flush`` (a thread's, stop 53) with ``code``, an errno (0:
    done); from any thread, once (ValueError for a second answer)."""
    assert _shim is not None, "a request is handed over only by the shim"
    _shim.reply(request, code)  # type: ignore[attr-defined]


def fast_counts() -> dict[str, int]:
    """The fast path's counters: ``fast_<op>`` answered in C from the adapter's method, ``declined_<op>`` handed
    to pyfuse3 (needs a thread), ``fast_failed`` (the method raised: EIO, a bug), ``drains`` (drains that read a
    request), ``drained`` (requests they read), ``drained_to_python`` (of those, the ones that went to pyfuse3's
    handlers, each ending its drain), ``handed_flushes`` (FLUSHes given back by ``fast_flush`` and taken by the
    adapter's ``hand_flush``, answered by its thread through :func:`reply`), ``handed_unanswered`` (of those, any
    dropped unanswered and answered EIO by the shim: a bug), ``drain_waits`` (drains that found no request waiting
    and waited for one, keeping the GIL), ``drain_waited`` (of those, the waits a request ended),
    ``drain_waits_skipped`` (drains that found none and did not wait: another thread was answering a request),
    ``direct_writes``/``direct_bytes`` (appends the shim wrote itself, stop 57), ``direct_handed`` (a registered
    handle's WRITEs not at its end, handed to Python), ``direct_waits`` (writes that waited for the hash), and the
    shim's hash thread's ``hash_steps``, ``hash_bytes`` and ``hash_idle`` (its waits for bytes to hash; stop 58).  All
    zero without the shim."""
    if _shim is None:
        return {}
    return {str(k): int(v) for k, v in _shim.fast_counts().items()}  # type: ignore[attr-defined]


def direct_writes() -> bool:
    """True if the shim can write a registered handle's appends itself (:func:`direct_write_register`): a session is
    up, its WRITE handler wrapped, libcrypto found (:func:`new_sha256`), and neither ``KFLAGS_FAST`` nor
    ``KFLAGS_DIRECT`` is ``off`` (for A/B runs)."""
    return (_shim is not None and _wraps_flush and bool(_shim.direct_active())  # type: ignore[attr-defined]
            and fast_mode() != "off" and os.environ.get("KFLAGS_DIRECT", "on") != "off")


def new_sha256() -> Sha256 | None:
    """A fresh running SHA-256 the shim's hash thread can feed (stop 58: libcrypto's, as hashlib's; ``update`` and
    ``hexdigest`` as hashlib's), or None without the shim or libcrypto."""
    cls = getattr(_shim, "Sha256", None)
    return None if cls is None else cls()  # type: ignore[no-any-return]


class Sha256(Protocol):
    """What :func:`new_sha256` gives: hashlib's ``update`` and ``hexdigest``."""

    def update(self, data: bytes | bytearray | memoryview, /) -> None: ...
    def hexdigest(self) -> str: ...


def direct_write_register(fh: int, fd: int, end: int, sha: Sha256) -> bool:
    """Have the shim write handle ``fh``'s WRITEs at offset ``end`` (the file's size, moving with each one) into
    ``fd`` itself, answering them without Python (stop 57), and its hash thread feed ``sha`` (from
    :func:`new_sha256`, fed nothing yet) the file's bytes from offset 0 as they are written (stop 58); False if it
    cannot (no shim, the table full, or ``fh`` registered already).  ``fd`` must stay open, and ``sha`` untouched
    (its methods raise RuntimeError meanwhile), until :func:`direct_write_unregister` returned."""
    return _shim is not None and bool(_shim.direct_write_register(fh, fd, end, sha))  # type: ignore[attr-defined]


def direct_write_state(fh: int) -> tuple[int, int, int, int, int] | None:
    """``(end, writes, bytes, mtime_ns, hashed)`` of handle ``fh``'s direct writes so far (None: not registered): the
    file's size, the writes and bytes the shim wrote since the registration, the wall time of the last (0: none), and
    how many of the file's bytes (from its start) the shim's hash thread has fed its SHA-256."""
    if _shim is None:
        return None
    got = _shim.direct_write_state(fh)  # type: ignore[attr-defined]
    return None if got is None else (int(got[0]), int(got[1]), int(got[2]), int(got[3]), int(got[4]))


def direct_write_wait(seq: int, timeout: float) -> int:
    """Wait until the shim's hash thread took a file past the next 16 MiB since its count was ``seq``, or ``timeout``
    seconds: the count now.  The follower's idle wait (it writes back and drops what is hashed)."""
    if _shim is None:
        time.sleep(timeout)
        return 0
    return int(_shim.direct_write_wait(seq, timeout))  # type: ignore[attr-defined]


def direct_write_unregister(fh: int) -> tuple[int, int, int, int, int] | None:
    """Stop the shim's writes of handle ``fh``: its last :func:`direct_write_state` (None: not registered).  Once it
    returned, no write of ``fh`` is under way in the shim and none starts (the next goes to Python), and the hash
    thread is out of its file and its SHA-256, which holds the file's first ``hashed`` bytes: the caller hashes on."""
    if _shim is None:
        return None
    got = _shim.direct_write_unregister(fh)  # type: ignore[attr-defined]
    return None if got is None else (int(got[0]), int(got[1]), int(got[2]), int(got[3]), int(got[4]))


# FUSE passthrough (issue 36, stop 54).  Linux 6.9 on lets an open's reads and writes go to a file the daemon holds
# (a *backing file*) inside the kernel, with no request to the daemon: the daemon registers the file on the session
# fd (an ioctl: a backing id) and answers the OPEN or CREATE with ``FOPEN_PASSTHROUGH`` and that id.  libfuse 3.14
# and the installed kernel headers predate it; the shim asks for it in the INIT reply (``FUSE_INIT_EXT``,
# ``FUSE_PASSTHROUGH``, ``max_stack_depth`` 1) and writes the backing id into the open reply of a handle registered
# with :func:`pass_through`.  Needs CAP_SYS_ADMIN (the ioctl says EPERM otherwise) and no writeback cache.


def want_passthrough(want: bool) -> None:
    """Ask for FUSE passthrough in the INIT reply of the session mounted next (before ``pyfuse3.init``)."""
    if _shim is not None:
        _shim.want_passthrough(want)  # type: ignore[attr-defined]


def passthrough() -> tuple[bool, bool]:
    """(offered, granted): the kernel's INIT offered FUSE passthrough; the shim's reply asked for it (the kernel
    takes it then: backing ids are refused only per file, by :func:`backing_open`).  Known once INIT was read."""
    if _shim is None:
        return False, False
    offered, granted = _shim.passthrough()  # type: ignore[attr-defined]
    return bool(offered), bool(granted)


def backing_open(fd: int) -> int:
    """Register ``fd`` as a passthrough backing file: its backing id.  OSError with the kernel's errno (EPERM:
    not root or passthrough not granted; ELOOP: a stacked file system under the file; EINVAL...)."""
    if _shim is None:
        raise OSError(95, "no kflags shim")
    return int(_shim.backing_open(fd))  # type: ignore[attr-defined]


def backing_close(backing_id: int) -> None:
    """Unregister a backing id (opens already using it keep the file until they are released)."""
    if _shim is not None:
        _shim.backing_close(backing_id)  # type: ignore[attr-defined]


def pass_through(fh: int, backing_id: int) -> bool:
    """Send the open (or create) reply of handle ``fh`` (as the kernel gets it) as a passthrough open of
    ``backing_id``; False if not (passthrough not granted, or 256 replies pending): it goes out as before."""
    return _shim is not None and bool(_shim.pass_through(fh, backing_id))  # type: ignore[attr-defined]


def passthrough_replies() -> int:
    """Open and create replies the shim sent as passthrough so far."""
    return int(_shim.passthrough_replies()) if _shim is not None else 0  # type: ignore[attr-defined]
