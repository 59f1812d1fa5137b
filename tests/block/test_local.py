"""LocalAdapter behaviour beyond the conformance suite: URL rules, temp files, path clashes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lakemount.block.local import TEMP_PREFIX, LocalAdapter
from lakemount.errors import InvalidArgument, ObjectNotFound


def test_url_maps_to_the_file_verbatim(tmp_path: Path) -> None:
    adapter = LocalAdapter()
    adapter.put(f"local://{tmp_path}/a/b c.txt", b"x")
    assert (tmp_path / "a" / "b c.txt").read_bytes() == b"x"
    assert LocalAdapter.path_of(f"local://{tmp_path}/a") == f"{tmp_path}/a"


@pytest.mark.parametrize(
    "url",
    [
        "local://relative/path",
        "local:///",
        "local:///a//b",
        "local:///a/./b",
        "local:///a/../b",
        "local:///a/b/",
        "file:///a/b",
        "/no/scheme",
    ],
)
def test_bad_urls_are_rejected(url: str) -> None:
    with pytest.raises(InvalidArgument):
        LocalAdapter().get(url)


def test_list_skips_temp_files_and_put_refuses_them(tmp_path: Path) -> None:
    adapter = LocalAdapter()
    adapter.put(f"local://{tmp_path}/d/real", b"1")
    (tmp_path / "d" / f"{TEMP_PREFIX}123-real").write_bytes(b"partial")
    assert [i.url for i in adapter.list(f"local://{tmp_path}/")] == [f"local://{tmp_path}/d/real"]
    with pytest.raises(InvalidArgument):
        adapter.put(f"local://{tmp_path}/d/{TEMP_PREFIX}x", b"1")


def test_no_temp_file_left_behind(tmp_path: Path) -> None:
    adapter = LocalAdapter()
    adapter.put(f"local://{tmp_path}/k", b"data")
    src = tmp_path / "src"
    src.write_bytes(b"file")
    adapter.put_file(f"local://{tmp_path}/k2", str(src))
    assert sorted(os.listdir(tmp_path)) == ["k", "k2", "src"]


def test_failed_write_leaves_old_object_and_no_temp(tmp_path: Path) -> None:
    adapter = LocalAdapter()
    url = f"local://{tmp_path}/k"
    adapter.put(url, b"old")
    with pytest.raises(TypeError):
        adapter.put(url, "not bytes")  # type: ignore[arg-type]
    assert adapter.get(url) == b"old"
    assert os.listdir(tmp_path) == ["k"]


def test_object_under_an_object_is_invalid(tmp_path: Path) -> None:
    adapter = LocalAdapter()
    adapter.put(f"local://{tmp_path}/a", b"file")
    with pytest.raises(InvalidArgument):
        adapter.put(f"local://{tmp_path}/a/b", b"x")
    with pytest.raises(ObjectNotFound):
        adapter.get(f"local://{tmp_path}/a/b")


def test_list_of_missing_directory_is_empty(tmp_path: Path) -> None:
    assert list(LocalAdapter().list(f"local://{tmp_path}/nope/")) == []


def test_open_returns_a_real_seekable_file(tmp_path: Path) -> None:
    adapter = LocalAdapter()
    adapter.put(f"local://{tmp_path}/f", b"0123456789")
    with adapter.open(f"local://{tmp_path}/f") as f:
        assert f.seekable()
        f.seek(7)
        assert f.read() == b"789"
