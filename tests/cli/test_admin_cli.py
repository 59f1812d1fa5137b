"""A new platform engineer's pass over the administration side of the CLI: help, repositories, exit codes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click
import pytest

from tests.cli.test_newuser import _leaves, inproc


def test_every_visible_option_says_what_it_does() -> None:
    # `lakemount pr merge --help` listed a bare `--squash`, `pr create` a bare `--title`.
    from lakemount.cli.group import cli

    bare = [
        f"{' '.join(path)} {param.opts[0]}"
        for path, command in _leaves(cli)
        for param in command.params
        if isinstance(param, click.Option) and not param.hidden and not (param.help or "").strip()
    ]
    assert bare == []


@pytest.mark.parametrize(("namespace", "code", "needle"), [
    # Used to be "not a block-store URL ... 's3:/_lakefs/commits/<id>'", an internal key the user never typed.
    ("s3://", 2, "must be a URL such as"),
    ("local://", 2, "must be a URL such as"),
    # Used to be exit 3, "object not found: local:///proc/x/_lakefs/commits/<id>"; now refused before any
    # write, as outside the namespace roots (issue 23 item 2).
    ("local:///proc/lakemount-x", 2, "storage namespace local:///proc/lakemount-x is outside the directories "
                                     "blockstore.local.namespace_roots allows"),
    ("foo://bar", 2, "cannot write to storage namespace foo://bar: no block store for scheme 'foo'"),
])
def test_repo_create_with_a_bad_storage_namespace_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, namespace: str, code: int, needle: str
) -> None:
    home = tmp_path / "home"
    rc, out, err = inproc(capsys, home, "repo", "create", "lakefs://bad", namespace)
    assert rc == code, err
    assert err.count("\n") == 1 and err.startswith("error: ") and needle in err, err
    assert "Traceback" not in err
    rc, out, err = inproc(capsys, home, "--json", "repo", "list")
    assert rc == 0 and out.strip() == "[]"  # nothing half-created


def test_a_declined_confirmation_exits_1_not_130(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # Answering "n" (or a closed stdin) exited 130, the status of Ctrl-C.
    import io

    home = tmp_path / "home"
    assert inproc(capsys, home, "repo", "create", "lakefs://keep")[0] == 0
    for answer in ("n\n", ""):
        monkeypatch.setattr("sys.stdin", io.StringIO(answer))
        rc, _out, err = inproc(capsys, home, "repo", "delete", "lakefs://keep")
        assert rc == 1, err
        assert err.strip().splitlines()[-1] == "error: aborted: nothing was changed"
    assert inproc(capsys, home, "repo", "list")[1].startswith("keep")


def test_ctrl_c_at_a_confirmation_exits_130(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupt(*_a: object, **_k: object) -> str:
        raise KeyboardInterrupt

    home = tmp_path / "home"
    assert inproc(capsys, home, "repo", "create", "lakefs://keep")[0] == 0
    monkeypatch.setattr("click.termui.visible_prompt_func", interrupt)
    rc, _out, err = inproc(capsys, home, "repo", "delete", "lakefs://keep")
    assert rc == 130 and err.strip().splitlines()[-1] == "interrupted", err


@pytest.mark.parametrize("argv", [
    ("repo", "delete", "lakefs://nope"),
    ("branch", "delete", "lakefs://keep/nope"),
    ("tag", "delete", "lakefs://keep/nope"),
    ("reset", "lakefs://keep/nope"),
])
def test_deleting_what_does_not_exist_fails_before_asking(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: tuple[str, ...]
) -> None:
    # It asked "Delete tag nope?" first, and only after a "y" said there was no such tag.
    def no_questions(*_a: object, **_k: object) -> str:
        raise AssertionError("asked for confirmation of a delete that cannot happen")

    home = tmp_path / "home"
    assert inproc(capsys, home, "repo", "create", "lakefs://keep")[0] == 0
    monkeypatch.setattr("click.termui.visible_prompt_func", no_questions)
    rc, _out, err = inproc(capsys, home, *argv)
    assert rc == 3 and err.startswith("error: ") and "nope" in err and err.count("\n") == 1, err


@pytest.mark.parametrize(("args", "needle"), [
    # Each used to drop the path and act on the whole ref: `log` printed the full history, `diff` every
    # change, `commit` committed the whole branch, `merge` merged every change of the source.
    (("log", "lakefs://keep/main/x/a.txt"), "use --objects x/a.txt (an object) or --prefixes x/a.txt/"),
    (("log", "lakefs://keep/main/x/"), "use --prefixes x/"),
    (("diff", "lakefs://keep/main/y"), "use --prefix PATH"),
    (("diff", "lakefs://keep/main", "lakefs://keep/main~1/y"), "use --prefix PATH"),
    (("show", "lakefs://keep/main/x/a.txt"), "lakemount fs stat URI"),
    (("commit", "lakefs://keep/main/x", "-m", "m"), "every uncommitted change of the branch"),
    (("merge", "lakefs://keep/main/x", "lakefs://keep/other"), "every change of the source"),
    # And these named the branch or tag and dropped the rest: `branch delete lakefs://keep/main/x -y`
    # deleted the branch of someone who meant a directory.
    (("branch", "delete", "lakefs://keep/main/x", "-y"), "lakefs://keep/main/x"),
    (("branch", "create", "lakefs://keep/b/x", "--source", "lakefs://keep/main"), "lakefs://keep/b/x"),
    (("branch", "create", "lakefs://keep/b", "--source", "lakefs://keep/main/x"), "lakefs://keep/main/x"),
    (("tag", "create", "lakefs://keep/t/x", "lakefs://keep/main"), "lakefs://keep/t/x"),
    (("revert", "lakefs://keep/main/x", "lakefs://keep/main"), "lakefs://keep/main/x"),
    (("cherry-pick", "lakefs://keep/main", "lakefs://keep/main/x"), "lakefs://keep/main/x"),
])
def test_verbs_of_a_ref_refuse_a_path_instead_of_ignoring_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: tuple[str, ...], needle: str
) -> None:
    home = tmp_path / "home"
    assert inproc(capsys, home, "repo", "create", "lakefs://keep")[0] == 0
    rc, out, err = inproc(capsys, home, *args)
    assert rc == 2, (out, err)
    assert err.count("\n") == 1 and "without a path" in err and needle in err, err
    assert out == ""


def test_log_limit_error_names_the_option_typed(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # `log --limit 0` answered "--amount must be positive", an option the user never typed.
    home = tmp_path / "home"
    assert inproc(capsys, home, "repo", "create", "lakefs://keep")[0] == 0
    rc, _out, err = inproc(capsys, home, "log", "lakefs://keep/main", "--limit", "0")
    assert rc == 2 and "--limit" in err, err


def test_serve_on_a_port_in_use_names_the_address_and_the_key(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # Was a bare "error: Address already in use": which of the two servers, which address, set where?
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        rc, _out, err = inproc(capsys, tmp_path / "home", "serve", "--listen", f"127.0.0.1:{port}", "--no-api")
    assert rc == 1
    assert err == f"error: cannot listen on 127.0.0.1:{port} (gateways.s3.listen_address): Address already in use\n"


def _repo_and_files(capsys: pytest.CaptureFixture[str], tmp_path: Path, n: int) -> tuple[Path, Path]:
    """A home with repository ``keep``, and a local directory of ``n`` small CSV files."""
    home, src = tmp_path / "home", tmp_path / "src"
    src.mkdir()
    for i in range(n):
        (src / f"f{i}.csv").write_text(f"{i}\n")
    assert inproc(capsys, home, "repo", "create", "lakefs://keep")[0] == 0
    return home, src


def _ctrl_c_at_call(monkeypatch: pytest.MonkeyPatch, method: str, n: int) -> None:
    """Make the ``n``-th call of ``Catalog.<method>`` raise KeyboardInterrupt (Ctrl-C at that moment)."""
    from lakemount.catalog.catalog import Catalog

    real, calls = getattr(Catalog, method), []

    def interrupted(self: Catalog, *args: object, **kwargs: object) -> object:
        calls.append(args)
        if len(calls) == n:
            raise KeyboardInterrupt
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Catalog, method, interrupted)


def test_ctrl_c_mid_upload_says_in_one_line_what_is_staged(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # Was a blank line, then "interrupted": nothing said that the files already uploaded stay staged.
    home, src = _repo_and_files(capsys, tmp_path, 5)
    _ctrl_c_at_call(monkeypatch, "put", 3)
    rc, out, err = inproc(capsys, home, "fs", "upload", "-r", "lakefs://keep/main/in/", "--source", str(src))
    monkeypatch.undo()
    assert rc == 130 and out == ""
    assert err == ("error: interrupted after uploading 2 of 5 files to lakefs://keep/main/in/: those are staged "
                   "(uncommitted), the rest are not; 'lakemount diff lakefs://keep/main' lists them, "
                   "'lakemount reset lakefs://keep/main/in/' drops them\n"), err
    rc, out, _err = inproc(capsys, home, "--json", "diff", "lakefs://keep/main")
    assert [r["path"] for r in json.loads(out)] == ["in/f0.csv", "in/f1.csv"]


def test_ctrl_c_mid_download_says_how_far_it_got(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    home, src = _repo_and_files(capsys, tmp_path, 4)
    assert inproc(capsys, home, "fs", "upload", "-r", "lakefs://keep/main/", "--source", str(src))[0] == 0
    _ctrl_c_at_call(monkeypatch, "open", 2)
    dest = tmp_path / "dest"
    rc, out, err = inproc(capsys, home, "fs", "download", "-r", "lakefs://keep/main/", str(dest))
    assert rc == 130 and out == ""
    assert err == f"error: interrupted after downloading 1 files to {dest} (of 4 entries); no partial file is left\n", err
    assert sorted(p.name for p in dest.iterdir()) == ["f0.csv"]


def test_plain_ctrl_c_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # click printed an empty line to stderr before our "interrupted".
    from lakemount.catalog.catalog import Catalog

    def interrupt(*_a: object, **_k: object) -> object:
        raise KeyboardInterrupt

    home = tmp_path / "home"
    assert inproc(capsys, home, "repo", "create", "lakefs://keep")[0] == 0
    monkeypatch.setattr(Catalog, "log", interrupt)
    rc, out, err = inproc(capsys, home, "log", "lakefs://keep/main")
    assert (rc, out, err) == (130, "", "interrupted\n")


@pytest.mark.parametrize("as_json", [False, True])
def test_upload_of_a_big_file_shows_progress_in_bytes_on_a_terminal(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, as_json: bool
) -> None:
    # `fs upload` of one large file showed nothing until it ended (only -r had a bar, per file);
    # under --json (a program reads the output) no bar at all.
    import sys

    from lakemount.cli.fs import BIG_FILE

    home = tmp_path / "home"
    src = tmp_path / "big.bin"
    src.write_bytes(os.urandom(BIG_FILE + 1))
    assert inproc(capsys, home, "repo", "create", "lakefs://keep")[0] == 0
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    rc, out, err = inproc(capsys, home, *(["--json"] if as_json else []), "fs", "upload", "lakefs://keep/main/big.bin",
                          "--source", str(src))
    assert rc == 0, err
    if as_json:
        assert err == "" and json.loads(out)["size_bytes"] == BIG_FILE + 1
    else:
        assert "upload:" in err and "/8.00M" in err and "B/s" in err, err
    monkeypatch.undo()
    rc, out, _err = inproc(capsys, home, "--json", "fs", "stat", "lakefs://keep/main/big.bin")
    assert rc == 0 and json.loads(out)["size_bytes"] == BIG_FILE + 1


@pytest.mark.parametrize("argv", [
    ("repo", "delete", "lakefs://keep/main", "-y"),
    ("branch", "list", "lakefs://keep/main"),
    ("gc", "get-config", "lakefs://keep/main"),
    ("pr", "list", "lakefs://keep/main"),
    ("branch-protect", "list", "lakefs://keep/main/x"),
])
def test_repository_verbs_refuse_a_ref_instead_of_ignoring_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: tuple[str, ...]
) -> None:
    # `repo delete lakefs://keep/main -y` deleted the whole repository, not the branch.
    home = tmp_path / "home"
    assert inproc(capsys, home, "repo", "create", "lakefs://keep")[0] == 0
    rc, _out, err = inproc(capsys, home, *argv)
    assert rc == 2 and "acts on the whole repository" in err and err.count("\n") == 1, err
    assert inproc(capsys, home, "repo", "list")[1].startswith("keep")


def test_diff_text_ends_with_counts_per_kind(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # Ten thousand lines of changes and no total: the counts come last, as a compare page shows them.
    home, src = _repo_and_files(capsys, tmp_path, 3)
    assert inproc(capsys, home, "fs", "upload", "-r", "-s", str(src), "lakefs://keep/main/d")[0] == 0
    rc, out, _err = inproc(capsys, home, "diff", "lakefs://keep/main")
    assert rc == 0 and out.splitlines()[-1] == "3 changes: 3 added", out
    assert inproc(capsys, home, "commit", "lakefs://keep/main", "-m", "m")[0] == 0
    assert inproc(capsys, home, "diff", "lakefs://keep/main")[1].strip() == "No changes"
