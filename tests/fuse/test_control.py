"""Control files: commit, merge, revert, reset, status, head, log, error through ``.lakefs/``."""

from __future__ import annotations

import errno
import json
import os

import pytest

from lakemount.app import App
from tests.fuse.conftest import REPO
from tests.fuse.pathfs import PathFS

MAIN = f"/{REPO}/main"
CTL = f"{MAIN}/.lakefs"


def control(pfs: PathFS, name: str, text: str, root: str = MAIN) -> None:
    with pfs.opened(f"{root}/.lakefs/{name}", os.O_WRONLY | os.O_TRUNC) as fh:
        pfs.pwrite(fh, 0, text.encode())


def control_errno(pfs: PathFS, name: str, text: str, root: str = MAIN) -> int:
    with pytest.raises(OSError) as info:
        control(pfs, name, text, root)
    assert info.value.errno is not None
    return info.value.errno


def read_json(pfs: PathFS, name: str, root: str = MAIN) -> object:
    return json.loads(pfs.read_file(f"{root}/.lakefs/{name}"))


def test_control_directory_lists_its_files(pfs: PathFS) -> None:
    assert pfs.listdir(CTL) == ["commit", "merge", "revert", "reset", "status", "head", "log", "error"]
    assert pfs.lstat(f"{CTL}/commit").mode & 0o222
    assert not pfs.lstat(f"{CTL}/status").mode & 0o222
    with pytest.raises(OSError) as info:
        pfs.open(f"{CTL}/status", os.O_WRONLY)
    assert info.value.errno == errno.EACCES


def test_commit_returns_after_the_commit(pfs: PathFS, app: App) -> None:
    pfs.write_file(f"{MAIN}/data.csv", b"a,b\n")
    status = read_json(pfs, "status")
    assert status["changes"] == [{"path": "data.csv", "type": "added", "size_bytes": 4, "checksum": status["changes"][0]["checksum"]}]
    control(pfs, "commit", "first commit\n")
    head = app.graveler.get_branch(REPO, "main").commit_id
    assert pfs.read_file(f"{CTL}/head").decode().strip() == head
    commit = read_json(pfs, "commit")
    assert commit["id"] == head and commit["message"] == "first commit"
    assert read_json(pfs, "status")["changes"] == []
    log = read_json(pfs, "log")
    assert [c["message"] for c in log][:2] == ["first commit", "Repository created"]
    assert pfs.read_file(f"/repo/{head}/data.csv") == b"a,b\n"


def test_commit_with_metadata_as_json(pfs: PathFS, app: App) -> None:
    pfs.write_file(f"{MAIN}/x", b"1")
    control(pfs, "commit", json.dumps({"message": "tagged", "metadata": {"job": "etl-7"}}))
    c = app.graveler.commit_of(REPO, "main")
    assert c.message == "tagged" and dict(c.metadata) == {"job": "etl-7"}


def test_commit_errors(pfs: PathFS) -> None:
    assert control_errno(pfs, "commit", "nothing staged") == errno.ENODATA
    assert "nothing to commit" in pfs.read_file(f"{CTL}/error").decode()
    pfs.write_file(f"{MAIN}/x", b"1")
    assert control_errno(pfs, "commit", "   \n") == errno.EINVAL
    assert control_errno(pfs, "commit", "{not json") == errno.EINVAL
    with pytest.raises(OSError) as info, pfs.opened(f"{CTL}/commit", os.O_WRONLY) as fh:
        pfs.pwrite(fh, 0, b"\xff\xfe not utf-8")
    assert info.value.errno == errno.EINVAL
    assert "commit" in pfs.read_file(f"{CTL}/error").decode()


