"""The CLI over PostgreSQL URLs: the bare ``postgresql://`` form works; store errors are one line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.cli.running import lakemount


def run(home: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``lakemount ARGS`` in this process (tests/cli/running.py) on the database at ``url``."""
    return lakemount(home, *args, env={"LAKEMOUNT_METADATA_DB_URL": url, "LAKEMOUNT_CACHE_DISK_BYTES": "0"})


@pytest.mark.parametrize(
    ("url", "code", "says"),
    [
        ("postgresql://lm:secret@127.0.0.1:1/lake", 9, "error: ref store at postgresql 127.0.0.1:1/lake (metadata.db.url): "),
        ("postgresql+psycopg2://lm:secret@nohost.invalid/lake", 9, "error: ref store at postgresql nohost.invalid:5432/lake"),
        ("nourl", 2, "error: metadata.db.url: not a database URL"),
        ("postgresql+psycopg://lm:secret@h/lake", 2, "error: metadata.db.url: no driver for postgresql+psycopg://lm:***@h/lake"),
    ],
)
@pytest.mark.parametrize("verb", [("repo", "list"), ("mount", "MNT"), ("mount", "--foreground", "MNT"), ("serve",)])
def test_store_errors_are_one_line(tmp_path: Path, url: str, code: int, says: str, verb: tuple[str, ...]) -> None:
    args = [str(tmp_path / "mnt") if a == "MNT" else a for a in verb]
    p = run(tmp_path / "home", url, *args)
    assert p.returncode == code, p.stderr
    assert p.stderr.startswith(says), p.stderr
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr and "secret" not in p.stderr


@pytest.mark.postgres
def test_bare_postgresql_url_works_end_to_end(tmp_path: Path, pg_url: str) -> None:  # noqa: F811
    url = "postgresql://" + pg_url.split("://", 1)[1]
    src = tmp_path / "a.txt"
    src.write_text("hello\n")
    home = tmp_path / "home"
    for args in (
        ("repo", "create", "lakefs://demo"),
        ("fs", "upload", "lakefs://demo/main/a.txt", "--source", str(src)),
        ("commit", "lakefs://demo/main", "-m", "first"),
    ):
        p = run(home, url, *args)
        assert p.returncode == 0, p.stderr
    p = run(home, url, "fs", "cat", "lakefs://demo/main/a.txt")
    assert p.returncode == 0 and p.stdout == "hello\n", p.stderr
