"""lakeFS behaviours its clients rely on, through the unmodified ``lakefs`` SDK and ``lakefs-spec``:
empty merges and imports, the wording of common refusals, cherry-pick metadata and the size of a staged removal."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from lakefs.exceptions import BadRequestException, ConflictException, ImportManagerException


def test_merge_that_brings_nothing_is_no_changes_unless_allowed(repo: Any) -> None:
    main = repo.branch("main")
    main.object("a").upload(b"a")
    main.commit("a")
    dev = repo.branch("dev").create(main)
    head = main.head.id
    # dev holds nothing main lacks (main reaches its head): lakeFS answers 400 "no changes", makes no commit.
    with pytest.raises(BadRequestException, match="no changes"):
        dev.merge_into(main)
    assert main.head.id == head
    main.object("b").upload(b"b")
    main.commit("b")
    with pytest.raises(BadRequestException, match="no changes"):  # still reachable after main moved on
        dev.merge_into(main)
    # allow_empty records the merge commit all the same, with main's tree.
    head = main.head.id
    merged = dev.merge_into(main, allow_empty=True)
    assert main.head.id == merged != head
    c = main.get_commit()
    assert len(c.parents) == 2 and c.parents[0] == head
    assert {o.path for o in main.objects()} == {"a", "b"}


def test_merge_of_an_unreached_source_whose_changes_add_up_to_none_is_a_merge_commit(repo: Any) -> None:
    main = repo.branch("main")
    main.object("a").upload(b"a")
    main.commit("a")
    dev = repo.branch("dev").create(main)
    # dev's own commits add up to nothing (a file added and removed again): its tree is main's, but
    # main does not reach its head, so lakeFS (and git) record a merge commit joining the histories.
    dev.object("tmp").upload(b"t")
    dev.commit("add tmp")
    dev.object("tmp").delete()
    dev.commit("drop tmp")
    head = main.head.id
    merged = dev.merge_into(main, message="join dev", metadata={"why": "history"})
    c = main.get_commit()
    assert c.id == merged != head
    assert c.parents == [head, dev.head.id] and c.message == "join dev" and c.metadata == {"why": "history"}
    assert {o.path for o in main.objects()} == {"a"}
    # Now main reaches dev: "no changes" again.
    with pytest.raises(BadRequestException, match="no changes"):
        dev.merge_into(main)
    # A source that made main's very change on its own (a cherry-pick's twin): its tree equals main's, merged too.
    other = repo.branch("other").create(main)
    other.object("x").upload(b"x")
    picked = other.commit("x").get_commit()
    main.cherry_pick(picked.id)
    head = main.head.id
    merged = other.merge_into(main)
    assert main.head.id == merged != head and main.get_commit().parents == [head, picked.id]
    assert {o.path for o in main.objects()} == {"a", "x"}


def test_import_of_no_paths_is_one_empty_commit(repo: Any) -> None:
    # lakeFS's import of no paths: one commit carrying the message and metadata, and nothing imported.
    main = repo.branch("main")
    head = main.head.id
    status = main.import_data(commit_message="empty import", metadata={"run": "42"}).run(
        poll_interval=timedelta(seconds=0.1)
    )
    assert status.completed and status.ingested_objects == 0 and status.error is None
    c = main.get_commit()
    assert c.id == status.commit.id != head and c.parents == [head]
    assert c.message == "empty import" and c.metadata == {"run": "42"}
    assert list(main.objects()) == []
    # On a dirty branch it is refused, as a commit of those changes would be no import's.
    main.object("staged").upload(b"s")
    with pytest.raises(ImportManagerException, match="uncommitted changes"):
        main.import_data(commit_message="again").run(poll_interval=timedelta(seconds=0.1))
    assert main.head.id == c.id


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


def test_squash_merge_has_one_parent(repo: Any) -> None:
    main = repo.branch("main")
    main.object("a").upload(b"a")
    main.commit("a")
    dev = repo.branch("dev").create(main)
    for i in range(3):
        dev.object(f"d{i}").upload(b"d")
        dev.commit(f"d{i}")
    head = main.head.id
    dev.merge_into(main, squash_merge=True, message="squashed")
    c = main.get_commit()
    assert c.parents == [head] and c.message == "squashed"
    assert {o.path for o in main.objects()} == {"a", "d0", "d1", "d2"}


def test_hard_reset_moves_a_clean_branch_to_a_ref(repo: Any, client: Any) -> None:
    from lakefs_sdk.exceptions import NotFoundException

    experimental = client.sdk_client.experimental_api
    main = repo.branch("main")
    main.object("a").upload(b"a")
    first = main.commit("a").get_commit().id
    main.object("b").upload(b"b")
    main.commit("b")
    main.object("dirty").upload(b"d")
    with pytest.raises(Exception, match=r"dirty branch") as err:
        experimental.hard_reset_branch(repo.id, "main", first)
    assert err.value.status == 400
    main.reset_changes()
    experimental.hard_reset_branch(repo.id, "main", "main~1")
    assert main.head.id == first
    assert {o.path for o in main.objects()} == {"a"}
    with pytest.raises(NotFoundException):
        experimental.hard_reset_branch(repo.id, "main", "no-such-ref")


def test_put_if_absent_on_the_api_and_the_gateway(served: Any, repo: Any) -> None:
    from botocore.exceptions import ClientError
    from lakefs.exceptions import ObjectExistsException

    main = repo.branch("main")
    main.object("once").upload(b"1", mode="xb")
    with pytest.raises(ObjectExistsException):
        main.object("once").upload(b"2", mode="xb")
    assert main.object("once").reader().read() == b"1"
    s3 = served.gateway.client()
    s3.put_object(Bucket=repo.id, Key="main/g", Body=b"1", IfNoneMatch="*")
    with pytest.raises(ClientError) as err:
        s3.put_object(Bucket=repo.id, Key="main/g", Body=b"2", IfNoneMatch="*")
    assert err.value.response["Error"]["Code"] == "PreconditionFailed"
    assert s3.get_object(Bucket=repo.id, Key="main/g")["Body"].read() == b"1"


def test_revert_cherry_pick_and_prepare_commit_hooks_run(repo: Any) -> None:
    import http.server
    import json
    import threading

    seen: list[tuple[str, str]] = []
    refuse: set[str] = set()

    class Hook(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            event = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            seen.append((event["event_type"], event.get("commit_id", "")))
            self.send_response(412 if event["event_type"] in refuse else 200)
            self.send_header("Content-Length", "0")
            self.end_headers()

    hooks = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    hooks.daemon_threads = True
    threading.Thread(target=hooks.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{hooks.server_address[1]}/"
        events = ("prepare-commit", "pre-revert", "post-revert", "pre-cherry-pick", "post-cherry-pick")
        on = ", ".join(f"{e}: {{}}" for e in events)
        main = repo.branch("main")
        main.object("_lakefs_actions/watch.yaml").upload(
            f"name: watch\non: {{{on}}}\nhooks: [{{id: w, type: webhook, properties: {{url: '{url}'}}}}]\n".encode())
        main.object("a").upload(b"a")
        c = main.commit("a").get_commit().id
        assert [e for e, _ in seen] == ["prepare-commit"]
        dev = repo.branch("dev").create(main)
        dev.object("x").upload(b"x")
        picked = dev.commit("x").get_commit().id
        seen.clear()
        main.cherry_pick(picked)
        new = main.head.id
        assert seen == [("pre-cherry-pick", ""), ("post-cherry-pick", new)]
        seen.clear()
        main.revert(new)
        assert seen == [("pre-revert", ""), ("post-revert", main.head.id)]
        # A failing prepare-commit or pre-revert hook refuses the operation.
        refuse.update({"prepare-commit", "pre-revert"})
        main.object("b").upload(b"b")
        with pytest.raises(Exception, match="prepare-commit"):
            main.commit("b")
        head = main.head.id
        with pytest.raises(Exception, match="pre-revert"):
            main.revert(c)
        assert main.head.id == head
    finally:
        hooks.shutdown()


def test_repository_with_samples_and_the_default_namespace(served: Any, client: Any) -> None:
    import io

    import lakefs
    import pyarrow.parquet as pq

    # The storage config names where repositories go, so a client composes a namespace without asking.
    prefix = client.storage_config.default_namespace_prefix
    assert prefix == f"local://{served.home}/data"
    name = served.repo_name("s")
    repo = lakefs.Repository(name, client=client).create(storage_namespace=f"{prefix}/{name}", include_samples=True)
    main = repo.branch("main")
    commits = list(main.log())
    assert len(commits) == 2 and commits[0].message == "Add sample data"
    paths = {o.path for o in main.objects()}
    assert {"README.md", "lakes.parquet", "lakes.csv", "_lakefs_actions/check_tables.yaml"} <= paths
    assert len([p for p in paths if p.startswith("images/") and p.endswith(".png")]) >= 3
    table = pq.read_table(io.BytesIO(main.object("lakes.parquet").reader().read()))
    assert table.column_names == ["name", "country", "area_km2", "max_depth_m"] and table.num_rows > 0
    assert main.object("lakes.csv").reader().read().decode().count("\n") == table.num_rows + 1
    assert main.object("images/lake.png").reader().read().startswith(b"\x89PNG\r\n\x1a\n")
    assert repo.properties.storage_id == ""
    # The example hook is live: a merge into main bringing a Parquet file that drops a column is refused.
    import pyarrow as pa

    dev = repo.branch("dev").create(main)
    buf = io.BytesIO()
    pq.write_table(pa.table({"name": ["x"]}), buf)
    dev.object("lakes2.parquet").upload(buf.getvalue())
    dev.commit("narrower table")
    with pytest.raises(Exception, match="tables_keep_their_columns"):
        dev.merge_into(main)
    # A store this server does not have is refused.
    with pytest.raises(BadRequestException, match="storage_id"):
        lakefs.Repository(served.repo_name("s"), client=client).create(
            storage_namespace=f"{prefix}/other", storage_id="elsewhere")


@pytest.fixture(scope="module")
def s3_served(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``lakemount serve`` on the S3 block store (moto), with a bucket of import sources beside the store's."""
    from tests.api.conftest import running
    from tests.moto_server import moto_s3

    with moto_s3("parity-store", "parity-sources") as endpoint:
        env = {
            "LAKEMOUNT_BLOCKSTORE_TYPE": "s3",
            "LAKEMOUNT_BLOCKSTORE_DEFAULT_NAMESPACE_PREFIX": "s3://parity-store/repos",
            "LAKEMOUNT_BLOCKSTORE_S3_ENDPOINT": endpoint,
            "LAKEMOUNT_BLOCKSTORE_S3_REGION": "us-east-1",
            "LAKEMOUNT_BLOCKSTORE_S3_ACCESS_KEY_ID": "testing",
            "LAKEMOUNT_BLOCKSTORE_S3_SECRET_ACCESS_KEY": "testing",
        }
        with running(tmp_path_factory.mktemp("parity-s3"), env=env) as s:
            s.moto = endpoint
            yield s
            log = s.gateway.log()
        assert "unexpected error serving" not in log, log[-5000:]