def test_merge_and_strategies(pfs: PathFS, app: App) -> None:
    app.catalog.put(REPO, "main", "base", b"b")
    app.graveler.commit(REPO, "main", "base")
    app.graveler.create_branch(REPO, "dev", "main")
    pfs.write_file("/repo/dev/feature", b"f")
    control(pfs, "commit", "feature", root="/repo/dev")
    control(pfs, "merge", "dev")
    result = read_json(pfs, "merge")
    assert result["merged"] and result["source"] == "dev"
    assert pfs.read_file(f"{MAIN}/feature") == b"f"
    # both sides change the same path: a conflict unless a strategy decides
    pfs.write_file(f"{MAIN}/base", b"main side")
    control(pfs, "commit", "main edit")
    pfs.write_file("/repo/dev/base", b"dev side")
    control(pfs, "commit", "dev edit", root="/repo/dev")
    assert control_errno(pfs, "merge", "dev") == errno.ECANCELED
    error = pfs.read_file(f"{CTL}/error").decode()
    assert "conflict" in error and "\nbase\n" in error + "\n"
    control(pfs, "merge", "dev --strategy source-wins")
    assert pfs.read_file(f"{MAIN}/base") == b"dev side"


def test_merge_is_no_changes_only_for_a_source_main_reaches(pfs: PathFS, app: App) -> None:
    app.catalog.put(REPO, "main", "base", b"b")
    app.graveler.commit(REPO, "main", "base")
    app.graveler.create_branch(REPO, "dev", "main")
    head = app.catalog.commit_of(REPO, "main").id
    control(pfs, "merge", "dev")  # main holds dev's head: nothing to merge, and no commit
    assert read_json(pfs, "merge") == {"source": "dev", "reference": head, "merged": False, "changes": 0}
    # dev's commits add up to nothing, but main does not reach them: a merge commit joins the histories.
    pfs.write_file("/repo/dev/tmp", b"t")
    control(pfs, "commit", "add tmp", root="/repo/dev")
    pfs.unlink("/repo/dev/tmp")
    control(pfs, "commit", "drop tmp", root="/repo/dev")
    before = app.catalog.commit_of(REPO, "main").id
    control(pfs, "merge", "dev")
    result = read_json(pfs, "merge")
    assert result["merged"] and result["source"] == "dev"
    merged = app.catalog.commit_of(REPO, "main")
    assert merged.parents == (before, app.catalog.commit_of(REPO, "dev").id)
    assert [e.path for e in app.catalog.list(REPO, "main")] == ["base"]
    control(pfs, "merge", "dev")  # and now main reaches it
    assert read_json(pfs, "merge")["merged"] is False and app.catalog.commit_of(REPO, "main").id == merged.id


def test_merge_bad_input_is_einval(pfs: PathFS) -> None:
    assert control_errno(pfs, "merge", "") == errno.EINVAL
    assert control_errno(pfs, "merge", "nosuchbranch") == errno.EINVAL
    assert control_errno(pfs, "merge", "main --strategy sideways") == errno.EINVAL
    error = pfs.read_file(f"{CTL}/error").decode()  # one verb prefix, not "merge: merge: --strategy ..."
    assert " merge: --strategy must be one of" in error and "merge: merge:" not in error
    assert control_errno(pfs, "merge", "main --bogus") == errno.EINVAL
    assert control_errno(pfs, "merge", "'unterminated") == errno.EINVAL


@pytest.mark.parametrize("spelling", ["-m 'merged by hand'", "--message 'merged by hand'", "--message='merged by hand'", "-m='merged by hand'"])
def test_merge_takes_its_message_in_either_form_of_an_option(pfs: PathFS, app: App, spelling: str) -> None:
    # merge and revert parsed their options in two loops: revert's --parent-number took --x=V, merge's
    # -m/--message only the separate form (--message=V was an unknown option). One parser serves both.
    app.graveler.create_branch(REPO, "dev", "main")
    pfs.write_file("/repo/dev/f", b"1")
    control(pfs, "commit", "c", root="/repo/dev")
    control(pfs, "merge", f"dev {spelling}")
    assert app.catalog.commit_of(REPO, "main").message == "merged by hand"


@pytest.mark.parametrize(("verb", "line", "message"), [
    ("merge", "main -m", "merge: -m needs a message"),
    ("merge", "main --message", "merge: -m needs a message"),
    ("merge", "main dev", "merge: one source ref only"),
    ("merge", "main --squash=yes", "merge: unknown option --squash=yes (use SOURCE [--strategy X] [--squash] [-m MSG])"),
    ("revert", "main --parent", "revert: --parent-number needs a number"),
    ("revert", "main -m=x", "revert: --parent-number needs a number"),
    ("revert", "main main~1", "revert: one ref only"),
    ("revert", "main --allow-empty=1", "revert: unknown option --allow-empty=1 (use REF [--parent-number N] [--allow-empty])"),
    ("revert", "--allow-empty", "revert: write the commit to revert, e.g. 'main~1'"),
])
def test_control_lines_name_the_verb_and_the_option_at_fault(pfs: PathFS, verb: str, line: str, message: str) -> None:
    assert control_errno(pfs, verb, line) == errno.EINVAL
    assert message in pfs.read_file(f"{CTL}/error").decode()


