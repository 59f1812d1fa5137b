"""The real ``lakefs`` SDK against a live ``lakemount serve``: the flows data teams run, and the errors it maps."""

from __future__ import annotations

from typing import Any

import lakefs
import lakefs_sdk
import pytest
from lakefs.exceptions import (
    BadRequestException,
    ConflictException,
    ForbiddenException,
    InvalidRangeException,
    NotAuthorizedException,
    NotFoundException,
    ObjectExistsException,
    ObjectNotFoundException,
    PermissionException,
    TransactionException,
)

from tests.api.conftest import Served


def test_config_and_version(client: Any) -> None:
    assert client.version == "1.50.0"
    assert client.storage_config.pre_sign_support is False
    assert client.storage_config.import_support is True


def test_repository_crud_and_pagination(served: Served, client: Any) -> None:
    names = [served.repo(client, prefix="pg").id for _ in range(5)]
    listed = [r.id for r in lakefs.repositories(client=client, prefix="pg")]
    assert set(names) <= set(listed)
    assert listed == sorted(listed)
    # Pages of two: the SDK follows next_offset until has_more is false.
    sdk = client.sdk_client.repositories_api
    page = sdk.list_repositories(prefix="pg", amount=2)
    assert len(page.results) == 2 and page.pagination.has_more
    seen = [r.id for r in page.results]
    while page.pagination.has_more:
        page = sdk.list_repositories(prefix="pg", amount=2, after=page.pagination.next_offset)
        seen += [r.id for r in page.results]
    assert seen == listed
    repo = lakefs.Repository(names[0], client=client)
    assert repo.properties.default_branch == "main"
    repo.delete()
    with pytest.raises(NotFoundException):
        lakefs.Repository(names[0], client=client).properties  # noqa: B018
    # exist_ok returns the existing repository; without it a conflict.
    again = lakefs.Repository(names[1], client=client).create(storage_namespace="local:///elsewhere", exist_ok=True)
    assert again.properties.storage_namespace.endswith(names[1])
    with pytest.raises(ConflictException):
        lakefs.Repository(names[1], client=client).create(storage_namespace=f"local://{served.home}/data/ns/x{names[1]}")


def test_branch_commit_merge_revert_tag(repo: Any) -> None:
    main = repo.branch("main")
    main.object("data/a.csv").upload(b"a,1\n")
    main.object("data/b.csv").upload(b"b,2\n")
    assert {c.path for c in main.uncommitted()} == {"data/a.csv", "data/b.csv"}
    first = main.commit("two files", metadata={"owner": "team"})
    c1 = first.get_commit()
    assert c1.message == "two files" and c1.metadata == {"owner": "team"} and c1.committer == "admin"
    assert list(main.uncommitted()) == []

    dev = repo.branch("dev").create(main)
    assert dev.head.id == c1.id
    assert {b.id for b in repo.branches()} == {"main", "dev"}
    dev.object("data/c.csv").upload(b"c,3\n")
    dev.object("data/a.csv").delete()
    dev.commit("add c, drop a")
    diff = {(d.path, d.type) for d in main.diff(dev)}
    assert diff == {("data/c.csv", "added"), ("data/a.csv", "removed")}
    merged = dev.merge_into(main)
    assert main.head.id == merged
    assert {o.path for o in main.objects()} == {"data/b.csv", "data/c.csv"}

    # Revert the merge (parent 1 = main's side): a.csv is back, c.csv gone.
    main.revert(merged, parent_number=1)
    assert {o.path for o in main.objects()} == {"data/a.csv", "data/b.csv"}
    assert main.object("data/a.csv").reader().read() == b"a,1\n"

    # Cherry-pick dev's commit onto a fresh branch from the first commit.
    pick = repo.branch("pick").create(c1.id)
    picked = pick.cherry_pick(dev.head)
    assert picked.message == "add c, drop a"
    assert {o.path for o in pick.objects()} == {"data/b.csv", "data/c.csv"}

    tag = repo.tag("v1").create(main)
    assert tag.get_commit().id == main.head.id
    assert {t.id for t in repo.tags()} == {"v1"}
    assert lakefs.Reference(repo.id, "v1", client=repo._client).object("data/a.csv").reader().read() == b"a,1\n"
    with pytest.raises(ConflictException):
        repo.tag("v1").create(main)
    tag.delete()
    assert list(repo.tags()) == []

    pick.delete()
    with pytest.raises(NotFoundException):
        repo.branch("pick").head  # noqa: B018


