"""Which commits GC rules retain, the rules' storage, and reading addresses from record values (no Spark)."""

from __future__ import annotations

import pytest

from lakemount.block.layout import data_sha, is_data_name, is_table_name
from lakemount.block.memory import MemoryAdapter
from lakemount.catalog.storage import value_address
from lakemount.errors import InvalidArgument
from lakemount.graveler.model import DIR_MODE, Commit, CommitID, Entry, MetaRangeID
from lakemount.jobs.addresses import namespace_key
from lakemount.jobs.retention import DAY, GcRules, delete_rules, load_rules, retained_commits, store_rules

NOW = 1_000 * DAY


def commit(cid: str, days_ago: float, *parents: str) -> Commit:
    return Commit(CommitID(cid), tuple(CommitID(p) for p in parents), MetaRangeID("m" + cid), "", cid, "t", NOW - days_ago * DAY)


def history() -> dict[str, Commit]:
    # main: a(60) <- b(40) <- c(20) <- d(5) <- m(1, merge of d and f)
    # feat: a <- e(30) <- f(2)
    # gone: a <- g(50) <- h(3)   (branch deleted: g, h dangling)
    cs = [
        commit("a", 60), commit("b", 40, "a"), commit("c", 20, "b"), commit("d", 5, "c"),
        commit("e", 30, "a"), commit("f", 2, "e"), commit("m", 1, "d", "f"),
        commit("g", 50, "a"), commit("h", 3, "g"),
    ]
    return {c.id: c for c in cs}


def test_branch_retention_keeps_recent_commits_and_the_head_at_the_cutoff() -> None:
    rules = GcRules(7, (("main", 25),))
    kept = retained_commits(history(), {"main": CommitID("m"), "feat": CommitID("f")}, [], rules, NOW)
    # main (25 days): m, d, c (20 days), f via the merge (2 days), and b: main's head 25 days ago.
    # feat (7 days): f, and e: feat's head 7 days ago.  Dangling: h (3 days < 7), not g (50 days).
    assert kept == {"m", "d", "c", "b", "f", "e", "h"}


def test_a_shorter_rule_seen_first_does_not_cut_a_longer_walk() -> None:
    cs = history()
    # feat points at main's head: walked first (7 days) it keeps m and d only; main (25 days) must still reach c.
    kept = retained_commits(cs, {"a-feat": CommitID("m"), "main": CommitID("m")}, [], GcRules(7, (("main", 25),)), NOW)
    assert {"m", "d", "c", "b"} <= kept


def test_tags_keep_their_commit_only_and_heads_are_always_kept() -> None:
    rules = GcRules(0)
    kept = retained_commits(history(), {"main": CommitID("m")}, [CommitID("b")], rules, NOW)
    # 0 days: only the head, the head "0 days ago" (itself) and the tag; nothing dangling survives.
    assert kept == {"m", "b"}


def test_missing_parents_are_skipped_not_guessed() -> None:
    cs = history()
    del cs["c"]
    kept = retained_commits(cs, {"main": CommitID("d")}, [], GcRules(0, (("main", 100),)), NOW)
    assert "d" in kept and "b" not in kept


def test_rules_round_trip_in_lakefs_form_and_validation() -> None:
    rules = GcRules.from_json({"default_retention_days": 7, "branches": [{"branch_id": "main", "retention_days": 30}]})
    assert rules.days_for("main") == 30 and rules.days_for("dev") == 7
    assert GcRules.from_json(rules.to_json()) == rules
    assert rules.keeps_history and not GcRules(0, (("x", 0),)).keeps_history
    with pytest.raises(InvalidArgument):
        GcRules(-1)
    with pytest.raises(InvalidArgument):
        GcRules.from_json({"branches": []})
    with pytest.raises(InvalidArgument):
        GcRules.from_json({"default_retention_days": 1, "branches": [{"branch_id": "a", "retention_days": 1}] * 2})
    adapter = MemoryAdapter()
    assert load_rules(adapter, "mem://ns") is None
    store_rules(adapter, "mem://ns", rules)
    assert load_rules(adapter, "mem://ns") == rules
    delete_rules(adapter, "mem://ns")
    assert load_rules(adapter, "mem://ns") is None


@pytest.mark.parametrize("address", ["data/ab/" + "ab" * 32, "x" * 40, "y" * 300, "z" * 70000, "s3://b/k"])
def test_value_address_reads_the_address_without_decoding(address: str) -> None:
    entry = Entry(address, 5, "e" * 32, 7, "text/plain", (("k", "v"),))
    assert value_address(entry.value()) == address
    assert value_address(Entry("", 0, "", 1, "", (), DIR_MODE).value()) == ""


def test_namespace_layout_checks() -> None:
    sha = "ab" + "0" * 62
    assert namespace_key("data/x", "local:///ns") == "data/x"
    assert namespace_key("local:///ns/data/x", "local:///ns") == "data/x"
    assert namespace_key("local:///nsx/data/x", "local:///ns") is None
    assert data_sha(f"data/ab/{sha}") == sha
    assert data_sha(f"data/cd/{sha}") is None and data_sha("data/ab/short") is None
    assert is_data_name("ab", sha) and not is_data_name("cd", sha) and not is_data_name("ab", sha.upper())
    assert is_table_name("f" * 64) and not is_table_name("commits") and not is_table_name("f" * 63)