def test_merge_with_uncommitted_changes_is_refused(pfs: PathFS, app: App) -> None:
    app.graveler.create_branch(REPO, "dev", "main")
    pfs.write_file("/repo/dev/f", b"1")
    control(pfs, "commit", "c", root="/repo/dev")
    pfs.write_file(f"{MAIN}/dirty", b"x")
    assert control_errno(pfs, "merge", "dev") == errno.EBUSY
    assert "uncommitted" in pfs.read_file(f"{CTL}/error").decode()


def test_a_swap_file_written_and_removed_does_not_block_a_merge(pfs: PathFS, app: App) -> None:
    # An editor in the mount leaves a staged entry behind for its removed swap file: it changes nothing,
    # so the merge goes through (before: EBUSY, while a commit said there was nothing to commit).
    app.graveler.create_branch(REPO, "dev", "main")
    pfs.write_file("/repo/dev/f", b"1")
    control(pfs, "commit", "c", root="/repo/dev")
    pfs.write_file(f"{MAIN}/.f.swp", b"swap")
    pfs.unlink(f"{MAIN}/.f.swp")
    assert control_errno(pfs, "commit", "nothing") == errno.ENODATA
    control(pfs, "merge", "dev")
    assert pfs.read_file(f"{MAIN}/f") == b"1" and not pfs.exists(f"{MAIN}/.f.swp")
    assert read_json(pfs, "status")["changes"] == []


def test_revert(pfs: PathFS, app: App) -> None:
    pfs.write_file(f"{MAIN}/f", b"v1")
    control(pfs, "commit", "v1")
    pfs.write_file(f"{MAIN}/f", b"v2")
    control(pfs, "commit", "v2")
    assert pfs.read_file(f"{MAIN}/f") == b"v2"
    control(pfs, "revert", "main")
    assert pfs.read_file(f"{MAIN}/f") == b"v1"
    assert app.graveler.commit_of(REPO, "main").message.startswith("Revert")
    assert control_errno(pfs, "revert", "") == errno.EINVAL
    assert control_errno(pfs, "revert", "nope") == errno.EINVAL


def test_reset_all_and_prefix(pfs: PathFS) -> None:
    pfs.mkdir(f"{MAIN}/keep")
    pfs.mkdir(f"{MAIN}/drop")
    pfs.write_file(f"{MAIN}/keep/a", b"1")
    pfs.write_file(f"{MAIN}/drop/b", b"2")
    control(pfs, "reset", "drop/")
    assert pfs.exists(f"{MAIN}/keep/a")
    assert not pfs.exists(f"{MAIN}/drop/b")
    control(pfs, "reset", "--all")
    assert pfs.listdir(MAIN) == [".lakefs"]
    assert control_errno(pfs, "reset", "--bogus x y") == errno.EINVAL


def test_control_files_of_two_branches_are_independent(pfs: PathFS, app: App) -> None:
    app.graveler.create_branch(REPO, "dev", "main")
    pfs.write_file("/repo/dev/f", b"1")
    control(pfs, "commit", "on dev", root="/repo/dev")
    assert read_json(pfs, "status")["changes"] == []
    assert pfs.read_file(f"{CTL}/head") != pfs.read_file("/repo/dev/.lakefs/head")


# -- issue 14 ----------------------------------------------------------------------------------------