def test_reset_changes(repo: Any) -> None:
    main = repo.branch("main")
    for p in ("keep/x", "drop/y", "drop/z", "one"):
        main.object(p).upload(p.encode())
    main.reset_changes("object", "one")
    main.reset_changes("common_prefix", "drop/")
    assert [c.path for c in main.uncommitted()] == ["keep/x"]
    main.reset_changes()
    assert list(main.uncommitted()) == []


def test_merge_conflict_and_strategy(repo: Any) -> None:
    main = repo.branch("main")
    main.object("k").upload(b"base")
    main.commit("base")
    other = repo.branch("other").create(main)
    main.object("k").upload(b"main side")
    main.commit("main change")
    other.object("k").upload(b"other side")
    other.commit("other change")
    with pytest.raises(ConflictException):
        other.merge_into(main)
    other.merge_into(main, strategy="source-wins")
    assert main.object("k").reader().read() == b"other side"


def test_merge_into_a_dirty_branch_is_a_bad_request(repo: Any) -> None:
    # A merge, revert or cherry-pick into a branch with uncommitted changes is lakeFS's ErrDirtyBranch:
    # a 400 (BadRequestException), not a 412 (ServerException in the SDK).
    main = repo.branch("main")
    dev = repo.branch("dev").create(main)
    dev.object("d.txt").upload(b"d")
    picked = dev.commit("on dev")
    dev.merge_into(main)
    dev.object("e.txt").upload(b"e")
    dev.commit("more")
    main.object("w.txt").upload(b"w")
    with pytest.raises(BadRequestException, match="uncommitted changes"):
        dev.merge_into(main)
    with pytest.raises(BadRequestException, match="uncommitted changes"):
        main.revert(picked.get_commit().id, parent_number=0)
    with pytest.raises(BadRequestException, match="uncommitted changes"):
        main.cherry_pick(dev.get_commit().id)
    main.reset_changes()
    dev.merge_into(main)
    assert main.object("e.txt").reader().read() == b"e"


def test_transaction_commits(repo: Any) -> None:
    main = repo.branch("main")
    main.object("old").upload(b"old")
    main.commit("old")
    with main.transact(commit_message="tx work", commit_metadata={"job": "42"}) as tx:
        tx.object("new").upload(b"new")
        tx.object("old").delete()
    assert {o.path for o in main.objects()} == {"new"}
    assert [c.message for c in main.log(max_amount=2)][1] == "tx work"
    assert {b.id for b in repo.branches()} == {"main"}  # the ephemeral branch is gone


def test_transaction_rolls_back(repo: Any) -> None:
    main = repo.branch("main")
    main.object("keep").upload(b"keep")
    head = main.commit("keep").id
    with pytest.raises(RuntimeError, match="boom"):
        with main.transact(commit_message="never") as tx:
            tx.object("keep").delete()
            tx.object("junk").upload(b"junk")
            raise RuntimeError("boom")
    assert main.head.id == head
    assert {o.path for o in main.objects()} == {"keep"}
    assert {b.id for b in repo.branches()} == {"main"}


def test_transaction_with_nothing_to_commit_fails_cleanly(repo: Any) -> None:
    main = repo.branch("main")
    with pytest.raises(TransactionException):
        with main.transact(commit_message="empty"):
            pass
    assert {b.id for b in repo.branches()} == {"main"}


def test_objects_ranges_and_metadata(repo: Any) -> None:
    main = repo.branch("main")
    data = bytes(range(256)) * 4096  # 1 MiB
    obj = main.object("bin/blob").upload(data, content_type="application/x-test", metadata={"color": "blue"})
    st = obj.stat()
    assert st.size_bytes == len(data) and st.content_type == "application/x-test" and st.metadata == {"color": "blue"}
    with obj.reader() as f:
        assert f.read() == data
        f.seek(1000)
        assert f.read(10) == data[1000:1010]
        f.seek(len(data) - 5)
        assert f.read() == data[-5:]
        assert f.read(10) == b""
    raw = repo._client.sdk_client.objects_api.get_object_with_http_info(repo.id, "main", "bin/blob", range="bytes=10-19")
    assert raw.status_code == 206 and raw.data == data[10:20]
    assert raw.headers["Content-Range"] == f"bytes 10-19/{len(data)}"
    with pytest.raises(lakefs_sdk.exceptions.ApiException) as e:
        repo._client.sdk_client.objects_api.get_object(repo.id, "main", "bin/blob", range=f"bytes={len(data)}-")
    assert e.value.status == 416 and e.value.headers["Content-Range"] == f"bytes */{len(data)}"
    with pytest.raises(InvalidRangeException):  # what the high-level SDK maps a 416 to
        with lakefs.exceptions.api_exception_handler():
            repo._client.sdk_client.objects_api.get_object(repo.id, "main", "bin/blob", range=f"bytes={len(data)}-")
    # Text modes, exclusive create, exists, copy.
    main.object("t.txt").upload("héllo\n", mode="w")
    assert main.object("t.txt").reader(mode="r").read() == "héllo\n"
    with pytest.raises(ObjectExistsException):
        main.object("t.txt").upload(b"x", mode="x")
    assert main.object("t.txt").exists() and not main.object("nope").exists()
    copy = main.object("t.txt").copy("main", "copies/t.txt")
    assert copy.reader().read() == "héllo\n".encode()
    assert copy.stat().physical_address == main.object("t.txt").stat().physical_address
    with pytest.raises(ObjectNotFoundException):
        main.object("nope").reader().read()


