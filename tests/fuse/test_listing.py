"""Directory listings of a mounted branch (lakemount/fuse/listing.py): what a stale listing costs to list again."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from lakemount.app import App
from lakemount.catalog.model import Entry
from lakemount.fuse import listing
from lakemount.fuse.core import FileSystem
from tests.fuse.conftest import REPO
from tests.fuse.pathfs import PathFS

MAIN = f"/{REPO}/main"


def test_a_stale_listing_is_listed_again_decoding_only_what_changed(
    fs_factory: Callable[..., FileSystem], app: App, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A directory a copy writes into is listed again every ``head_ttl``: the names whose stored values
    are unchanged keep their decoded children, so a relist decodes only the new and the changed ones --
    and still shows what another process staged meanwhile."""
    fs = fs_factory(head_ttl=1.0)
    clock = [1000.0]
    monkeypatch.setattr(fs.state, "now", lambda: clock[0])
    pfs = PathFS(fs)
    for name in ("a", "b", "c", "d"):
        app.catalog.put(REPO, "main", f"dir/{name}", name.encode())
    assert pfs.listdir(f"{MAIN}/dir") == ["a", "b", "c", "d"]

    decoded: list[bytes] = []
    real = listing.decode_value

    def counted(value: bytes) -> Entry:
        decoded.append(value)
        return real(value)

    monkeypatch.setattr(listing, "decode_value", counted)
    app.catalog.put(REPO, "main", "dir/b", b"changed elsewhere")  # another process's writes, staged
    app.catalog.put(REPO, "main", "dir/e", b"new elsewhere")
    assert pfs.listdir(f"{MAIN}/dir") == ["a", "b", "c", "d"], "the listing is fresh: no relist within head_ttl"
    assert decoded == []

    clock[0] += 1.5  # past head_ttl: the next listing asks the catalog again
    assert pfs.listdir(f"{MAIN}/dir") == ["a", "b", "c", "d", "e"]
    assert len(decoded) == 2, f"decoded {len(decoded)} values: only dir/b (changed) and dir/e (new) were expected"
    assert pfs.lstat(f"{MAIN}/dir/b").size == len(b"changed elsewhere")
    assert pfs.read_file(f"{MAIN}/dir/b") == b"changed elsewhere"
    assert pfs.read_file(f"{MAIN}/dir/a") == b"a"