def test_item2_control_reset_path_is_object_or_directory_and_blank_is_einval(pfs: PathFS) -> None:
    pfs.mkdir(f"{MAIN}/data")
    pfs.mkdir(f"{MAIN}/datalake")
    pfs.write_file(f"{MAIN}/data/a", b"1")
    pfs.write_file(f"{MAIN}/datalake/b", b"2")
    pfs.write_file(f"{MAIN}/data.csv", b"3")
    control(pfs, "reset", "data")
    assert not pfs.exists(f"{MAIN}/data")
    assert pfs.read_file(f"{MAIN}/datalake/b") == b"2" and pfs.read_file(f"{MAIN}/data.csv") == b"3"
    assert read_json(pfs, "reset") == {"scope": "path", "path": "data"}
    for blank in ("", "  \n", "/"):
        assert control_errno(pfs, "reset", blank) == errno.EINVAL
    assert pfs.read_file(f"{MAIN}/datalake/b") == b"2"
    control(pfs, "reset", "--prefix data")  # a string prefix only when asked for
    assert not pfs.exists(f"{MAIN}/datalake") and not pfs.exists(f"{MAIN}/data.csv")


def test_item9_control_revert_takes_uris_and_allow_empty(pfs: PathFS, app: App) -> None:
    pfs.write_file(f"{MAIN}/x", b"1")
    control(pfs, "commit", "one")
    pfs.write_file(f"{MAIN}/y", b"2")
    control(pfs, "commit", "two")
    control(pfs, "revert", f"lakefs://{REPO}/main")
    assert not pfs.exists(f"{MAIN}/y")
    assert control_errno(pfs, "revert", "main~1") == errno.ENODATA
    assert "write 'REF --allow-empty'" in pfs.read_file(f"{CTL}/error").decode()
    head = pfs.read_file(f"{CTL}/head").decode().strip()
    control(pfs, "revert", "main~1 --allow-empty")
    assert app.catalog.commit_of(REPO, "main").parents == (head,)
    assert control_errno(pfs, "revert", "lakefs://other/main") == errno.EINVAL


def test_item10_control_files_speak_the_cli_shapes(pfs: PathFS, app: App) -> None:
    from lakemount.catalog import shapes

    pfs.write_file(f"{MAIN}/x", b"1")
    control(pfs, "commit", "one")
    c = app.catalog.commit_of(REPO, "main")
    assert read_json(pfs, "commit") == shapes.commit_json(c)
    log = read_json(pfs, "log")
    assert isinstance(log, list) and log[0] == shapes.commit_json(c)
    assert "metarange_checksum" not in log[0] and type(log[0]["creation_date"]) is int


def test_item4_mount_hides_keys_a_directory_cannot_show(pfs: PathFS, app: App) -> None:
    import errno as _errno

    from lakemount.catalog.catalog import encode_path
    from lakemount.catalog.model import FILE_MODE, Entry
    from lakemount.catalog.paths import dot_segment_problem

    cat = app.catalog
    hidden = ["/leading", "a//b", "a/../b", "s/" + "x" * 300, "trail/", "t2/", "q/./r"]
    for key in hidden:
        if dot_segment_problem(key) is None:
            cat.put(REPO, "main", key, b"h")
        else:  # no front end writes these any more: staged below the catalog's rule, as an older gateway did
            info = cat.write_data(REPO, b"h")
            cat.graveler.set(REPO, "main", encode_path(key), Entry(info.address, 1, info.etag, 1, "", (), FILE_MODE).value())
    cat.put(REPO, "main", "a/ok", b"ok")
    cat.put_entry(REPO, "main", "t2/", Entry("", 0, "", 1, "", (), FILE_MODE))  # an object, not a marker
    cat.put(REPO, "main", "t2/x", b"x")
    top = pfs.listdir(MAIN)
    assert sorted(top) == [".lakefs", "a", "t2"]
    for name in top:
        assert pfs.exists(f"{MAIN}/{name}")
    assert pfs.listdir(f"{MAIN}/a") == ["ok"] and pfs.listdir(f"{MAIN}/t2") == ["x"]
    for gone in ("s", "trail", "q"):
        assert not pfs.exists(f"{MAIN}/{gone}")
        with pytest.raises(OSError) as info:
            pfs.rmdir(f"{MAIN}/{gone}")
        assert info.value.errno == _errno.ENOENT
    pfs.unlink(f"{MAIN}/t2/x")
    with pytest.raises(OSError) as info:
        pfs.rmdir(f"{MAIN}/t2")  # its marker key is an object: rmdir never deletes it
    assert info.value.errno in (_errno.ENOTEMPTY, _errno.ENOENT)
    for key in hidden:
        assert cat.get_optional(REPO, "main", key) is not None, key
    assert not cat.stat(REPO, "main", "t2/").is_dir and not cat.stat(REPO, "main", "trail/").is_dir
    status = read_json(pfs, "status")
    assert isinstance(status, dict)
    assert status["hidden"]["count"] == len(hidden) and status["hidden"]["complete"] is True
    assert set(status["hidden"]["examples"]) == set(hidden)


