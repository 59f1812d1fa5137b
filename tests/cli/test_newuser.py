"""Issue 14: what a new user hit in the CLI, one regression test per item (named ``test_itemN_...``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click
import pytest

from lakemount.app import App
from lakemount.catalog.catalog import encode_path
from lakemount.catalog.model import FILE_MODE, Entry
from lakemount.catalog.paths import dot_segment_problem
from tests.cli.test_cli import js, run


def put_raw(home: Path, repo: str, items: dict[str, bytes | None], *, commit: str | None = None) -> None:
    """Stage keys the CLI would refuse (as S3 clients can write them), through the catalog itself; a key with a
    '.' or '..' segment, which no front end writes any more, below the catalog's rule (as an older gateway did)."""
    old = os.environ.get("LAKEMOUNT_HOME")
    os.environ["LAKEMOUNT_HOME"] = str(home)
    try:
        app = App.from_config(None)
        for path, data in items.items():
            if data is None:
                app.catalog.delete(repo, "main", path)
            elif dot_segment_problem(path) is not None:
                info = app.catalog.write_data(repo, data)
                entry = Entry(info.address, info.size, info.etag, 1, "", (), FILE_MODE)
                app.catalog.graveler.set(repo, "main", encode_path(path), entry.value())
            else:
                app.catalog.put(repo, "main", path, data)
        if commit:
            app.catalog.commit(repo, "main", commit, committer="t")
    finally:
        if old is None:
            del os.environ["LAKEMOUNT_HOME"]
        else:
            os.environ["LAKEMOUNT_HOME"] = old


def inproc(capsys: pytest.CaptureFixture[str], home: Path, *args: str) -> tuple[int, str, str]:
    """Run the CLI in this process (no interpreter start-up): exit status, stdout, stderr."""
    from lakemount.cli.main import main

    capsys.readouterr()
    old = os.environ.get("LAKEMOUNT_HOME")
    os.environ["LAKEMOUNT_HOME"] = str(home)
    code = 0
    try:
        main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        if old is None:
            del os.environ["LAKEMOUNT_HOME"]
        else:
            os.environ["LAKEMOUNT_HOME"] = old
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    run(home, "repo", "create", "lakefs://rep")
    return home


def upload(home: Path, tmp_path: Path, uri: str, data: bytes, ok: bool = True) -> object:
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    return run(home, "fs", "upload", uri, "--source", str(src), ok=ok)


# -- 1 ---------------------------------------------------------------------------------------------


def test_item1_download_never_writes_outside_dest(repo: Path, tmp_path: Path) -> None:
    home = repo
    put_raw(home, "rep", {"ok/a.txt": b"a", "../escape.txt": b"x", "/tmp-abs-" + tmp_path.name: b"y",
                        "b//c.txt": b"z", "ok/b.txt": b"b"})
    dest = tmp_path / "out" / "dest"
    p = run(home, "fs", "download", "-r", "lakefs://rep/main/", str(dest), ok=False)
    assert p.returncode != 0
    assert (dest / "ok" / "a.txt").read_bytes() == b"a" and (dest / "ok" / "b.txt").read_bytes() == b"b"
    assert not (tmp_path / "out" / "escape.txt").exists()
    assert not Path("/tmp-abs-" + tmp_path.name).exists()
    assert sorted(p for p in os.listdir(tmp_path / "out")) == ["dest"]
    for key in ("../escape.txt", "/tmp-abs-", "b//c.txt"):
        assert key in p.stderr, p.stderr
    assert "Traceback" not in p.stderr


# -- 2 ---------------------------------------------------------------------------------------------


def test_item2_reset_by_path_is_that_object_or_directory(repo: Path, tmp_path: Path) -> None:
    home = repo
    for key in ("a", "a/x", "ab/y", "abc"):
        upload(home, tmp_path, f"lakefs://rep/main/{key}", b"1")
    run(home, "reset", "lakefs://rep/main/a", "-y")
    left = [d["path"] for d in js(home, "diff", "lakefs://rep/main")]  # type: ignore[union-attr]
    assert left == ["ab/y", "abc"]


# -- 7 ---------------------------------------------------------------------------------------------


