"""``lakemount mount`` / ``umount`` argument handling, and errors that keep their category across the fork."""

from __future__ import annotations

import os
import subprocess

import pytest

from lakemount.cli.mount import parse_ref, parse_size
from lakemount.errors import InvalidArgument
from tests.fuse.mounting import env_for, lakemount_cmd, needs_fuse


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0", 0), ("1048576", 1 << 20), ("512M", 512 << 20), ("10G", 10 << 30), ("1.5GiB", 3 << 29), ("64k", 64 << 10)],
)
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "ten", "10X", "-1G"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(InvalidArgument):
        parse_size(text)


def test_parse_ref() -> None:
    assert parse_ref("demo/main") == ("demo", "main")
    assert parse_ref("lakefs://demo/main~2") == ("demo", "main~2")
    for bad in ("demo", "demo/", "/main", "demo/a/b"):
        with pytest.raises(InvalidArgument):
            parse_ref(bad)


def test_umount_of_nothing_is_an_error(home: str, tmp_path: os.PathLike[str]) -> None:
    proc = subprocess.run(
        lakemount_cmd("umount", os.fspath(tmp_path)), env=env_for(home), capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and "nothing is mounted" in proc.stderr


@needs_fuse[0]
@needs_fuse[1]
def test_mount_errors_keep_their_category(home: str, tmp_path: os.PathLike[str]) -> None:
    from lakemount.app import App

    App.from_config().catalog.create_repository("repo")
    mp = os.path.join(os.fspath(tmp_path), "mnt")
    env = env_for(home)
    bad_ref = subprocess.run(lakemount_cmd("mount", mp, "--ref", "repo/nope"), env=env, capture_output=True, text=True, timeout=90)
    assert bad_ref.returncode == 3 and "nope" in bad_ref.stderr  # NotFound
    bad_size = subprocess.run(lakemount_cmd("mount", mp, "--cache-size", "lots"), env=env, capture_output=True, text=True, timeout=90)
    assert bad_size.returncode == 2  # InvalidArgument, before anything starts
    with open("/proc/self/mountinfo") as f:
        assert mp not in f.read()
