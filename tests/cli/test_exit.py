"""How the CLI process ends once pyarrow is loaded: as a normal exit would, then past Arrow's teardown."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import atexit, sys, threading, time
from pathlib import Path
out = Path(sys.argv[1])
import pyarrow  # what the audit trail's verbs load
atexit.register(lambda: out.write_text(out.read_text() + "exit-hook\n"))
def late():
    time.sleep(0.3)
    out.write_text(out.read_text() + "thread\n")
threading.Thread(target=late).start()  # not a daemon: a normal exit waits for it
from concurrent.futures import ThreadPoolExecutor
pool = ThreadPoolExecutor(2)  # never shut down: its idle workers are non-daemon threads a normal exit stops
pool.submit(lambda: None).result()
from lakemount.cli.main import main
print("printed before exit", end="")  # buffered: must be flushed
sys.argv = ["lakemount", *sys.argv[2:]]
main()  # as the lakemount script calls it
"""


def _run(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    out = tmp_path / "order.txt"
    out.write_text("")
    env = {"PYTHONPATH": str(ROOT), "LAKEMOUNT_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}
    p = subprocess.run([sys.executable, "-c", SCRIPT, str(out), *args], capture_output=True, text=True, env=env, timeout=120)
    return p, out.read_text().split()


def test_with_pyarrow_loaded_the_cli_waits_for_threads_runs_exit_hooks_and_flushes(tmp_path: Path) -> None:
    p, order = _run(tmp_path, "--help")
    assert p.returncode == 0, p.stderr
    assert order == ["thread", "exit-hook"], order
    assert p.stdout.startswith("printed before exit") and "Usage:" in p.stdout


def test_with_pyarrow_loaded_a_failing_verb_keeps_its_exit_status(tmp_path: Path) -> None:
    p, order = _run(tmp_path, "fs", "cat", "lakefs://nope/main/x")
    assert p.returncode == 3 and order == ["thread", "exit-hook"], (p.returncode, p.stderr, order)
    p, _ = _run(tmp_path, "no-such-verb")
    assert p.returncode == 2 and "No such command" in p.stderr


def test_in_process_callers_still_get_system_exit_with_pyarrow_loaded(capsys) -> None:  # type: ignore[no-untyped-def]
    """Only the process's own entry leaves with os._exit; a caller passing argv (tests) gets SystemExit back."""
    import pyarrow  # noqa: F401
    import pytest

    from lakemount.cli.main import main

    with pytest.raises(SystemExit) as exc:
        main(["no-such-verb"])
    assert exc.value.code == 2
    main(["--help"])  # returns
    assert "Usage:" in capsys.readouterr().out
