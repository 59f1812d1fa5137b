"""``lakemount import`` without a source: lakeFS's import of no paths, one empty commit with its message and metadata."""

from __future__ import annotations

from pathlib import Path

from tests.cli.test_cli import js, run


def test_import_of_no_source_is_one_empty_commit(tmp_path: Path) -> None:
    home = tmp_path / "home"
    run(home, "repo", "create", "lakefs://imp")
    head = js(home, "show", "lakefs://imp/main")["id"]  # type: ignore[index,call-overload]
    out = js(home, "import", "--to", "lakefs://imp/main", "--commit", "-m", "nothing yet", "--meta", "batch=7")
    assert isinstance(out, dict) and out["objects"] == 0 and out["sources"] == []
    commit = js(home, "show", "lakefs://imp/main")
    assert isinstance(commit, dict) and commit["id"] == out["commit"]["id"] != head
    assert commit["message"] == "nothing yet" and commit["metadata"] == {"batch": "7"} and commit["parents"] == [head]
    assert js(home, "fs", "ls", "lakefs://imp/main/", "-r") == []
    # Without --commit there is nothing to do; on a branch with uncommitted changes the commit would take them.
    p = run(home, "import", "--to", "lakefs://imp/main", ok=False)
    assert p.returncode != 0 and "add --commit" in p.stderr, p.stderr
    src = tmp_path / "f"
    src.write_bytes(b"x")
    run(home, "fs", "upload", "lakefs://imp/main/f", "--source", str(src))
    p = run(home, "import", "--to", "lakefs://imp/main", "--commit", "-m", "m", ok=False)
    assert p.returncode != 0 and "uncommitted changes" in p.stderr, p.stderr
    assert js(home, "show", "lakefs://imp/main")["id"] == out["commit"]["id"]  # type: ignore[index,call-overload]
