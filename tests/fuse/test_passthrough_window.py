"""The window between a passthrough close and its release, through the kernel (replay55, stop 55): a new open of the
file while the kernel still has the closed passthrough open (its RELEASE not yet handled) must be a passthrough open
of the same backing file, or the kernel fails it with EIO.  With write-back the close hands a large file to the
journal (held: never written again); a reader opened then shares that backing file and reads the closed bytes.  The
core test (``test_passthrough.py::test_an_open_between_a_passthrough_close_that_saved_the_file_and_its_release``)
holds the window open on purpose, for a reader and a writer, with and without write-back."""

from __future__ import annotations

import errno
import hashlib
import os
import threading
from pathlib import Path

from lakemount.app import App
from lakemount.config import load
from tests.fuse.conftest import REPO
from tests.fuse.mounting import env_for, start, stop
from tests.fuse.test_passthrough_mount import pytestmark as _passthrough_marks
from tests.fuse.test_writes_mount import staged_bytes, stat_counter

pytestmark = _passthrough_marks

MiB = 1 << 20
ROUNDS = 10  # at least this many rounds
MAX_ROUNDS = 200  # and on until WINDOWS opens met the window
WINDOWS = 1  # the core test (test_passthrough.py) meets it every time; here the kernel does, by chance
SIZE = 17 * MiB  # past SCAN_FROM (16 MiB): the close looks for descriptors and, finding none, saves the file itself


def _write_close(path: str, body: bytes) -> None:
    """Write ``body`` as ``path`` through one open (OSError's ``filename`` names the call that failed)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, "open") from exc
    try:
        view = memoryview(body)
        while view:
            view = view[os.write(fd, view[:4 * MiB]):]
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, "write") from exc
    finally:
        try:
            os.close(fd)  # FLUSH (the save) now; the RELEASE follows on the kernel's own time
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, "close") from exc


def _hammer(path: str, stop: threading.Event, errors: list[str], body: bytes | None) -> None:
    """Open ``path`` again and again (to read a byte, or, with ``body``, to write it whole) until ``stop``;
    every errno but ENOENT (before the first create) is noted."""
    while not stop.is_set():
        try:
            if body is None:
                with open(path, "rb") as f:
                    f.read(1)
            else:
                _write_close(path, body)
        except FileNotFoundError:
            continue
        except OSError as exc:
            errors.append(f"{exc.filename or 'open'}: {errno.errorcode.get(exc.errno or 0, str(exc.errno))}")


def test_a_read_open_right_after_a_passthrough_close_with_write_back_never_fails(home: str, tmp_path: Path) -> None:
    """With write-back, a file is written through passthrough and closed (the journal takes it unhashed), round after round, while another thread opens it to read
    in a loop, until some of those opens landed between a close that saved the file itself and its release (the
    mount counts them: ``passthrough_window_opens``; before replay55 such an open was EIO).  No open fails, each
    close's bytes read back whole, and no stored object is changed."""
    app = App(load(env={"LAKEMOUNT_HOME": home}))
    app.catalog.create_repository(REPO)
    mountpoint = str(tmp_path / "mnt")
    env = env_for(home, LAKEMOUNT_MOUNT_PASSTHROUGH="on", LAKEMOUNT_MOUNT_WRITEBACK="true")
    m = start(home, mountpoint, env=env)
    try:
        main = f"{mountpoint}/{REPO}/main"
        path = f"{main}/w.bin"
        stop_event, errors = threading.Event(), list[str]()
        wrong: list[str] = []
        t = threading.Thread(target=_hammer, args=(path, stop_event, errors, None))
        t.start()
        body = b""
        try:
            for i in range(MAX_ROUNDS):
                body = os.urandom(SIZE)
                try:
                    _write_close(path, body)
                    with open(path, "rb") as src:
                        got = src.read()
                    if got != body:
                        wrong.append(f"round {i}: read {len(got)} bytes, sha256 {hashlib.sha256(got).hexdigest()[:12]}")
                except OSError as exc:
                    wrong.append(f"round {i}: {exc.filename or 'read'}: {errno.errorcode.get(exc.errno or 0, exc.errno)}")
                if i >= ROUNDS and stat_counter(mountpoint, "passthrough_window_opens") >= WINDOWS:
                    break
        finally:
            stop_event.set()
            t.join()
        assert wrong == [] and errors == [], f"{wrong}, the other thread's: {errors}; the mount's log:\n{m.log()[-4000:]}"
        met = stat_counter(mountpoint, "passthrough_window_opens")
        assert met >= WINDOWS, f"{met} opens landed between a close and its release in {MAX_ROUNDS} rounds: not tested"
        with open(f"{main}/.lakefs/commit", "w") as f:
            f.write("after the window")
        assert staged_bytes(app, "w.bin") == body
        data = Path(app.catalog.repository(REPO).storage_namespace.removeprefix("local://")) / "data"
        for obj in data.rglob("*"):  # no stored object was written after it was stored
            if obj.is_file() and not obj.name.startswith("."):
                assert hashlib.sha256(obj.read_bytes()).hexdigest() == obj.name, f"corrupt object {obj}"
    finally:
        stop(m)