def test_item3_mount_returns_eio_for_an_import_whose_source_changed(pfs: PathFS, app: App, tmp_path: object) -> None:
    from pathlib import Path

    from tests.catalog.test_import_contract import imported_entry

    src = Path(str(tmp_path)) / "source.csv"
    src.write_bytes(b"ab")
    app.catalog.put_entry(REPO, "main", "imported.csv", imported_entry(src))
    assert pfs.read_file(f"{MAIN}/imported.csv") == b"ab"
    src.write_bytes(b"XYZ")
    with pytest.raises(OSError) as info:
        pfs.read_file(f"{MAIN}/imported.csv")
    assert info.value.errno == errno.EIO


@pytest.mark.parametrize("spelling", ["--parent-number 1", "--parent-number=1", "--parent 1", "-m 1"])
def test_revert_of_a_merge_takes_the_cli_spelling_of_the_parent(pfs: PathFS, app: App, spelling: str) -> None:
    # The CLI says --parent-number (lakectl's), this file said --parent: each refused the other's spelling.
    cat = app.catalog
    cat.create_branch(REPO, "dev", "main")
    cat.put(REPO, "dev", "from-dev", b"d")
    cat.commit(REPO, "dev", "on dev")
    pfs.write_file(f"{MAIN}/from-main", b"m")
    control(pfs, "commit", "on main")
    control(pfs, "merge", "dev")
    assert len(cat.commit_of(REPO, "main").parents) == 2
    assert control_errno(pfs, "revert", "main") == errno.EINVAL  # a merge needs its parent
    assert control_errno(pfs, "revert", spelling.replace("1", "3") + " main") == errno.EINVAL  # the number is used
    control(pfs, "revert", f"main {spelling}")
    assert not pfs.exists(f"{MAIN}/from-dev") and pfs.read_file(f"{MAIN}/from-main") == b"m"
    assert control_errno(pfs, "revert", "main --parent-number x") == errno.EINVAL
    assert "--parent-number needs a number" in pfs.read_file(f"{CTL}/error").decode()


def test_a_merge_conflict_on_a_tables_pointer_names_the_table(pfs: PathFS, app: App) -> None:
    """Two branches that changed one Iceberg table conflict on its pointer object; the error says which table."""
    pointer = "sales/db/events/_iceberg_table.json"
    app.catalog.put(REPO, "main", pointer, b'{"metadata": "m0"}')
    app.graveler.commit(REPO, "main", "table")
    app.graveler.create_branch(REPO, "dev", "main")
    pfs.write_file(f"{MAIN}/{pointer}", b'{"metadata": "main"}')
    control(pfs, "commit", "main edit")
    pfs.write_file(f"/repo/dev/{pointer}", b'{"metadata": "dev"}')
    control(pfs, "commit", "dev edit", root="/repo/dev")
    assert control_errno(pfs, "merge", "dev") == errno.ECANCELED
    error = pfs.read_file(f"{CTL}/error").decode()
    assert "table sales.db.events changed on both branches" in error and pointer in error


# -- issue 38 ----------------------------------------------------------------------------------------


