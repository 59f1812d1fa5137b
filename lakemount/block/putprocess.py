"""``PutProcess``: batches of small objects put by a child process with a store client of its own.

``S3Adapter.put_many`` (the write-back pipeline's uploads of small files, ``catalog.writer.store_many``)
runs here.  botocore builds, signs and sends each request in Python: in a FUSE mount's process, the
threads doing that hold the GIL most of the time, and the mount's request loop, one thread that
needs the GIL for every request it answers, waits for it after each read of ``/dev/fuse`` (stop 54,
docs/SCALE.md: a lone ``cp -r`` with write-back over moto ran as fast as the uploads, not the journal).
A child process has a GIL of its own: the caller only writes the bytes into a pipe and waits for the
answer with its GIL released.

The child (:func:`main`) reads frames from its stdin, each a 4-byte big-endian length and a pickle:
first its adapter's class (module and name: ``S3Adapter``, which hands itself over, so this module
imports no adapter) and keyword arguments, then each batch, a list of ``(url, data)``.  It
stores a batch with :func:`~lakemount.block.batch.put_each` (``PARALLEL`` at once, each a whole
object or nothing, as S3's PUT is) and answers it with a frame: None once every object is stored, or
``(category, message)`` of the first failure, the category being the name of an error class of
:mod:`lakemount.errors`.  It runs at niceness ``NICE`` (the request loop and the writers come first on
a busy node) and exits when its stdin ends: its parent closed it or is gone (a ``kill -9`` of the
mount ends it after the batch in flight).

A child that dies (killed, out of memory) or answers nonsense fails the batch in flight with
``Unavailable``: the caller retries it (the write-back pipeline does, up to ``mount.writeback_retry``;
another PUT of a content-addressed object stores the same bytes), and the next batch starts a new child.
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
import weakref
from collections.abc import Sequence
from typing import IO, Any, Final

from lakemount import errors
from lakemount.errors import LakeMountError, Unavailable

NICE: Final = 10  # the child's niceness: below the mount's request loop and the node's writers
_LEN = struct.Struct(">I")
# The error categories an answer names (a specific error travels as its category, with its message).
_CATEGORIES: Final = (errors.ObjectNotFound, errors.NotFound, errors.AlreadyExists, errors.Conflict,
                      errors.PreconditionFailed, errors.InvalidArgument, errors.ReadOnly, errors.PermissionDenied,
                      errors.Corrupt, errors.Unavailable)
_ROOT: Final = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The child imports the very lakemount its parent runs (a worktree's, not whatever the interpreter would find).
_START: Final = f"import sys; sys.path.insert(0, {_ROOT!r}); from lakemount.block.putprocess import main; main()"


class PutProcess:
    """Puts batches of ``(url, data)`` through an ``adapter(**options)`` of its own in a child process, one
    batch at a time (callers wait their turn), the child started at the first batch and again after one died.
    ``adapter`` is a block adapter class (``S3Adapter``); the child imports it by its module and name."""

    def __init__(self, adapter: type, options: dict[str, Any]) -> None:
        self._adapter = (adapter.__module__, adapter.__qualname__)
        self._options = dict(options)
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self.started = 0  # children started so far (a restart after a death counts)
        _LIVE.add(self)  # weakly: a hook per instance would keep every one alive (and its child running) for good

    @property
    def pid(self) -> int | None:
        """The running child's process id (None before the first batch or after it died)."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def put_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        """Store each ``(url, data)``; every object is whole once this returns.  Raises the failure the
        child met first (``ObjectNotFound`` for a missing bucket, ``Unavailable`` for an unreachable
        store...), ``Unavailable`` when the child died or could not start."""
        if not items:
            return
        with self._lock:
            proc = self._child()
            try:
                assert proc.stdin is not None and proc.stdout is not None
                _send(proc.stdin, list(items))
                answer = _receive(proc.stdout)
            except (OSError, EOFError, pickle.UnpicklingError) as exc:
                self._end(proc)
                raise Unavailable(f"the upload process died ({_why(proc, exc)}); a new one takes the next batch") from None
        if answer is not None:
            raise _error(answer)

    def close(self) -> None:
        """End the child (it finishes the batch in flight, if any, first)."""
        with self._lock:
            if self._proc is not None:
                _close(self._proc)
                self._proc = None

    def _child(self) -> subprocess.Popen[bytes]:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            return proc
        try:
            proc = subprocess.Popen([sys.executable, "-c", _START], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            assert proc.stdin is not None
            _send(proc.stdin, (*self._adapter, self._options))
        except OSError as exc:
            raise Unavailable(f"cannot start the upload process: {exc}") from None
        self._proc = proc
        self.started += 1
        weakref.finalize(self, _close, proc)  # an adapter dropped without close() ends its child
        return proc

    def _end(self, proc: subprocess.Popen[bytes]) -> None:
        """A child that failed a batch: killed if it still runs (it may hold half an answer), and forgotten."""
        if proc.poll() is None:
            proc.kill()
        _close(proc)
        self._proc = None

    def _forget(self) -> None:
        """In a forked child: the parent's child and lock are not ours."""
        self._proc, self._lock = None, threading.Lock()