def test_item7_download_into_missing_dir_and_dotdot_key_one_line(repo: Path, tmp_path: Path) -> None:
    home = repo
    upload(home, tmp_path, "lakefs://rep/main/f.txt", b"hello")
    put_raw(home, "rep", {"a/../b": b"dd"})
    missing = tmp_path / "nowhere" / "deeper"
    p = run(home, "fs", "download", "lakefs://rep/main/f.txt", str(missing) + "/", ok=False)
    assert p.returncode == 0, p.stderr  # a trailing '/' names a directory: created
    assert (missing / "f.txt").read_bytes() == b"hello"
    p = run(home, "fs", "download", "lakefs://rep/main/f.txt", str(tmp_path / "no" / "such" / "file"), ok=False)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 0 or (len(lines) == 1 and "Traceback" not in p.stderr), p.stderr
    p = run(home, "fs", "download", "lakefs://rep/main/a/../b", str(tmp_path / "dl") + "/", ok=False)
    lines = p.stderr.strip().splitlines()
    assert "Traceback" not in p.stderr, p.stderr
    # The key is named explicitly: it lands inside the directory under its last segment.
    assert (p.returncode == 0 and (tmp_path / "dl" / "b").read_bytes() == b"dd") or len(lines) == 1
    p = run(home, "fs", "download", "lakefs://rep/main/f.txt", "/proc/no-such-dir/x", ok=False)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 1 and len(lines) == 1 and lines[0].startswith("error:"), p.stderr


# -- 4 (CLI side) ----------------------------------------------------------------------------------


def test_item4_cli_refuses_keys_a_directory_cannot_show(repo: Path, tmp_path: Path) -> None:
    for key in ("/leading", "a//b", "a/../b", "s/" + "x" * 300, "trail/", "./x"):
        p = upload(repo, tmp_path, f"lakefs://rep/main/{key}", b"1", ok=False)
        assert p.returncode == 2, (key, p.stderr)  # type: ignore[attr-defined]
        assert "refusing to upload" in p.stderr and len(p.stderr.strip().splitlines()) == 1  # type: ignore[attr-defined]
    tree = tmp_path / "tree"
    (tree / "d").mkdir(parents=True)
    (tree / "d" / ("y" * 300)[:255]).write_bytes(b"ok")  # 255 bytes is the limit, allowed
    run(repo, "fs", "upload", "lakefs://rep/main/t", "--source", str(tree), "-r")
    assert [d["path"] for d in js(repo, "diff", "lakefs://rep/main")] == ["t/d/" + "y" * 255]  # type: ignore[union-attr]


def test_issue23_item4_cli_refuses_names_that_are_not_utf8(repo: Path, tmp_path: Path) -> None:
    p = upload(repo, tmp_path, "lakefs://rep/main/dir/bad\udcffname.txt", b"1", ok=False)
    assert p.returncode == 2, p.stderr  # type: ignore[attr-defined]
    err = p.stderr.strip()  # type: ignore[attr-defined]
    assert len(err.splitlines()) == 1 and "not UTF-8 text" in err and "bad\\xffname.txt" in err
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "ok.txt").write_bytes(b"ok")
    (tree / os.fsdecode(b"bad\xffname.txt")).write_bytes(b"bad")
    p = run(repo, "fs", "upload", "lakefs://rep/main/t", "--source", str(tree), "-r", ok=False)
    assert p.returncode == 2 and "not UTF-8 text" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert js(repo, "diff", "lakefs://rep/main") == []



def test_issue23_item4_cli_json_shows_an_old_bad_key_printable(repo: Path) -> None:
    from lakemount.catalog.catalog import encode_path
    from lakemount.graveler.model import Entry

    os.environ["LAKEMOUNT_HOME"] = str(repo)
    try:
        cat = App.from_config(None).catalog
        info = cat.write_data("rep", b"old")  # planted below the catalog's rule, as an older mount wrote it
        cat.graveler.set("rep", "main", encode_path("d/bad\udcffname.txt"), Entry(info.address, 3, info.etag, 1).value())
    finally:
        del os.environ["LAKEMOUNT_HOME"]
    for args in (("diff", "lakefs://rep/main"), ("fs", "ls", "lakefs://rep/main/", "-r")):
        out = run(repo, *args, "--json").stdout
        assert "\\udc" not in out, out
        assert [d["path"] for d in json.loads(out)] == ["d/bad\\xffname.txt"]


# -- 5 ---------------------------------------------------------------------------------------------


