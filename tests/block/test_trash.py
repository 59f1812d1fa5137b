"""``TrashFallbackAdapter`` and the trash layout: byte reads find GC's trash, nothing else does."""

from __future__ import annotations

import hashlib

import pytest

from lakemount.block.memory import MemoryAdapter
from lakemount.block.trash import TrashFallbackAdapter, original_key, trash_key, trash_url
from lakemount.errors import ObjectNotFound

NS = "mem://lake/ns"
SHA = hashlib.sha256(b"payload").hexdigest()
DATA = f"data/{SHA[:2]}/{SHA}"
TABLE = "_lakefs/" + "7" * 64


def test_layout_maps_only_what_gc_collects() -> None:
    assert trash_key(DATA) == f"_lakefs/gc/trash/data/{SHA[:2]}/{SHA}"
    assert trash_key(TABLE) == "_lakefs/gc/trash/tables/" + "7" * 64
    for key in (DATA, TABLE):
        assert original_key(trash_key(key) or "") == key
        assert trash_url(f"{NS}/{key}") == f"{NS}/{trash_key(key)}"
    wrong_prefix = f"data/00/{SHA}" if not SHA.startswith("00") else f"data/11/{SHA}"
    for key in (wrong_prefix, "_lakefs/commits/" + "7" * 64, "_lakefs/" + "A" * 64, "data/ab/readme.txt", "_lakefs/gc/rules.json"):
        assert trash_key(key) is None, key
        assert trash_url(f"{NS}/{key}") is None, key
    # A trash URL has no trash of its own.
    assert trash_url(f"{NS}/{trash_key(DATA)}") is None
    assert original_key("_lakefs/gc/trash/data/zz/x") is None


@pytest.fixture
def stores() -> tuple[MemoryAdapter, TrashFallbackAdapter]:
    inner = MemoryAdapter()
    inner.put(f"{NS}/{trash_key(DATA)}", b"payload")
    return inner, TrashFallbackAdapter(inner)


def test_byte_reads_fall_back_to_the_trash(stores: tuple[MemoryAdapter, TrashFallbackAdapter]) -> None:
    _inner, adapter = stores
    url = f"{NS}/{DATA}"
    assert adapter.get(url) == b"payload"
    assert adapter.get_range(url, 3, 2) == b"lo"
    with adapter.open(url) as f:
        assert f.read() == b"payload"


def test_writers_and_stat_see_the_original_key_only(stores: tuple[MemoryAdapter, TrashFallbackAdapter]) -> None:
    inner, adapter = stores
    url = f"{NS}/{DATA}"
    with pytest.raises(ObjectNotFound):
        adapter.touch(url)  # so a deduplicating writer uploads the bytes again
    assert not adapter.exists(url)
    with pytest.raises(ObjectNotFound):
        adapter.stat(url)
    adapter.put(url, b"payload")
    assert inner.get(url) == b"payload"


def test_missing_everywhere_names_the_original(stores: tuple[MemoryAdapter, TrashFallbackAdapter]) -> None:
    _inner, adapter = stores
    other = hashlib.sha256(b"other").hexdigest()
    url = f"{NS}/data/{other[:2]}/{other}"
    with pytest.raises(ObjectNotFound, match=other):
        adapter.get(url)
    with pytest.raises(ObjectNotFound):
        adapter.get(f"{NS}/_lakefs/gc/rules.json")


def test_a_read_racing_a_restore_finds_the_object() -> None:
    """The object moves back from the trash between the two first attempts; the third finds it."""
    url = f"{NS}/{DATA}"
    trashed = f"{NS}/{trash_key(DATA)}"

    class Restoring(MemoryAdapter):
        def get(self, u: str) -> bytes:
            if u == trashed and self.exists(trashed):
                self.copy(trashed, url)
                self.delete(trashed)
            return super().get(u)

    inner = Restoring()
    inner.put(trashed, b"payload")
    assert TrashFallbackAdapter(inner).get(url) == b"payload"
    assert inner.exists(url) and not inner.exists(trashed)
