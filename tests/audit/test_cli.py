"""The CLI's records (data verbs and versioning verbs, as the local account) and ``lakemount audit``'s filters."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lakemount.app import App
from lakemount.audit.record import shown
from lakemount.config import load
from tests.cli.running import lakemount

LAKEMOUNT = [sys.executable, "-m", "lakemount.cli.main"]
ROOT = Path(__file__).resolve().parents[2]


def run(home: Path, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    """``lakemount ARGS`` in this process (tests/cli/running.py), with no LAKEMOUNT_* but the home's."""
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("LAKEMOUNT_")}
    p = lakemount(home, *args, env={**env, "LAKEMOUNT_HOME": str(home), "LAKEMOUNT_CACHE_DISK_BYTES": "0"})
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


def test_failed_cli_verbs_are_records_with_their_status(tmp_path: Path) -> None:
    home = tmp_path / "home"
    run(home, "repo", "create", "lakefs://failing")
    assert run(home, "fs", "cat", "lakefs://failing/main/missing.csv", ok=False).returncode == 3
    run(home, "branch-protect", "add", "lakefs://failing", "main")
    src = tmp_path / "x"
    src.write_bytes(b"x")
    assert run(home, "fs", "upload", "lakefs://failing/main/x", "--source", str(src), ok=False).returncode == 10
    assert run(home, "commit", "lakefs://failing/main", "-m", "refused", "--allow-empty", ok=False).returncode == 10
    assert run(home, "branch", "delete", "lakefs://failing/nobranch", "--yes", ok=False).returncode == 3
    recs = json.loads(run(home, "audit", "--repo", "failing", "--json").stdout)
    failed = [(r["op"], r["ref"], r["path"], r["status"]) for r in recs if r["status"] != 200]
    assert failed == [("cat", "main", "missing.csv", 404), ("upload", "main", "x", 403), ("commit", "main", "", 403),
                      ("branch-deleted", "nobranch", "", 404)]
    assert all(r["frontend"] == "cli" for r in recs)
    assert "protected" in json.loads(next(r for r in recs if r["op"] == "commit")["detail"])["error"]


def test_cli_audit_through_the_api_needs_audit_read_else_exit_10(tmp_path: Path) -> None:
    from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET, start_gateway

    gw = start_gateway(tmp_path, workers=1, api=True)
    try:
        assert gw.proc.stdout is not None
        api = gw.proc.stdout.readline().split("listening on ", 1)[1].split()[0]
        gw.cli("repo", "create", "lakefs://remote")
        gw.app().catalog.put("remote", "main", "f", b"f")
        gw.cli("fs", "stat", "lakefs://remote/main/f")
        key, secret = gw.user("analyst", "Developer")
        base = {**gw.env, "PYTHONPATH": str(ROOT), "LAKECTL_SERVER_ENDPOINT_URL": api}

        def audit(k: str, s: str) -> subprocess.CompletedProcess[str]:
            env = {**base, "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": k, "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": s}
            return subprocess.run([*LAKEMOUNT, "audit", "--repo", "remote", "--json"], capture_output=True, text=True,
                                  env=env, timeout=120)

        refused = audit(key, secret)
        assert refused.returncode == 10, refused.stderr
        assert refused.stderr.startswith("error: ") and "AuditRead" in refused.stderr
        assert audit(key, "wrong-secret").returncode == 10
        allowed = audit(ADMIN_KEY, ADMIN_SECRET)
        assert allowed.returncode == 0, allowed.stderr
        # The CLI verb's record was in this host's spool: the API wrote it before answering.
        assert [(r["op"], r["path"], r["frontend"]) for r in json.loads(allowed.stdout)] == [("stat", "f", "cli")]
    finally:
        gw.stop()


