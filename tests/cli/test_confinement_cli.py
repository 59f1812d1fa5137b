"""Issue 23 items 1 and 2 through the command line: ``import`` and ``repo create`` stay within the roots.

The CLI reaches the same rule as every front end (``Catalog.import_source``,
``Catalog.create_repository``): a refusal is exit 2 with one line, before Spark
starts or anything is written.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_newuser import inproc


def _no_spark(*_a: object, **_k: object) -> None:
    raise AssertionError("Spark must not start for a refused import")


def test_item1_cli_import_outside_the_roots_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("lakemount.jobs.importer.job_context", _no_spark)
    home = tmp_path / "home"
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "key").write_bytes(b"root only\n")
    (secret / "key").chmod(0o600)
    assert inproc(capsys, home, "repo", "create", "lakefs://demo")[0] == 0
    (home / "data" / "incoming").mkdir()
    (home / "data" / "incoming" / "link").symlink_to(secret)  # inside the default root, leading out of it
    for source in (str(secret), f"local://{secret}/", f"{home}/data/incoming/link", f"{home}/data/../../secret"):
        rc, _out, err = inproc(capsys, home, "import", "--from", source, "--to", "lakefs://demo/main/stolen/")
        assert rc == 2, err
        assert err == f"error: import source {source} is outside the directories blockstore.local.import_roots allows\n"
    rc, out, _err = inproc(capsys, home, "fs", "ls", "lakefs://demo/main/", "--json")
    assert rc == 0 and "stolen" not in out


def test_item2_cli_repo_create_outside_the_roots_or_nested_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    outside = tmp_path / "elsewhere"
    rc, _out, err = inproc(capsys, home, "repo", "create", "lakefs://out", f"local://{outside}")
    assert rc == 2 and err.count("\n") == 1, err
    assert "is outside the directories blockstore.local.namespace_roots allows" in err
    assert not outside.exists()  # nothing written there
    assert inproc(capsys, home, "repo", "create", "lakefs://first", f"local://{home}/data/shared/first")[0] == 0
    for ns, relation in ((f"local://{home}/data/shared/first/deeper", "is inside"), (f"local://{home}/data/shared", "contains")):
        rc, _out, err = inproc(capsys, home, "repo", "create", "lakefs://second", ns)
        assert rc == 2, err
        assert err == f"error: storage namespace {ns} {relation} another repository's storage namespace\n"
    rc, out, _err = inproc(capsys, home, "repo", "list")
    assert rc == 0 and "second" not in out and "out " not in out