def test_s3_store_samples_re_put_and_an_import_of_prefixes_and_objects(s3_served: Any) -> None:
    from datetime import timedelta

    import boto3
    import lakefs

    from tests.moto_server import CREDENTIALS

    client = s3_served.client()
    prefix = client.storage_config.default_namespace_prefix
    assert prefix == "s3://parity-store/repos"
    name = s3_served.repo_name("s3")
    repo = lakefs.Repository(name, client=client).create(storage_namespace=f"{prefix}/{name}", include_samples=True)
    main = repo.branch("main")
    assert main.get_commit().message == "Add sample data"
    csv = main.object("lakes.csv").reader().read()
    head = main.head.id
    main.object("lakes.csv").upload(csv, content_type="text/csv")  # what the sample holds: no change
    assert list(main.uncommitted()) == []
    with pytest.raises(BadRequestException, match="no changes"):
        main.commit("nothing")
    main.object("lakes.csv").upload(b"other", mode="w")
    from lakefs.exceptions import ObjectExistsException

    with pytest.raises(ObjectExistsException):  # presigned here: the link is If-None-Match: *
        main.object("lakes.csv").upload(b"again", mode="xb")
    main.reset_changes()
    assert main.head.id == head
    # An import of two prefixes and one object from another bucket, in one commit.
    src = boto3.client("s3", endpoint_url=s3_served.moto, **CREDENTIALS)
    for key in ("a/1.txt", "a/2.txt", "b/3.txt", "c/only.txt", "c/not-this.txt"):
        src.put_object(Bucket="parity-sources", Key=key, Body=key.encode())
    status = (
        main.import_data(commit_message="from s3")
        .prefix("s3://parity-sources/a/", destination="in/a/")
        .prefix("s3://parity-sources/b/", destination="in/b/")
        .object("s3://parity-sources/c/only.txt", destination="in/one.txt")
        .run(poll_interval=timedelta(seconds=0.5))
    )
    assert status.completed and status.error is None, status.error
    assert status.ingested_objects == 4
    assert {o.path for o in main.objects(prefix="in/")} == {"in/a/1.txt", "in/a/2.txt", "in/b/3.txt", "in/one.txt"}
    assert main.object("in/one.txt").reader().read() == b"c/only.txt"
    assert main.get_commit().parents == [head]