_LIVE: weakref.WeakSet[PutProcess] = weakref.WeakSet()


def _after_fork() -> None:
    """In a forked child: no ``PutProcess`` of the parent's owns the parent's children or locks."""
    for puts in list(_LIVE):
        puts._forget()


os.register_at_fork(after_in_child=_after_fork)


def _close(proc: subprocess.Popen[bytes]) -> None:
    for f in (proc.stdin, proc.stdout):
        if f is not None:
            try:
                f.close()
            except OSError:
                pass
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _why(proc: subprocess.Popen[bytes], exc: BaseException) -> str:
    try:
        code = proc.wait(timeout=1)
    except subprocess.TimeoutExpired:
        return f"{type(exc).__name__}: {exc}"
    return f"killed by signal {-code}" if code < 0 else f"exit status {code}"


def _send(f: IO[bytes], value: Any) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    f.write(_LEN.pack(len(data)) + data)
    f.flush()


def _receive(f: IO[bytes]) -> Any:
    """The next frame's value; ``EOFError`` when the stream ends before a whole frame."""
    head = f.read(_LEN.size)
    if len(head) < _LEN.size:
        raise EOFError("the stream ended")
    size = _LEN.unpack(head)[0]
    data = f.read(size)
    if len(data) < size:
        raise EOFError("the stream ended inside a frame")
    return pickle.loads(data)


def _answer(exc: BaseException) -> tuple[str, str]:
    """What the child says of a failed batch: the error's category and its message."""
    for cls in _CATEGORIES:
        if isinstance(exc, cls):
            return cls.__name__, str(exc)
    # Anything else (a bug, a surprise from the client) is retried as an unavailable store, as the caller would
    # retry a round that raised; the message names it.
    return "Unavailable", f"{type(exc).__name__}: {exc}"


def _error(answer: Any) -> LakeMountError:
    """The error an answer names (``Unavailable`` for one that names none)."""
    try:
        name, message = answer
        cls = next(c for c in _CATEGORIES if c.__name__ == name)
    except (TypeError, ValueError, StopIteration):
        return Unavailable(f"the upload process answered {answer!r}")
    return cls(str(message))


def main() -> None:
    """The child: serve batches from stdin until it ends (see the module's docstring)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C is for the mount, which ends this by closing stdin
    logging.basicConfig(level=logging.WARNING, format="lakemount upload process %(process)d: %(message)s")
    try:
        os.nice(NICE)
    except OSError:
        pass
    import importlib

    from lakemount.block.batch import put_each

    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    try:
        module, name, options = _receive(stdin)
    except EOFError:
        return
    adapter = getattr(importlib.import_module(module), name)(**options)
    while True:
        try:
            items = _receive(stdin)
        except EOFError:
            return
        try:
            put_each(adapter, items)
            answer = None
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the caller, named
            answer = _answer(exc)
        try:
            _send(stdout, answer)
        except OSError:
            return  # the parent is gone


if __name__ == "__main__":
    main()
