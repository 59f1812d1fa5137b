"""lakeFS behaviours its clients rely on, through the unmodified ``lakefs`` SDK and ``lakefs-spec``:
empty merges, the wording of common refusals, cherry-pick metadata and the size of a staged removal."""

from __future__ import annotations

from typing import Any

import pytest
from lakefs.exceptions import BadRequestException, ConflictException


def test_merge_that_brings_nothing_is_no_changes_unless_allowed(repo: Any) -> None:
    main = repo.branch("main")
    main.object("a").upload(b"a")
    main.commit("a")
    dev = repo.branch("dev").create(main)
    head = main.head.id
    # dev holds nothing main lacks: lakeFS answers 400 "no changes" and makes no commit.
    with pytest.raises(BadRequestException, match="no changes"):
        dev.merge_into(main)
    assert main.head.id == head
    # dev's own commits that add up to nothing (a file added and removed again) bring nothing either.
    dev.object("tmp").upload(b"t")
    dev.commit("add tmp")
    dev.object("tmp").delete()
    dev.commit("drop tmp")
    main.object("b").upload(b"b")
    main.commit("b")
    head = main.head.id
    with pytest.raises(BadRequestException, match="no changes"):
        dev.merge_into(main)
    assert main.head.id == head
    # allow_empty records the merge commit all the same, with main's tree.
    merged = dev.merge_into(main, allow_empty=True)
    assert main.head.id == merged != head
    c = main.get_commit()
    assert len(c.parents) == 2 and c.parents[0] == head
    assert {o.path for o in main.objects()} == {"a", "b"}


def test_refusals_use_lakefs_wording(repo: Any) -> None:
    main = repo.branch("main")
    main.object("k").upload(b"base")
    main.commit("base")
    other = repo.branch("other").create(main)
    main.object("k").upload(b"main side")
    main.commit("main")
    other.object("k").upload(b"other side")
    other.commit("other")
    with pytest.raises(ConflictException, match="conflict found"):
        other.merge_into(main)
    main.object("dirty").upload(b"d")
    with pytest.raises(BadRequestException, match=r"uncommitted changes \(dirty branch\)"):
        other.merge_into(main, strategy="source-wins")
    main.reset_changes()
    with pytest.raises(BadRequestException, match="no changes"):
        main.commit("nothing")


def test_cherry_pick_records_its_origin(repo: Any) -> None:
    main = repo.branch("main")
    main.object("a").upload(b"a")
    main.commit("a")
    dev = repo.branch("dev").create(main)
    dev.object("fix").upload(b"fix")
    picked = dev.commit("the fix", metadata={"ticket": "42"}).get_commit()
    c = main.cherry_pick(picked.id)
    assert c.metadata["cherry-pick-origin"] == picked.id
    assert c.metadata["cherry-pick-committer"] == picked.committer
    assert c.metadata["ticket"] == "42"  # the picked commit's own metadata comes along
    assert c.message == picked.message


def test_uncommitted_removal_is_sized_zero(repo: Any) -> None:
    main = repo.branch("main")
    main.object("gone.bin").upload(b"x" * 1000)
    main.object("kept.bin").upload(b"y" * 10)
    main.commit("two")
    main.object("gone.bin").delete()
    main.object("new.bin").upload(b"z" * 7)
    sizes = {d.path: (d.type, d.size_bytes) for d in main.uncommitted()}
    assert sizes == {"gone.bin": ("removed", 0), "new.bin": ("added", 7)}
    # Between two commits, a removal keeps the removed object's size (lakeFS's refs diff).
    before = main.head.id
    main.commit("drop and add")
    sizes = {d.path: (d.type, d.size_bytes) for d in repo.ref(before).diff(main)}
    assert sizes == {"gone.bin": ("removed", 1000), "new.bin": ("added", 7)}


def test_transaction_that_changed_nothing_leaves_the_head(served: Any, repo: Any) -> None:
    from lakefs_spec import LakeFSFileSystem

    from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET

    main = repo.branch("main")
    fs = LakeFSFileSystem(host=served.api, username=ADMIN_KEY, password=ADMIN_SECRET)
    fs.pipe(f"{repo.id}/main/data/x.csv", b"a,b\n1,2\n")
    main.commit("x")
    head = main.head.id
    with fs.transaction(repo.id, "main") as tx:
        fs.pipe(f"{repo.id}/{tx.branch.id}/data/x.csv", b"a,b\n1,2\n")
        assert list(tx.branch.uncommitted()) == []  # the same bytes again: no change
        tx.commit("again")
    assert main.head.id == head
    # Direct re-puts to the branch: nothing to commit; a put back to the head's version undoes a change.
    fs.pipe(f"{repo.id}/main/data/x.csv", b"a,b\n1,2\n")
    assert list(main.uncommitted()) == []
    fs.pipe(f"{repo.id}/main/data/x.csv", b"changed")
    assert [d.path for d in main.uncommitted()] == ["data/x.csv"]
    fs.pipe(f"{repo.id}/main/data/x.csv", b"a,b\n1,2\n")
    assert list(main.uncommitted()) == []
    # Other metadata is a change all the same (lakeFS's identity holds the type and user metadata).
    fs.pipe(f"{repo.id}/main/data/x.csv", b"a,b\n1,2\n", metadata={"k": "v"})
    assert [d.path for d in main.uncommitted()] == ["data/x.csv"]


def test_hidden_branches_are_listed_only_when_asked(repo: Any, client: Any) -> None:
    main = repo.branch("main")
    main.object("a").upload(b"a")
    main.commit("a")
    repo.branch("shown").create(main)
    repo.branch("secret").create(main, hidden=True)
    assert {b.id for b in repo.branches()} == {"main", "shown"}
    api = client.sdk_client.branches_api
    assert {r.id for r in api.list_branches(repo.id, show_hidden=True).results} == {"main", "shown", "secret"}
    assert repo.branch("secret").head.id == main.head.id  # hidden from listings only
    # transact() works on a hidden temporary branch: a listing meanwhile shows only the user's branches.
    with main.transact(commit_message="tx") as tx:
        tx.object("b").upload(b"b")
        assert {b.id for b in repo.branches()} == {"main", "shown"}
        assert len(api.list_branches(repo.id, show_hidden=True).results) == 4
    assert {o.path for o in main.objects()} == {"a", "b"}
    # Deleted and made again without hidden, the name is listed.
    repo.branch("secret").delete()
    repo.branch("secret").create(main)
    assert {b.id for b in repo.branches()} == {"main", "shown", "secret"}