def test_non_ascii_metadata_and_content_type_round_trip(repo: Any) -> None:
    # The SDK sends a non-ASCII header value as Latin-1 bytes (not UTF-8): stored as
    # they came they could not be encoded, and the upload failed with a 500.
    main = repo.branch("main")
    obj = main.object("accents").upload(b"x", content_type="text/plain; name=café", metadata={"owner": "Zoë"})
    st = obj.stat()
    assert st.metadata == {"owner": "Zoë"} and st.content_type == "text/plain; name=café"
    assert [o.metadata for o in main.objects(prefix="accents")] == [{"owner": "Zoë"}]
    raw = repo._client.sdk_client.objects_api.get_object_with_http_info(repo.id, "main", "accents")
    assert raw.headers["x-lakefs-meta-owner"] == "Zoë" and raw.headers["Content-Type"] == "text/plain; name=café"
    with main.object("written").writer(mode="wb", metadata={"note": "naïve"}) as w:
        w.write(b"y")
    assert main.object("written").stat().metadata == {"note": "naïve"}


def test_stat_and_list_leave_user_metadata_out_when_asked(repo: Any) -> None:
    repo.branch("main").object("m").upload(b"m", metadata={"owner": "team"})
    sdk = repo._client.sdk_client.objects_api
    assert sdk.stat_object(repo.id, "main", "m").metadata == {"owner": "team"}
    assert sdk.stat_object(repo.id, "main", "m", user_metadata=False).metadata == {}
    assert sdk.list_objects(repo.id, "main", user_metadata=False).results[0].metadata == {}


def test_form_upload_through_generated_client(repo: Any) -> None:
    sdk = repo._client.sdk_client.objects_api
    content = b"\x00form data\r\n--not a boundary" * 1000
    stats = sdk.upload_object(repo.id, "main", "form/file.bin", content=content)
    assert stats.size_bytes == len(content)
    assert repo.branch("main").object("form/file.bin").reader().read() == content


def test_listing_delimiter_and_pages(repo: Any) -> None:
    main = repo.branch("main")
    paths = [f"dir{i % 3}/f{i:03d}" for i in range(30)] + ["top"]
    for p in paths:
        main.object(p).upload(b"x")
    assert sorted(o.path for o in main.objects()) == sorted(paths)
    assert [o.path for o in main.objects(delimiter="/")] == ["dir0/", "dir1/", "dir2/", "top"]
    assert [o.path for o in main.objects(prefix="dir1/", max_amount=3)] == ["dir1/f001", "dir1/f004", "dir1/f007"]
    page = repo._client.sdk_client.objects_api.list_objects(repo.id, "main", prefix="dir0/", amount=4)
    assert page.pagination.has_more and len(page.results) == 4 and page.pagination.next_offset == "dir0/f009"
    main.delete_objects([p for p in paths if p.startswith("dir2/")] + ["never/was"])
    assert [o.path for o in main.objects(delimiter="/")] == ["dir0/", "dir1/", "top"]


def test_log_by_path(repo: Any) -> None:
    main = repo.branch("main")
    main.object("a/1").upload(b"1")
    c1 = main.commit("touch a").id
    main.object("b/1").upload(b"1")
    main.commit("touch b")
    main.object("a/2").upload(b"2")
    c3 = main.commit("touch a again").id
    assert [c.id for c in main.log(prefixes=["a/"])] == [c3, c1]
    assert [c.id for c in main.log(objects=["a/1"])] == [c1]
    assert [c.message for c in main.log(max_amount=2)] == ["touch a again", "touch b"]
    # Pages of one commit follow next_offset.
    msgs = [c.message for c in main.log(amount=1)]
    assert msgs == ["touch a again", "touch b", "touch a", "Repository created"]


