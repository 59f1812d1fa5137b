"""Errors that confused a new user (issue 23): each is now one clear line, and the same from every front end."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.cli.running import lakemount

ENV: dict[str, str | None] = {"LAKEMOUNT_CACHE_DISK_BYTES": "0", "LAKEMOUNT_DEBUG": None}


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    run(home, "repo", "create", "lakefs://demo")
    return home


def run(home: Path, *args: str | bytes, ok: bool = True) -> subprocess.CompletedProcess[str]:
    p = lakemount(home, *args, env=ENV)  # in this process (tests/cli/running.py)
    if ok:
        assert p.returncode == 0, f"{args}: rc={p.returncode} stderr={p.stderr}"
    return p


def test_a_commit_message_that_is_not_utf8_is_bad_input_not_an_internal_error(home: Path, tmp_path: Path) -> None:
    # Before: "error: internal error: UnicodeEncodeError: ..." (exit 1) from the commit id's hashing.
    src = tmp_path / "a.txt"
    src.write_bytes(b"a\n")
    run(home, "fs", "upload", "lakefs://demo/main/a.txt", "--source", str(src))
    for args in ([b"-m", b"caf\xe9"], [b"-m", b"ok", b"--meta", b"k=\xff"]):
        p = run(home, "commit", "lakefs://demo/main", *args, ok=False)
        # The mount's .lakefs/commit says the same (tests/fuse/test_control.py).
        assert p.stderr == "error: commit: input is not UTF-8 text\n" and p.returncode == 2, p.stderr
    p = run(home, "commit", "lakefs://demo/main", b"-m", b"caf\xe9", "--json", ok=False)
    assert json.loads(p.stdout)["message"] == "commit: input is not UTF-8 text"
    p = run(home, "merge", "lakefs://demo/main", "lakefs://demo/main", b"-m", b"\xff", ok=False)
    assert p.stderr == "error: merge: input is not UTF-8 text\n" and p.returncode == 2, p.stderr
    run(home, "commit", "lakefs://demo/main", "-m", "café")  # UTF-8 text is fine, and nothing was lost


def merged_twice(home: Path, tmp_path: Path) -> None:
    """main has two merge commits of dev (main~1 and main)."""
    src = tmp_path / "f"
    src.write_bytes(b"1")
    run(home, "branch", "create", "lakefs://demo/dev", "--source", "lakefs://demo/main")
    for i in range(2):
        run(home, "fs", "upload", f"lakefs://demo/dev/d{i}", "--source", str(src))
        run(home, "commit", "lakefs://demo/dev", "-m", f"dev {i}")
        run(home, "fs", "upload", f"lakefs://demo/main/m{i}", "--source", str(src))
        run(home, "commit", "lakefs://demo/main", "-m", f"main {i}")
        run(home, "merge", "lakefs://demo/dev", "lakefs://demo/main")


def test_revert_takes_the_control_files_spelling_of_the_parent_too(home: Path, tmp_path: Path) -> None:
    # The control file says --parent, the CLI said --parent-number only ("No such option: --parent").
    merged_twice(home, tmp_path)
    p = run(home, "revert", "lakefs://demo/main", "main", "--parent", "3", ok=False)
    assert p.returncode == 2 and "parent" in p.stderr  # the number reached the revert
    run(home, "revert", "lakefs://demo/main", "main", "--parent", "1")
    run(home, "revert", "lakefs://demo/main", "main~3", "--parent-number", "1")  # the first merge
    ls = json.loads(run(home, "fs", "ls", "lakefs://demo/main/", "--json").stdout)
    assert sorted(o["path"] for o in ls) == ["m0", "m1"]
    p = run(home, "revert", "lakefs://demo/main", "main~4", "--parent", "1", "--parent-number", "2", ok=False)
    assert p.returncode == 2 and "disagree" in p.stderr
    helptext = run(home, "revert", "--help").stdout
    assert "--parent-number" in helptext and "--parent " not in helptext  # one spelling documented


def test_branch_delete_says_how_many_uncommitted_changes_go_with_it(home: Path, tmp_path: Path) -> None:
    # Before: "Deleted branch dev" and {"deleted": "dev"}, whatever was staged on it.
    src = tmp_path / "f"
    src.write_bytes(b"1")
    run(home, "fs", "upload", "lakefs://demo/main/kept", "--source", str(src))
    run(home, "commit", "lakefs://demo/main", "-m", "base")
    for name in ("dev", "dev2", "clean"):
        run(home, "branch", "create", f"lakefs://demo/{name}", "--source", "lakefs://demo/main")
    for path in ("a", "b", "c"):
        run(home, "fs", "upload", f"lakefs://demo/dev/{path}", "--source", str(src))
    run(home, "fs", "rm", "lakefs://demo/dev/c")  # written and removed again: no change
    run(home, "fs", "rm", "lakefs://demo/dev2/kept")
    assert json.loads(run(home, "branch", "delete", "lakefs://demo/dev", "--yes", "--json").stdout) == {
        "deleted": "dev", "uncommitted_changes": 2}
    asked = lakemount(home, "branch", "delete", "lakefs://demo/dev2", stdin="y\n", env=ENV)
    assert asked.returncode == 0, asked.stderr
    assert "Its 1 uncommitted change will be lost." in asked.stdout
    assert asked.stdout.rstrip().endswith("Deleted branch dev2 and its 1 uncommitted change")
    assert run(home, "branch", "delete", "lakefs://demo/clean", "-y").stdout == "Deleted branch clean (no uncommitted changes)\n"
