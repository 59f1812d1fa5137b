"""The ``lakemount`` command's entry point (the console script, ``python -m lakemount.cli.main``).

It imports the click group (lakemount/cli/group.py) for every call but one: a
plain ``lakemount --help`` (or ``-h``) prints the stored text of
lakemount/cli/helptext.py when click would print that text at this terminal's
width, so the call made most often by hand starts no faster than the
interpreter allows (issue 41: click alone is ~40 ms).  tests/cli/test_helptext.py
holds the stored text equal to what the group prints.
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> None:
    """Run the CLI: every failure is one line on stderr and an exit status by category (``group.EXIT_CODES``).

    Called with ``argv`` (in-process, e.g. tests) it ends by raising ``SystemExit`` or returning; called as the
    process's entry (no ``argv``: the ``lakemount`` script, ``python -m``) it ends the process (see ``_exit``).
    """
    if argv is not None:
        _run(argv)
        return
    try:
        _run(sys.argv[1:])
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    _exit(code)


def _run(args: list[str]) -> None:
    if args in (["--help"], ["-h"]) and _stored_help():
        return
    from lakemount.cli.group import run

    run(args)


def help_width() -> int:
    """The width click formats ``lakemount --help`` at here: the terminal's columns (as shutil reads them), at most 100, less 2.

    ``shutil.get_terminal_size`` without importing shutil: ``COLUMNS`` when it is a positive number, else the
    size of the terminal on standard output, else 80; click's ``HelpFormatter`` then takes ``max(min(columns,
    max_content_width) - 2, 50)`` with the group's ``max_content_width`` of 100.
    """
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
        columns = columns or 80
    return max(min(columns, 100) - 2, 50)


def _stored_help() -> bool:
    """Print the stored ``--help`` for this width if there is one (True), else leave it to click (False)."""
    from lakemount.cli.helptext import HELP

    text = HELP.get(help_width())
    if text is None:
        return False
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:  # `lakemount --help | head -3`: as click's path, no traceback
        pass
    return True


def _exit(code: object) -> None:
    """End the process with ``code``, past Arrow's native thread pools when pyarrow was loaded.

    Arrow's pools can abort the process ("terminate called without an active
    exception", SIGABRT) when the interpreter tears them down at exit, after all
    work and output are done (apache/arrow#34314); a verb that wrote or read
    Parquet (the audit trail) then exits -6 now and then.  So once pyarrow is
    loaded the CLI does what a normal exit does (the threading shutdown: its exit
    hooks, then waiting for non-daemon threads; the atexit hooks; flushing the
    streams) and leaves with ``os._exit``.
    """
    if isinstance(code, str):
        print(code, file=sys.stderr)
        code = 1
    status = 0 if code is None else code if isinstance(code, int) else 1
    if "pyarrow" not in sys.modules:
        sys.exit(status)
    import atexit
    import contextlib
    import threading

    # What Py_Finalize does first: run the threading exit hooks (an open ThreadPoolExecutor's workers stop
    # there; joining them by hand would wait forever, as a Spark job's CLI did) and join non-daemon threads.
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(status)


if __name__ == "__main__":
    main()
