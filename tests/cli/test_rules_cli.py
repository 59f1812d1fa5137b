"""Repository rules from the command line: ``branch-protect`` and, below, ``actions``."""

from __future__ import annotations

from pathlib import Path

from tests.cli.test_cli import js, run


def test_branch_protect_add_list_delete_and_enforcement(tmp_path: Path) -> None:
    home = tmp_path / "home"
    src = tmp_path / "a.csv"
    src.write_bytes(b"x\n")
    run(home, "repo", "create", "lakefs://rules")
    run(home, "fs", "upload", "lakefs://rules/main/a.csv", "--source", str(src))
    run(home, "commit", "lakefs://rules/main", "-m", "seed")
    run(home, "branch", "create", "lakefs://rules/dev", "--source", "lakefs://rules/main")
    assert js(home, "branch-protect", "add", "lakefs://rules", "main") == {"patterns": ["main"]}
    assert js(home, "branch-protect", "add", "lakefs://rules", "release-*") == {"patterns": ["main", "release-*"]}
    assert run(home, "branch-protect", "list", "lakefs://rules").stdout.split() == ["main", "release-*"]
    dup = run(home, "branch-protect", "add", "lakefs://rules", "main", ok=False)
    assert dup.returncode == 4 and dup.stderr.startswith("error: protection rule 'main' already exists")
    bad = run(home, "branch-protect", "add", "lakefs://rules", "a b", ok=False)
    assert bad.returncode == 2 and "whitespace" in bad.stderr and "Traceback" not in bad.stderr
    for args in (
        ("fs", "upload", "lakefs://rules/main/b.csv", "--source", str(src)),
        ("fs", "rm", "lakefs://rules/main/a.csv"),
        ("commit", "lakefs://rules/main", "-m", "direct", "--allow-empty"),
        ("reset", "lakefs://rules/main", "--yes"),
        ("cherry-pick", "lakefs://rules/dev", "lakefs://rules/main"),
    ):
        p = run(home, *args, ok=False)
        assert p.returncode == 10, (args, p.returncode, p.stderr)
        assert p.stderr.startswith("error: branch rules/main is protected (rule 'main')"), p.stderr
        assert len(p.stderr.strip().splitlines()) == 1
    run(home, "fs", "upload", "lakefs://rules/dev/b.csv", "--source", str(src))
    run(home, "commit", "lakefs://rules/dev", "-m", "on dev")
    merged = js(home, "merge", "lakefs://rules/dev", "lakefs://rules/main")
    assert isinstance(merged, dict) and merged["merged"] is True
    assert js(home, "branch-protect", "delete", "lakefs://rules", "main") == {"patterns": ["release-*"]}
    gone = run(home, "branch-protect", "delete", "lakefs://rules", "main", ok=False)
    assert gone.returncode == 3 and "no protection rule" in gone.stderr
    run(home, "fs", "rm", "lakefs://rules/main/a.csv")


CHECK = """name: guard
on:
  pre-commit:
    branches: [main]
hooks:
  - id: paths
    type: lakemount_check
    properties:
      allowed_paths: ["tables/*"]
      required_metadata: [owner]
"""


def test_a_pre_commit_hook_rejects_a_cli_commit_and_runs_are_listed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    action = tmp_path / "guard.yaml"
    action.write_text(CHECK)
    data = tmp_path / "d.csv"
    data.write_bytes(b"a\n1\n")
    assert "action 'guard'" in run(home, "actions", "validate", str(action)).stdout
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\non: {pre-push: {}}\nhooks: [{id: a, type: webhook}]\n")
    bad = run(home, "actions", "validate", str(broken), ok=False)
    assert bad.returncode == 2 and "unknown event 'pre-push'" in bad.stderr
    run(home, "repo", "create", "lakefs://hooks")
    run(home, "fs", "upload", "lakefs://hooks/main/_lakefs_actions/guard.yaml", "--source", str(action))
    run(home, "fs", "upload", "lakefs://hooks/main/misc/d.csv", "--source", str(data))
    p = run(home, "commit", "lakefs://hooks/main", "-m", "rejected", "--meta", "owner=me", ok=False)
    assert p.returncode == 10 and len(p.stderr.strip().splitlines()) == 1
    assert p.stderr.startswith("error: pre-commit rejected by hook guard/paths: 1 path(s) outside allowed_paths: misc/d.csv")
    run(home, "reset", "lakefs://hooks/main", "--object", "misc/d.csv")
    run(home, "fs", "upload", "lakefs://hooks/main/tables/d.csv", "--source", str(data))
    p = run(home, "commit", "lakefs://hooks/main", "-m", "no owner", ok=False)
    assert p.returncode == 10 and "missing commit metadata: owner" in p.stderr
    c = js(home, "commit", "lakefs://hooks/main", "-m", "fine", "--meta", "owner=me")
    assert isinstance(c, dict)
    runs = js(home, "actions", "runs", "list", "lakefs://hooks")
    assert isinstance(runs, list) and [r["status"] for r in runs] == ["completed", "failed", "failed"]
    assert all(r["event_type"] == "pre-commit" and r["branch"] == "main" for r in runs)
    shown = js(home, "actions", "runs", "show", "lakefs://hooks", runs[1]["run_id"])
    assert isinstance(shown, dict) and shown["hooks"][0]["hook_id"] == "paths"
    assert shown["hooks"][0]["status"] == "failed" and "missing commit metadata" in shown["hooks"][0]["output"]
    text = run(home, "actions", "runs", "describe", "lakefs://hooks", runs[0]["run_id"]).stdout
    assert "Hook guard/paths: completed" in text and "1 object(s) checked: ok" in text
    page = js(home, "actions", "runs", "list", "lakefs://hooks", "--amount", "1", "--after", runs[0]["run_id"])
    assert isinstance(page, list) and [r["run_id"] for r in page] == [runs[1]["run_id"]]
    missing = run(home, "actions", "runs", "show", "lakefs://hooks", "nope", ok=False)
    assert missing.returncode == 3 and "action run not found" in missing.stderr


