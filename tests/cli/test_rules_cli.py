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
