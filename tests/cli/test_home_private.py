"""LAKEMOUNT_HOME is its user's alone: the home 0700, every file lakemount makes there 0600, every directory 0700.

Before, ``lakemount.db`` was made 0644 and ``data/``, ``cache/`` and ``tmp/``
0755 (under the usual umask 022): any local user read every object and the
whole ref store, past every policy.
"""

from __future__ import annotations

import os
import stat
import subprocess

import pytest

from tests.cli.running import lakemount


def run(home: str, *args: str, umask: int = 0o022) -> subprocess.CompletedProcess[str]:
    """``lakemount ARGS`` in this process (tests/cli/running.py), started under ``umask``, no other LAKEMOUNT_*."""
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("LAKEMOUNT_")}
    proc = lakemount(home, *args, env={**env, "LAKEMOUNT_HOME": home}, umask=umask)
    assert proc.returncode == 0, (args, proc.stderr)
    return proc


def modes(root: str) -> dict[str, int]:
    out = {}
    for path, dirs, files in os.walk(root):
        for name in [*dirs, *files, ""]:
            full = os.path.join(path, name) if name else path
            out[os.path.relpath(full, root)] = os.lstat(full).st_mode
    return out


@pytest.fixture
def home(tmp_path: os.PathLike[str]) -> str:
    return os.path.join(os.fspath(tmp_path), "home")


def test_everything_lakemount_makes_in_its_home_is_private(home: str, tmp_path: os.PathLike[str]) -> None:
    source = os.path.join(os.fspath(tmp_path), "source.txt")
    with open(source, "w") as f:
        f.write("secret\n")
    run(home, "repo", "create", "lakefs://demo")
    run(home, "fs", "upload", "lakefs://demo/main/d/a.txt", "--source", source)
    run(home, "commit", "lakefs://demo/main", "-m", "one")
    assert run(home, "fs", "cat", "lakefs://demo/main/d/a.txt").stdout == "secret\n"  # fills the disk cache
    run(home, "auth", "users", "create", "--id", "bob")
    run(home, "auth", "users", "credentials", "create", "--id", "bob")
    found = modes(home)
    # What the issue named is there, so the check below covers it.
    assert {"lakemount.db", "data", "cache", "server.key"} <= set(found), sorted(found)
    assert any(p.startswith("data/demo/data/") and stat.S_ISREG(m) for p, m in found.items()), sorted(found)
    assert any(p.startswith("cache/") and stat.S_ISREG(m) for p, m in found.items()), sorted(found)
    open_to_others = {p: f"{stat.S_IMODE(m):o}" for p, m in found.items() if m & 0o077}
    assert not open_to_others, open_to_others
    assert stat.S_IMODE(found["."]) == 0o700
    assert all(stat.S_IMODE(m) == 0o600 for m in found.values() if stat.S_ISREG(m)), found


def test_an_older_homes_open_modes_are_tightened_with_a_warning(home: str) -> None:
    run(home, "repo", "create", "lakefs://demo")
    # What an older version left: everything readable by all.
    for path in (home, os.path.join(home, "data"), os.path.join(home, "cache")):
        os.chmod(path, 0o755)
    os.chmod(os.path.join(home, "lakemount.db"), 0o644)
    proc = run(home, "repo", "list")
    assert "made private to this user" in proc.stderr and "lakemount.db (644)" in proc.stderr, proc.stderr
    for name, mode in (("", 0o700), ("data", 0o700), ("cache", 0o700), ("lakemount.db", 0o600)):
        assert stat.S_IMODE(os.stat(os.path.join(home, name)).st_mode) == mode, name
    assert "made private" not in run(home, "repo", "list").stderr  # said once, when it changed something


def test_downloads_keep_the_users_umask(home: str, tmp_path: os.PathLike[str]) -> None:
    # The home's privacy is lakemount's; a file downloaded for the user is the user's, like any tool's output.
    source = os.path.join(os.fspath(tmp_path), "source.txt")
    with open(source, "w") as f:
        f.write("x")
    run(home, "repo", "create", "lakefs://demo")
    run(home, "fs", "upload", "lakefs://demo/main/d/a.txt", "--source", source)
    dest = os.path.join(os.fspath(tmp_path), "out")
    run(home, "fs", "download", "--recursive", "lakefs://demo/main/", dest)
    assert stat.S_IMODE(os.stat(os.path.join(dest, "d")).st_mode) == 0o755
    assert stat.S_IMODE(os.stat(os.path.join(dest, "d", "a.txt")).st_mode) == 0o644
