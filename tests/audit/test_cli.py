"""The CLI's records (data verbs and versioning verbs, as the local account) and ``lakemount audit``'s filters."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest

from lakemount.app import App
from lakemount.audit.record import shown
from lakemount.config import load

LAKEMOUNT = [sys.executable, "-m", "lakemount.cli.main"]
ROOT = Path(__file__).resolve().parents[2]


def run(home: Path, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("LAKEMOUNT_")}, "LAKEMOUNT_HOME": str(home),
           "LAKEMOUNT_CACHE_DISK_BYTES": "0", "PYTHONPATH": str(ROOT)}
    p = subprocess.run([*LAKEMOUNT, *args], capture_output=True, text=True, env=env, timeout=120)
    if ok:
        assert p.returncode == 0, f"{args}: rc={p.returncode} stderr={p.stderr}"
    return p


def audit_json(home: Path, *args: str) -> list[dict[str, object]]:
    out = json.loads(run(home, "audit", "--repo", "cli", *args, "--json").stdout)
    assert isinstance(out, list)
    return out


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("cli") / "home"
    src = home.parent / "a.csv"
    src.write_bytes(b"x,y\n1,2\n")
    run(home, "repo", "create", "lakefs://cli")
    run(home, "fs", "upload", "lakefs://cli/main/t/a.csv", "--source", str(src))
    run(home, "commit", "lakefs://cli/main", "-m", "first")
    assert run(home, "fs", "cat", "lakefs://cli/main/t/a.csv").stdout == "x,y\n1,2\n"
    return home


def test_cli_read_write_and_commit_are_recorded_as_the_local_account(home: Path) -> None:
    me = pwd.getpwuid(os.getuid()).pw_name
    recs = audit_json(home)
    by_op = {r["op"]: r for r in recs}
    assert {"upload", "commit", "cat"} <= set(by_op)
    assert {(r["user"], r["frontend"]) for r in recs} == {(me, "cli")}
    commit = by_op["commit"]["commit"]
    assert isinstance(commit, str) and len(commit) == 64
    assert (by_op["cat"]["path"], by_op["cat"]["bytes"], by_op["cat"]["ref"], by_op["cat"]["commit"]) == ("t/a.csv", 8, "main", commit)
    assert (by_op["upload"]["path"], by_op["upload"]["bytes"]) == ("t/a.csv", 8)


def test_cli_filters(home: Path) -> None:
    assert [r["op"] for r in audit_json(home, "--op", "cat")] == ["cat"]
    assert {r["path"] for r in audit_json(home, "--path", "t/")} == {"t/a.csv"}
    assert audit_json(home, "--user", "somebody-else") == []
    assert audit_json(home, "--since", "2000-01-01", "--until", "2000-01-02") == []
    assert len(audit_json(home, "--since", "1h")) >= 3
    bad = run(home, "audit", "--repo", "cli", "--since", "yesterday-ish", ok=False)
    assert bad.returncode == 2 and "--since 'yesterday-ish'" in bad.stderr


def test_hostile_paths_and_user_names_are_stored_as_is_and_shown_escaped(home: Path) -> None:
    app = App(load(None, env={"LAKEMOUNT_HOME": str(home)}))
    assert app.audit is not None
    evil_user, evil_path = "eve\x1b[31m\nroot", "t/\x1b]0;pwned\x07\tx\\y"
    app.audit.record(repo="cli", op="GetObject", path=evil_path, user=evil_user, frontend="s3")
    app.audit.close()
    stored = [r for r in audit_json(home, "--op", "GetObject")]
    assert [(r["user"], r["path"]) for r in stored] == [(evil_user, evil_path)]
    table = run(home, "audit", "--repo", "cli", "--op", "GetObject").stdout
    assert "\x1b" not in table and "\x07" not in table and "\t" not in table
    assert shown(evil_user) in table and shown(evil_path) in table and table.count("\n") == 1
    assert shown(evil_user) == "eve\\x1b[31m\\x0aroot"