def test_item5_cat_and_download_of_symlinks_and_directory_markers(repo: Path, tmp_path: Path) -> None:
    from lakemount.graveler.model import DIR_MODE, LINK_MODE, Entry

    home = repo
    upload(home, tmp_path, "lakefs://rep/main/d/real.txt", b"real")
    os.environ["LAKEMOUNT_HOME"] = str(home)
    try:
        cat = App.from_config(None).catalog
        # What the mount writes for `ln -s real.txt d/link`, `mkdir empty` and a dangling link.
        cat.put_entry("rep", "main", "d/link", Entry("", 8, "", 1, "", (), LINK_MODE, 0, 0, "real.txt"))
        cat.put_entry("rep", "main", "d/up", Entry("", 8, "", 1, "", (), LINK_MODE, 0, 0, "../../x"))
        cat.put_entry("rep", "main", "empty/", Entry("", 0, "", 1, "", (), DIR_MODE))
    finally:
        del os.environ["LAKEMOUNT_HOME"]
    assert run(home, "fs", "cat", "lakefs://rep/main/d/link").stdout == "real"
    p = run(home, "fs", "cat", "lakefs://rep/main/empty/", ok=False)
    assert p.returncode == 2 and "is a directory" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    dest = tmp_path / "dl"
    p = run(home, "fs", "download", "-r", "lakefs://rep/main/", str(dest), ok=False)
    assert (dest / "d" / "real.txt").read_bytes() == b"real"
    assert os.readlink(dest / "d" / "link") == "real.txt"
    assert (dest / "empty").is_dir() and not any((dest / "empty").iterdir())
    assert not (dest / "d" / "up").exists() and "'d/up'" in p.stderr  # points outside DEST: skipped, named
    assert p.returncode == 1


# -- 9 ---------------------------------------------------------------------------------------------


def test_item9_revert_and_cherry_pick_take_uris_and_allow_empty(repo: Path, tmp_path: Path) -> None:
    home = repo
    upload(home, tmp_path, "lakefs://rep/main/x", b"1")
    run(home, "commit", "lakefs://rep/main", "-m", "one")
    run(home, "branch", "create", "lakefs://rep/dev", "--source", "lakefs://rep/main")
    upload(home, tmp_path, "lakefs://rep/main/y", b"2")
    run(home, "commit", "lakefs://rep/main", "-m", "two")
    rev = js(home, "revert", "lakefs://rep/main", "lakefs://rep/main")
    assert isinstance(rev, dict) and rev["message"].startswith("Revert")
    assert [o["path"] for o in js(home, "fs", "ls", "lakefs://rep/main/", "-r")] == ["x"]  # type: ignore[union-attr]
    # Reverting "two" again changes nothing: the message suggests --allow-empty, which exists.
    p = run(home, "revert", "lakefs://rep/main", "lakefs://rep/main~1", ok=False)
    assert p.returncode == 6 and "--allow-empty" in p.stderr
    again = js(home, "revert", "lakefs://rep/main", "lakefs://rep/main~1", "--allow-empty")
    assert isinstance(again, dict) and again["parents"] == [rev["id"]]
    picked = js(home, "cherry-pick", "lakefs://rep/main~2", "lakefs://rep/dev")
    assert isinstance(picked, dict)
    p = run(home, "cherry-pick", "lakefs://rep/main~2", "lakefs://rep/dev", ok=False)
    assert p.returncode == 6 and "--allow-empty" in p.stderr
    assert isinstance(js(home, "cherry-pick", "lakefs://rep/main~2", "lakefs://rep/dev", "--allow-empty"), dict)
    p = run(home, "revert", "lakefs://rep/main", "lakefs://other/main", ok=False)
    assert p.returncode == 2 and "repository" in p.stderr


# -- 10 --------------------------------------------------------------------------------------------