def test_audit_takes_the_repository_as_every_verb_does(home: Path) -> None:
    """Issue 38 item 2: ``audit lakefs://REPO`` (options before or after it) and ``--repo lakefs://REPO``."""
    deadline = time.monotonic() + 60
    while not (by_flag := audit_json(home)):  # a detached flush the fixture's verbs started may hold the spool
        assert time.monotonic() < deadline, "the module's verbs' records never reached the audit table"
        time.sleep(0.5)
    for args in (["lakefs://cli"], ["--repo", "lakefs://cli"], ["lakefs://cli", "--repo", "cli"]):
        assert json.loads(run(home, "audit", *args, "--json").stdout) == by_flag, args
    cats = json.loads(run(home, "audit", "--op", "cat", "lakefs://cli", "--json").stdout)
    assert cats == json.loads(run(home, "audit", "lakefs://cli", "--op", "cat", "--json").stdout)
    assert [r["op"] for r in cats] == ["cat"]
    on_ref = run(home, "audit", "--repo", "lakefs://cli/main", ok=False)  # --repo is the repository; the URI says more
    assert on_ref.returncode == 2 and "acts on the whole repository" in on_ref.stderr
    other = run(home, "audit", "lakefs://cli", "--repo", "other", ok=False)
    assert other.returncode == 2 and "different repositories" in other.stderr
    missing = run(home, "audit", ok=False)
    assert missing.returncode == 2 and "lakemount audit lakefs://REPO" in missing.stderr
    assert "written" in json.loads(run(home, "audit", "flush", "--json").stdout)
    shown_help = run(home, "audit", "--help").stdout
    assert "lakefs://REPO" in shown_help and "Usage: lakemount audit [OPTIONS] lakefs://REPO[/REF[/PATH]]" in shown_help


def test_audit_takes_a_ref_and_a_path_in_the_uri(home: Path) -> None:
    """Issue 38 item 2: ``audit lakefs://REPO/REF[/PATH]`` keeps what was done on that ref (under that path)."""
    src = home.parent / "b.csv"
    src.write_bytes(b"b\n")
    run(home, "repo", "create", "lakefs://cliref")
    run(home, "fs", "upload", "lakefs://cliref/main/x/on-main", "--source", str(src))
    run(home, "branch", "create", "lakefs://cliref/dev", "--source", "lakefs://cliref/main")
    for path in ("x/1", "y/2"):
        run(home, "fs", "upload", f"lakefs://cliref/dev/{path}", "--source", str(src))
    run(home, "fs", "cat", "lakefs://cliref/dev/x/1")

    def asked(*args: str) -> list[tuple[object, ...]]:
        return [(r["ref"], r["op"], r["path"]) for r in json.loads(run(home, "audit", *args, "--json").stdout)]

    everything = asked("lakefs://cliref")
    assert ("main", "upload", "x/on-main") in everything and ("dev", "upload", "y/2") in everything
    assert asked("lakefs://cliref/dev") == [r for r in everything if r[0] == "dev"]
    assert {r[1] for r in asked("lakefs://cliref/dev")} == {"branch-created", "upload", "cat"}
    under_x = [("dev", "upload", "x/1"), ("dev", "cat", "x/1")]
    assert asked("lakefs://cliref/dev/x/") == under_x
    assert asked("lakefs://cliref/dev/x/", "--path", "x/") == under_x  # the same path twice is the path
    assert asked("--repo", "cliref", "--path", "x/") == [("main", "upload", "x/on-main"), *under_x]
    assert asked("lakefs://cliref/dev/x/", "--op", "cat") == under_x[1:]
    two_paths = run(home, "audit", "lakefs://cliref/dev/x/", "--path", "y/", ok=False)
    assert two_paths.returncode == 2 and "different paths" in two_paths.stderr


def test_audit_lists_newest_first_by_kind_and_several_operations(home: Path) -> None:
    """Issue 38 item 3's query in the CLI: --newest-first (with --limit: the last records), --kind, --op repeated."""
    from lakemount.audit import operations

    deadline = time.monotonic() + 60
    while not {"upload", "commit", "cat"} <= {r["op"] for r in audit_json(home)}:
        assert time.monotonic() < deadline, "the module's verbs' records never reached the audit table"
        time.sleep(0.5)
    oldest = audit_json(home)
    assert audit_json(home, "--newest-first") == oldest[::-1]
    assert audit_json(home, "--newest-first", "--limit", "1") == oldest[-1:]
    writes = {str(r["op"]) for r in audit_json(home, "--kind", "write")}
    assert {"upload", "commit"} <= writes <= operations.names(kind="write")
    assert {r["op"] for r in audit_json(home, "--op", "cat", "--op", "upload")} == {"cat", "upload"}
    assert audit_json(home, "--op", "cat", "--kind", "write") == []
    shown_help = run(home, "audit", "--help").stdout
    assert "--newest-first" in shown_help and "--kind [read|write|other]" in shown_help