def test_issue38_each_control_failure_has_an_errno_a_shell_user_reads_right(pfs: PathFS, app: App) -> None:
    """A shell prints only strerror(errno): nothing to commit, a conflict, uncommitted changes in the way,
    a bad ref and a protected branch each read as what they are, never all "Device or resource busy"."""
    def error() -> str:
        return pfs.read_file(f"{CTL}/error").decode()

    assert control_errno(pfs, "commit", "nothing staged") == errno.ENODATA  # "No data available"
    assert '{"message": "MSG", "allow_empty": true}' in error() and "--allow-empty" not in error()
    control(pfs, "commit", json.dumps({"message": "empty on purpose", "allow_empty": True}))  # as the hint says
    assert app.catalog.commit_of(REPO, "main").message == "empty on purpose"

    app.catalog.put(REPO, "main", "shared", b"base")
    app.catalog.commit(REPO, "main", "base")
    app.catalog.create_branch(REPO, "dev", "main")
    pfs.write_file(f"{MAIN}/shared", b"main side")
    control(pfs, "commit", "main edit")
    pfs.write_file("/repo/dev/shared", b"dev side")
    control(pfs, "commit", "dev edit", root="/repo/dev")
    assert control_errno(pfs, "merge", "dev") == errno.ECANCELED  # "Operation canceled"
    assert "conflict" in error() and "shared" in error().splitlines()
    assert "write 'SOURCE --strategy source-wins' (or dest-wins) to .lakefs/merge" in error()  # this file's syntax

    pfs.write_file(f"{MAIN}/dirty", b"x")
    assert control_errno(pfs, "merge", "dev") == errno.EBUSY  # the branch's uncommitted changes are in the way
    assert "uncommitted" in error()
    assert "(write a message to .lakefs/commit) or drop them (write --all to .lakefs/reset)" in error()
    control(pfs, "reset", "--all")

    assert control_errno(pfs, "merge", "no-such-branch") == errno.EINVAL  # "Invalid argument"
    assert control_errno(pfs, "revert", "no-such-ref") == errno.EINVAL

    app.catalog.protection.add(REPO, "main")
    assert control_errno(pfs, "commit", "refused") == errno.EPERM  # "Operation not permitted"
    assert "protected" in error()
    assert "then write that branch's name to this branch's .lakefs/merge" in error()
    assert "--" not in error()  # no CLI flag in a hint: the control files' own syntax only
    assert app.catalog.commit_of(REPO, "main").message == "main edit"


def test_issue38_the_control_directory_cannot_be_moved_or_removed_and_its_name_is_taken(pfs: PathFS) -> None:
    for attempt in (lambda: pfs.rename(CTL, f"{MAIN}/x"), lambda: pfs.rmdir(CTL)):
        with pytest.raises(OSError) as info:
            attempt()
        assert info.value.errno == errno.EPERM, "mv .lakefs x said EEXIST (\"cannot overwrite\") for a name not there"
    assert not pfs.exists(f"{MAIN}/x") and pfs.listdir(CTL)[0] == "commit"
    pfs.mkdir(f"{MAIN}/d")
    for attempt in (lambda: pfs.mkdir(CTL), lambda: pfs.rename(f"{MAIN}/d", CTL, 1)):
        with pytest.raises(OSError) as info:
            attempt()
        assert info.value.errno == errno.EEXIST


def test_issue38_a_commit_written_to_a_tags_control_directory_is_read_only(pfs: PathFS, app: App) -> None:
    """``echo msg > v1/.lakefs/commit`` on a tag reads "Read-only file system", as every other write to a tag;
    it said "Operation not permitted" (".lakefs holds control files only"), as if the user lacked a right."""
    app.catalog.put(REPO, "main", "a", b"1")
    app.catalog.commit(REPO, "main", "c")
    app.catalog.create_tag(REPO, "v1", "main")
    tag_ctl = f"/{REPO}/v1/.lakefs"
    assert pfs.listdir(tag_ctl) == ["head", "log"]
    for name in ("commit", "merge"):
        with pytest.raises(OSError) as info:
            pfs.open(f"{tag_ctl}/{name}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        assert info.value.errno == errno.EROFS
        assert info.value.strerror == f"{REPO}/v1 is read-only (not a branch): its .lakefs has head and log only"
    with pytest.raises(OSError) as info:
        pfs.open(f"{tag_ctl}/head", os.O_WRONLY | os.O_TRUNC)
    assert info.value.errno == errno.EACCES  # a read-only control file, on a tag as on a branch
    with pytest.raises(OSError) as info:  # a new name in a branch's .lakefs stays EPERM: the branch is writable
        pfs.open(f"{CTL}/notes", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    assert info.value.errno == errno.EPERM
    assert pfs.listdir(tag_ctl) == ["head", "log"] and app.catalog.commit_of(REPO, "v1").message == "c"