def test_error_types(served: Served, repo: Any) -> None:
    main = repo.branch("main")
    with pytest.raises(NotFoundException):
        repo.branch("ghost").head  # noqa: B018
    with pytest.raises(NotFoundException):
        lakefs.Repository("no-such-repo", client=repo._client).properties  # noqa: B018
    with pytest.raises(ConflictException):
        repo.branch("main").create("main")
    with pytest.raises(BadRequestException):
        main.commit("nothing staged")
    with pytest.raises(BadRequestException):
        repo.branch("Bad Name!").create("main")
    with pytest.raises(NotAuthorizedException):
        lakefs.Client(host=served.api, username="AKIANOSUCHKEY", password="x").version  # noqa: B018
    key, secret = served.gateway.user("reader", "Analyst")
    reader = served.client(key, secret)
    assert [o.path for o in lakefs.Repository(repo.id, client=reader).branch("main").objects()] == []
    with pytest.raises(ForbiddenException):
        lakefs.Repository(repo.id, client=reader).branch("main").object("x").upload(b"x")
    with pytest.raises(ForbiddenException):
        lakefs.Repository(repo.id, client=reader).branch("new").create("main")
    # A write to a tag is a write to a branch that does not exist, as in lakeFS.
    main.object("f").upload(b"f")
    main.commit("f")
    repo.tag("t1").create(main)
    with pytest.raises(NotFoundException):
        lakefs.WriteableObject(repo.id, "t1", "g", client=repo._client).upload(b"g")
    assert [o.path for o in main.objects()] == ["f"]


def test_protected_branch_changes_only_by_merge(served: Served, repo: Any) -> None:
    main = repo.branch("main")
    main.object("seed").upload(b"seed")
    main.commit("seed")
    feature = repo.branch("feature").create(main)
    app = served.gateway.app()
    app.catalog.set_protection_rules(repo.id, ["main"])  # the API has no protection endpoint yet
    stored = sorted((served.home / "data" / "ns" / repo.id / "data").rglob("*"))
    with pytest.raises(ForbiddenException):
        main.object("direct").upload(b"refused before its body is read")
    assert sorted((served.home / "data" / "ns" / repo.id / "data").rglob("*")) == stored
    with pytest.raises(PermissionException):  # what the SDK's object delete makes of a 403
        main.object("seed").delete()
    feature.object("via-merge").upload(b"y")
    feature.commit("feature work")
    feature.merge_into(main)
    assert {o.path for o in main.objects()} == {"seed", "via-merge"}
    assert list(main.uncommitted()) == []


def test_concurrent_writers_and_transactions(served: Served, repo: Any) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def writer(i: int) -> None:
        branch = lakefs.Repository(repo.id, client=served.client()).branch("main")
        for j in range(10):
            branch.object(f"w{i}/o{j}").upload(f"{i}-{j}".encode())

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(writer, range(8)))
    main = repo.branch("main")
    main.commit("eighty objects")
    assert len(list(main.objects())) == 80

    def transaction(i: int) -> None:
        branch = lakefs.Repository(repo.id, client=served.client()).branch("main")
        with branch.transact(commit_message=f"tx {i}") as tx:
            tx.object(f"tx{i}/data").upload(b"d")
            tx.object(f"w{i}/o0").delete()

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(transaction, range(4)))
    paths = {o.path for o in main.objects()}
    assert {f"tx{i}/data" for i in range(4)} <= paths
    assert not {f"w{i}/o0" for i in range(4)} & paths
    assert len(paths) == 80
    assert {b.id for b in repo.branches()} == {"main"}


def test_diff_two_dot_and_three_dot(repo: Any) -> None:
    main = repo.branch("main")
    main.object("base").upload(b"b")
    main.commit("base")
    dev = repo.branch("dev").create(main)
    dev.object("dev-only").upload(b"d")
    dev.commit("dev")
    main.object("main-only").upload(b"m")
    main.commit("main")
    refs = repo._client.sdk_client.refs_api
    three = {(d.path, d.type) for d in refs.diff_refs(repo.id, "main", "dev").results}
    two = {(d.path, d.type) for d in refs.diff_refs(repo.id, "main", "dev", type="two_dot").results}
    assert three == {("dev-only", "added")}
    assert two == {("dev-only", "added"), ("main-only", "removed")}
    grouped = refs.diff_refs(repo.id, "main", "dev", type="two_dot", delimiter="/").results
    assert {d.path for d in grouped} == {"dev-only", "main-only"}
    base = refs.find_merge_base(repo.id, "dev", "main")
    assert base.base_commit_id == dev.get_commit().parents[0]