def test_pull_requests_from_the_cli(tmp_path: Path) -> None:
    home = tmp_path / "home"
    src = tmp_path / "a.csv"
    src.write_bytes(b"x\n")
    run(home, "repo", "create", "lakefs://prs")
    run(home, "fs", "upload", "lakefs://prs/main/a.csv", "--source", str(src))
    run(home, "commit", "lakefs://prs/main", "-m", "seed")
    run(home, "branch", "create", "lakefs://prs/dev", "--source", "lakefs://prs/main")
    run(home, "fs", "upload", "lakefs://prs/dev/b.csv", "--source", str(src))
    run(home, "commit", "lakefs://prs/dev", "-m", "b")
    run(home, "branch-protect", "add", "lakefs://prs", "main", "--required-approvals", "1")
    listed = js(home, "branch-protect", "list", "lakefs://prs")
    assert listed == {"patterns": ["main"], "required_approvals": {"main": 1}}
    p = js(home, "pr", "create", "lakefs://prs", "-s", "dev", "-d", "main", "-t", "Add b", "--author", "ann")
    assert isinstance(p, dict) and (p["id"], p["status"], p["source_branch"], p["destination_branch"]) == ("1", "open", "dev", "main")
    run(home, "pr", "comment", "lakefs://prs", "1", "-m", "please <review>", "--author", "bob")
    early = run(home, "pr", "merge", "lakefs://prs", "1", ok=False)
    assert early.returncode == 6 and "has 0 of the 1 approvals main requires" in early.stderr
    own = run(home, "pr", "approve", "lakefs://prs", "1", "--user", "ann", ok=False)
    assert own.returncode == 6
    run(home, "pr", "approve", "lakefs://prs", "1", "--user", "bob")
    shown = js(home, "pr", "show", "lakefs://prs", "1")
    assert isinstance(shown, dict)
    assert shown["diff"] == [{"path": "b.csv", "type": "added"}] and shown["required_approvals"] == 1
    assert [a["user"] for a in shown["approvals"]] == ["bob"] and shown["comments"][0]["body"] == "please <review>"
    text = run(home, "pr", "show", "lakefs://prs", "1").stdout
    assert "Approvals: 1 of 1 required (bob)" in text and "added     b.csv" in text
    merged = js(home, "pr", "merge", "lakefs://prs", "1")
    assert isinstance(merged, dict) and merged["status"] == "merged" and merged["merged_commit_id"]
    assert run(home, "fs", "cat", "lakefs://prs/main/b.csv").stdout == "x\n"
    p2 = js(home, "pr", "create", "lakefs://prs", "-s", "dev", "-d", "main", "-t", "again")
    assert isinstance(p2, dict) and p2["id"] == "2"
    assert js(home, "pr", "close", "lakefs://prs", "2")["status"] == "closed"  # type: ignore[index]
    assert js(home, "pr", "list", "lakefs://prs") == []
    assert [x["id"] for x in js(home, "pr", "list", "lakefs://prs", "--status", "all")] == ["1", "2"]  # type: ignore[union-attr]
    assert js(home, "pr", "reopen", "lakefs://prs", "2")["status"] == "open"  # type: ignore[index]
    missing = run(home, "pr", "show", "lakefs://prs", "7", ok=False)
    assert missing.returncode == 3 and missing.stderr.strip() == "error: pull request not found: prs#7"
