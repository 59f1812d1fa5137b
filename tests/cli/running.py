"""Running ``lakemount ARGS`` for a test: in this process (the default), or as a process of its own.

A ``lakemount`` process pays Python's start and the CLI's imports, ~0.3-1 s a call on the shared 2-core
machine; the CLI tests make hundreds of calls, and that was most of the fast tier's time (docs/TESTING.md,
"The fast tier"). :func:`lakemount` runs the verb through the entry point's ``main(argv)`` instead, with what a
process of its own would have fresh, and answers what ``subprocess.run(..., capture_output=True, text=True)``
would:

- the environment: ``os.environ`` with the test's variables, restored after;
- standard input (``stdin``, else empty), output and error: byte streams that are not terminals, as pipes are,
  decoded as ``text=True`` decodes them (UTF-8, universal newlines);
- the exit status: ``SystemExit``'s code as the process's status (a string: printed, status 1); an exception
  that escapes ``main`` is status 1 with its traceback on standard error, as the interpreter prints it;
- what a process starts fresh: the umask and the umask :mod:`lakemount.private` remembers as the user's, the
  context variables (the audit's actor), the warning filters (the interpreter's defaults, shown on standard
  error, and the suite's: a ``DeprecationWarning`` from lakemount is an error) and a root log handler printing WARNING and above as Python's last-resort handler does;
- what a process drops at its exit: every ``App`` the verb built is closed (its audit spool, its database
  connections), as the process's exit would.

``process=True`` runs a real ``python -m lakemount.cli.main`` instead: for what is about the process (its start,
its imports, signals, its exit status past Arrow's pools) and for one end-to-end proof that the command runs.
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import logging
import os
import subprocess
import sys
import traceback
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

LAKEMOUNT = [sys.executable, "-m", "lakemount.cli.main"]

# A plain interpreter's warning filters (``python -W`` unset, not ``-X dev``), most specific last as
# ``warnings.filterwarnings`` inserts them.
_DEFAULT_FILTERS: tuple[tuple[str, type[Warning], str], ...] = (
    ("ignore", ResourceWarning, ""),
    ("ignore", ImportWarning, ""),
    ("ignore", PendingDeprecationWarning, ""),
    ("ignore", DeprecationWarning, ""),
    ("default", DeprecationWarning, "__main__"),
    ("error", DeprecationWarning, "lakemount"),  # and the suite's own (pyproject.toml's filterwarnings)
)


def lakemount(home: Path | str | None, *args: str | bytes, stdin: str | None = None,
              env: Mapping[str, str | None] | None = None, umask: int | None = None, process: bool = False,
              timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``lakemount ARGS`` with ``LAKEMOUNT_HOME=home`` (unless None) and ``env`` over this process's environment
    (a variable set to None is removed): its status, standard output and error, as ``subprocess.run(...,
    capture_output=True, text=True)`` gives them.  An argument given as bytes reaches the verb as the
    interpreter decodes a process's arguments (``os.fsdecode``).  ``umask``: the one the command starts with
    (else this process's)."""
    environ = dict(env or {})
    if home is not None:
        environ.setdefault("LAKEMOUNT_HOME", str(home))
    if process:
        merged = {**os.environ, **environ}
        return subprocess.run([*LAKEMOUNT, *args], capture_output=True, text=True, input=stdin, timeout=timeout,
                              env={name: value for name, value in merged.items() if value is not None},
                              preexec_fn=None if umask is None else lambda: os.umask(umask))
    return _in_process([os.fsdecode(a) for a in args], environ, stdin, umask)


def _in_process(argv: list[str], environ: Mapping[str, str | None], stdin: str | None, umask: int | None
                ) -> subprocess.CompletedProcess[str]:
    out, err = io.BytesIO(), io.BytesIO()
    code = contextvars.copy_context().run(_call, argv, environ, stdin, umask, out, err)
    return subprocess.CompletedProcess([*LAKEMOUNT, *argv], code, _text(out.getvalue()), _text(err.getvalue()))


def _text(data: bytes) -> str:
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def _call(argv: list[str], environ: Mapping[str, str | None], stdin: str | None, umask: int | None, out: io.BytesIO,
          err: io.BytesIO) -> int:
    from lakemount.cli.main import main

    streams = (
        io.TextIOWrapper(io.BytesIO((stdin or "").encode()), encoding="utf-8"),
        io.TextIOWrapper(out, encoding="utf-8", write_through=True),
        io.TextIOWrapper(err, encoding="utf-8", write_through=True),
    )
    with _environment(environ), _fresh_process_state(umask), _closing_apps(), _standard_streams(*streams):
        try:
            main(argv)
            return 0
        except SystemExit as exc:
            return _status(exc.code)
        except BaseException:  # what escapes main: the interpreter prints the traceback and exits 1
            traceback.print_exc(file=sys.stderr)
            return 1
        finally:
            for stream in streams:
                stream.flush()
                stream.detach()  # else the wrapper closes the buffer when collected, before it is read


def _status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


@contextlib.contextmanager
def _environment(environ: Mapping[str, str | None]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in environ}
    for name, value in environ.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def _fresh_process_state(start_umask: int | None) -> Iterator[None]:
    import lakemount.private as private

    umask = os.umask(0o022)
    os.umask(umask if start_umask is None else start_umask)
    remembered = private._user_umask
    private._user_umask = None
    try:
        with warnings.catch_warnings():
            warnings.resetwarnings()
            for action, category, module in _DEFAULT_FILTERS:
                warnings.filterwarnings(action, category=category, module=module)  # type: ignore[arg-type]
            yield
    finally:
        private._user_umask = remembered
        os.umask(umask)


@contextlib.contextmanager
def _closing_apps() -> Iterator[None]:
    """Close every ``App`` built meanwhile when done, as the end of the verb's process would drop it."""
    from lakemount.app import App

    built: list[App] = []
    original = App.__dict__["from_config"]
    build = App.from_config

    def from_config(*args: Any, **kwargs: Any) -> App:
        app = build(*args, **kwargs)
        built.append(app)
        return app

    App.from_config = staticmethod(from_config)  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        App.from_config = original  # type: ignore[method-assign]
        for app in built:
            app.close()


@contextlib.contextmanager
def _standard_streams(stdin: io.TextIOWrapper, stdout: io.TextIOWrapper, stderr: io.TextIOWrapper) -> Iterator[None]:
    saved = sys.stdin, sys.stdout, sys.stderr
    handler = logging.StreamHandler(stderr)  # the last-resort handler's output: the message alone, WARNING and up
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
    try:
        yield
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
        root.removeHandler(handler)
