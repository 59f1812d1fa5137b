"""The link-group rules every front end shares: what an entry's group says and who is a member of it."""

from __future__ import annotations

from lakemount.catalog.links import group_of, members, new_group_id, with_group
from lakemount.catalog.model import Entry


def test_a_group_lists_its_names_sorted_and_one_name_is_no_group() -> None:
    base = Entry("data/x", 1)
    gid = new_group_id()
    entry = with_group(base, gid, ["b", "a/c", "b"])
    group = group_of(entry)
    assert group is not None and group.gid == gid and group.names == ("a/c", "b")
    assert with_group(entry, gid, ["b"]).link == "" and group_of(with_group(entry, gid, ["b"])) is None
    assert group_of(base) is None and group_of(None) is None


def test_members_are_the_listed_names_holding_the_same_entry() -> None:
    entry = with_group(Entry("data/x", 1), "g", ["a", "b", "c"])
    held = {"a": entry, "b": entry, "c": Entry("data/y", 2)}  # c was overwritten by a front end that knows no links
    assert members(entry, "a", held.get) == ("a", "b")
    assert members(entry, "z", held.get) == ("z",)  # a copy that does not list its own name is a file of one name
    assert members(Entry("data/x", 1), "a", held.get) == ("a",)
