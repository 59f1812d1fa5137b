"""The command line end to end: verbs, --json, one-line errors and exit codes."""

from __future__ import annotations

import functools
import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.cli.running import lakemount


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("demo") / "home"
    run(home, "up", "--no-services")
    return home


def run(home: Path, *args: str, ok: bool = True, stdin: str | None = None, process: bool = False
        ) -> subprocess.CompletedProcess[str]:
    """``lakemount ARGS`` in this process (a process of its own with ``process``, see tests/cli/running.py)."""
    p = lakemount(home, *args, stdin=stdin, env={"LAKEMOUNT_CACHE_DISK_BYTES": "0"}, process=process)
    if ok:
        assert p.returncode == 0, f"{args}: rc={p.returncode} stderr={p.stderr}"
    return p


def js(home: Path, *args: str, process: bool = False) -> object:
    return json.loads(run(home, *args, "--json", process=process).stdout)


@pytest.mark.parametrize("process", [True, False], ids=["process", "in-process"])
def test_round_trip_through_the_cli(home: Path, tmp_path: Path, process: bool) -> None:
    # Every step as its own `python -m lakemount.cli.main` too: the proof that the command runs as a process,
    # and that the in-process runner the other CLI tests use answers as the processes do.
    step, step_js = functools.partial(run, process=process), functools.partial(js, process=process)
    src = tmp_path / "a.csv"
    src.write_bytes(b"x,y\n1,2\n")
    step(home, "repo", "create", "lakefs://sales")
    step(home, "fs", "upload", "lakefs://sales/main/2026/a.csv", "--source", str(src))
    c1 = step_js(home, "commit", "lakefs://sales/main", "-m", "first", "--meta", "team=data")
    assert isinstance(c1, dict) and c1["metadata"] == {"team": "data"}
    step(home, "branch", "create", "lakefs://sales/fix", "--source", "lakefs://sales/main")
    step(home, "fs", "rm", "lakefs://sales/fix/2026/a.csv")
    assert step_js(home, "diff", "lakefs://sales/fix") == [{"path": "2026/a.csv", "type": "removed", "path_type": "object", "size_bytes": 0}]  # a staged removal has no size, as in lakeFS
    step(home, "commit", "lakefs://sales/fix", "-m", "drop")
    merged = step_js(home, "merge", "lakefs://sales/fix", "lakefs://sales/main")
    assert isinstance(merged, dict) and merged["merged"] is True
    assert step_js(home, "fs", "ls", "lakefs://sales/main/", "-r") == []
    assert step(home, "fs", "cat", "lakefs://sales/main~1/2026/a.csv").stdout == "x,y\n1,2\n"
    log = step_js(home, "log", "lakefs://sales/main", "--first-parent")
    assert isinstance(log, list) and [c["message"] for c in log][:2] == ["Merge 'fix' into 'main'", "first"]
    step(home, "tag", "create", "lakefs://sales/v1", "lakefs://sales/main~1")
    assert step(home, "fs", "cat", "lakefs://sales/v1/2026/a.csv").stdout == "x,y\n1,2\n"
    rev = step_js(home, "revert", "lakefs://sales/main", "main", "--parent-number", "1")
    assert isinstance(rev, dict)
    assert [r["path"] for r in step_js(home, "fs", "ls", "lakefs://sales/main/", "-r")] == ["2026/a.csv"]  # type: ignore[union-attr]


def test_recursive_upload_download(home: Path, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    for i in range(5):
        (tree / f"d{i % 2}").mkdir(parents=True, exist_ok=True)
        (tree / f"d{i % 2}" / f"f{i}.bin").write_bytes(os.urandom(1000 + i))
    run(home, "repo", "create", "lakefs://bulk")
    run(home, "fs", "upload", "lakefs://bulk/main/in", "--source", str(tree), "--recursive")
    run(home, "commit", "lakefs://bulk/main", "-m", "tree")
    out = tmp_path / "out"
    run(home, "fs", "download", "lakefs://bulk/main/in", str(out), "--recursive")
    for f in tree.rglob("*.bin"):
        assert (out / f.relative_to(tree)).read_bytes() == f.read_bytes()
    top = js(home, "fs", "ls", "lakefs://bulk/main/in")
    assert [x["path"] for x in top] == ["in/d0/", "in/d1/"]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (("repo", "create", "lakefs://Bad_Name"), 2, "invalid repository name"),
        (("branch", "create", "lakefs://demo/-x", "--source", "lakefs://demo/main"), 2, "invalid branch name"),
        (("tag", "create", "lakefs://demo/a..b", "lakefs://demo/main"), 2, "invalid tag name"),
        (("fs", "ls", "lakefs://demo/nope/"), 3, "ref not found"),
        (("fs", "ls", "lakefs://nosuch/main/"), 3, "repository not found"),
        (("branch", "delete", "lakefs://demo/main", "-y"), 2, "default branch"),
        (("commit", "lakefs://demo/main", "-m", "x"), 6, "nothing to commit"),
        (("fs", "cat", "lakefs://demo/main/missing.txt"), 3, "not found"),
        (("log", "lakefs://demo/main~99"), 3, "ref not found"),
        (("fs", "ls", "demo/main"), 2, "expected a URI"),
    ],
)
def test_bad_input_one_line_errors(demo_home: Path, args: tuple[str, ...], code: int, needle: str) -> None:
    home = demo_home
    before = run(home, "log", "lakefs://demo/main", "--json").stdout
    p = run(home, *args, ok=False)
    assert p.returncode == code, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], p.stderr
    assert run(home, "log", "lakefs://demo/main", "--json").stdout == before


def test_merge_conflict_lists_paths(home: Path, tmp_path: Path) -> None:
    f = tmp_path / "f"
    run(home, "repo", "create", "lakefs://conf")
    f.write_bytes(b"base")
    run(home, "fs", "upload", "lakefs://conf/main/p/x", "--source", str(f))
    run(home, "commit", "lakefs://conf/main", "-m", "base")
    run(home, "branch", "create", "lakefs://conf/dev", "--source", "lakefs://conf/main")
    for branch, content in (("main", b"m"), ("dev", b"d")):
        f.write_bytes(content)
        run(home, "fs", "upload", f"lakefs://conf/{branch}/p/x", "--source", str(f))
        run(home, "commit", f"lakefs://conf/{branch}", "-m", branch)
    p = run(home, "merge", "lakefs://conf/dev", "lakefs://conf/main", ok=False)
    assert p.returncode == 5 and "p/x" in p.stderr
    p = run(home, "merge", "lakefs://conf/dev", "lakefs://conf/main", "--strategy", "source-wins")
    assert run(home, "fs", "cat", "lakefs://conf/main/p/x").stdout == "d"


def test_help_explains_every_verb(home: Path) -> None:
    out = run(home, "--help").stdout
    for verb in ("repo", "branch", "commit", "log", "diff", "merge", "revert", "cherry-pick", "reset", "tag", "show", "fs", "recover", "up"):
        assert f"  {verb} " in out
        assert run(home, verb, "--help").stdout.startswith("Usage:")