def _leaves(cmd: click.Command, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    if isinstance(cmd, click.Group):
        ctx = click.Context(cmd)
        subs = [(name, cmd.get_command(ctx, name)) for name in cmd.list_commands(ctx)]  # imports lazy verbs
        return [leaf for name, sub in subs if sub is not None for leaf in _leaves(sub, (*path, name))]
    return [(path, cmd)]


def test_item10_every_verb_has_help_and_json() -> None:
    from lakemount.cli.group import cli

    leaves = _leaves(cli)
    assert len(leaves) > 30
    missing = [" ".join(p) for p, c in leaves if "--json" not in {o for prm in c.params for o in getattr(prm, "opts", [])}]
    assert missing == []
    undocumented = [" ".join(p) for p, c in leaves if not (c.help or "").strip()]
    assert undocumented == []


def test_item10_one_shape_per_object_and_errors_as_json(repo: Path, tmp_path: Path) -> None:
    home = repo
    upload(home, tmp_path, "lakefs://rep/main/x", b"1")
    commit = js(home, "commit", "lakefs://rep/main", "-m", "one")
    shown = js(home, "show", "lakefs://rep/main")
    logged = js(home, "log", "lakefs://rep/main")
    assert isinstance(commit, dict) and isinstance(shown, dict) and isinstance(logged, list)
    commit.pop("stats", None)
    assert commit == shown == logged[0]
    assert "meta_range_id" in shown and "metarange_checksum" not in shown
    repos = js(home, "repo", "list")
    users = js(home, "auth", "users", "create", "--id", "ann")
    keys = js(home, "auth", "users", "credentials", "create", "--id", "ann")
    for obj in (shown, repos[0], users, keys):  # type: ignore[index]
        assert type(obj["creation_date"]) is int, obj
    stats = js(home, "fs", "stat", "lakefs://rep/main/x")
    assert isinstance(stats, dict) and type(stats["mtime"]) is int and stats["path_type"] == "object"
    assert js(home, "fs", "cat", "lakefs://rep/main/x")["content"] == "1"  # type: ignore[index]
    p = run(home, "fs", "cat", "lakefs://rep/main/nope", "--json", ok=False)
    assert p.returncode == 3
    err = json.loads(p.stdout)
    assert "not found" in err["message"] and err["code"] == 3
    assert len(p.stderr.strip().splitlines()) == 1
    p = run(home, "--json", "branch", "create", "lakefs://rep/-bad", "--source", "lakefs://rep/main", ok=False)
    assert p.returncode == 2 and "invalid branch name" in json.loads(p.stdout)["message"]
    p = run(home, "serve", "--help")
    assert "--json" in p.stdout


# -- 11 --------------------------------------------------------------------------------------------


def test_item11_commit_prefixes_case_insensitive(repo: Path, tmp_path: Path) -> None:
    home = repo
    upload(home, tmp_path, "lakefs://rep/main/x", b"1")
    c = js(home, "commit", "lakefs://rep/main", "-m", "one")
    assert isinstance(c, dict)
    cid: str = c["id"]
    for form in (cid.upper(), cid[:4].upper(), cid[:8].upper(), cid[:6]):
        assert js(home, "show", f"lakefs://rep/{form}")["id"] == cid  # type: ignore[index]
    p = run(home, "show", f"lakefs://rep/{cid[:3]}", ok=False)
    assert p.returncode == 3


# -- 12 --------------------------------------------------------------------------------------------


def test_item12_writing_to_a_non_branch_ref_is_read_only_everywhere(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = repo
    upload(home, tmp_path, "lakefs://rep/main/x", b"1")
    c = js(home, "commit", "lakefs://rep/main", "-m", "one")
    upload(home, tmp_path, "lakefs://rep/main/y", b"1")
    run(home, "commit", "lakefs://rep/main", "-m", "two")
    run(home, "tag", "create", "lakefs://rep/v1", "lakefs://rep/main")
    cid = c["id"]  # type: ignore[index]
    for ref in ("v1", cid[:8], "main~1"):
        attempts = [
            ("commit", f"lakefs://rep/{ref}", "-m", "x", "--allow-empty"),
            ("reset", f"lakefs://rep/{ref}", "-y"),
            ("reset", f"lakefs://rep/{ref}/x", "-y"),
            ("revert", f"lakefs://rep/{ref}", "lakefs://rep/main"),
            ("cherry-pick", "lakefs://rep/main", f"lakefs://rep/{ref}"),
            ("merge", "lakefs://rep/main", f"lakefs://rep/{ref}"),
            ("fs", "rm", f"lakefs://rep/{ref}/x"),
        ]
        attempts.append(("fs", "upload", f"lakefs://rep/{ref}/z", "--source", str(tmp_path / "src.bin")))
        for args in attempts:
            code, _out, err = inproc(capsys, home, *args)
            assert code == 7 and "read-only" in err, (args, code, err)
    for args in (("commit", "lakefs://rep/main@", "-m", "x"), ("reset", "lakefs://rep/main@", "-y")):
        code, _out, err = inproc(capsys, home, *args)
        assert code == 7 and "read-only" in err, (args, err)
    code, _out, err = inproc(capsys, home, "commit", "lakefs://rep/nosuch", "-m", "x")
    assert code == 3 and "not found" in err
