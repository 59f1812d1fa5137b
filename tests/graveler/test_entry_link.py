"""An entry's hard-link group: encoded only when set, so older entries keep their bytes, and round-tripped by
staging, commits and the C table encoder like every other field."""

from __future__ import annotations

from pathlib import Path

import msgpack

from lakemount.app import App
from lakemount.catalog.storage import value_address
from lakemount.config import load
from lakemount.graveler.model import Entry, decode_entry, decode_value


def test_an_entry_without_a_group_keeps_its_ten_field_encoding() -> None:
    plain = Entry("data/ab/cd", 3, "e", 1, "text/plain", (("k", "v"),))
    assert len(msgpack.unpackb(plain.encode()[1:])) == 10
    linked = plain._replace(link="g\0a\0b")
    assert len(msgpack.unpackb(linked.encode()[1:])) == 11
    assert plain.identity() != linked.identity()
    for entry in (plain, linked):
        assert decode_entry(entry.encode()) == entry
        assert decode_value(entry.value()) == entry
        assert value_address(entry.value()) == "data/ab/cd"  # GC's fast path reads both shapes


def test_a_group_survives_staging_and_a_commit(tmp_path: Path) -> None:
    app = App(load(env={"LAKEMOUNT_HOME": str(tmp_path / "home"), "LAKEMOUNT_CACHE_DISK_BYTES": "0"}))
    app.catalog.create_repository("repo")
    entry = Entry("data/ab/cd", 3, "e", 1, link="g\0a\0b")
    app.catalog.apply("repo", "main", [("a", entry), ("b", entry)])
    assert app.catalog.get_optional("repo", "main", "b") == entry
    cid = app.graveler.commit("repo", "main", "linked").commit.id
    assert app.catalog.get_optional("repo", cid, "a") == entry
    assert app.catalog.get_optional("repo", cid, "b") == entry
