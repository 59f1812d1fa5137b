"""Imports and exports that overlap a repository's storage namespace are refused before any work.

An import from inside (or around) a namespace would point entries at objects
that repository's GC deletes once it no longer references them; an export
into one would write among its objects.  Both fail up front with the
repository named, before Spark starts.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from lakemount.app import App
from lakemount.errors import InvalidArgument
from lakemount.jobs.export import export_objects
from lakemount.jobs.importer import import_objects
from lakemount.jobs.namespaces import local_location, namespace_location, s3_location


def _fail(*_a: object, **_k: object) -> None:
    raise AssertionError("Spark must not start for a refused job (nor the in-process engine)")


@pytest.fixture
def repos(app: App, s3: Any, monkeypatch: pytest.MonkeyPatch) -> App:
    if "bucket" not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
        s3.create_bucket(Bucket="bucket")
    monkeypatch.setattr("lakemount.jobs.importer.job_context", _fail)
    monkeypatch.setattr("lakemount.jobs.export.job_context", _fail)
    app.catalog.create_repository("demo")
    app.catalog.create_repository("lake", "s3://bucket/lakemount/lake")
    app.catalog.put("demo", "main", "data/x.csv", b"1,2\n")  # something to export
    app.catalog.commit("demo", "main", "data")
    return app


def _namespace_dir(app: App) -> str:
    ns = app.catalog.repository("demo").storage_namespace
    assert ns.startswith("local://")
    return ns[len("local://") :]


def test_locations_are_normalised_urls() -> None:
    assert namespace_location("s3a://b/p/") == s3_location("b", "/p") == "s3://b/p/"
    assert s3_location("b") == "s3://b/" and namespace_location("mem://x") is None
    assert local_location("/tmp/../tmp/x/") == "local://" + os.path.realpath("/tmp") + "/x/"



@pytest.mark.parametrize(("text", "message"), [
    ("ftp://host/dir", "cannot {verb} 'ftp://host/dir': use a local directory or s3://bucket/prefix"),
    ("file://relative/dir", "file:// {role} must be an absolute path: file://relative/dir"),
    ("local://relative/dir", "local:// {role} must be an absolute path: local://relative/dir"),
    ("s3:///key", "s3 URL without a bucket: 's3:///key'"),
])
def test_imports_and_exports_read_their_locations_alike(repos: App, text: str, message: str) -> None:
    # Export had a URL parser of its own: after local:// or file:// it took a relative path against the
    # server's working directory, where an import refuses it. One parser (confinement.split_location) now.
    with pytest.raises(InvalidArgument) as imported:
        import_objects(repos, text, "demo", "main", "imported/")
    assert str(imported.value) == message.format(verb="import from", role="source")
    with pytest.raises(InvalidArgument) as exported:
        export_objects(repos, "demo", "main", "data", text)
    assert str(exported.value) == message.format(verb="export to", role="target")


@pytest.mark.parametrize("where", ["inside", "equal", "around"])
def test_an_import_overlapping_a_local_namespace_is_refused(repos: App, tmp_path: Path, where: str) -> None:
    ns = _namespace_dir(repos)
    source = {"inside": os.path.join(ns, "data"), "equal": ns, "around": os.path.dirname(ns)}[where]
    os.makedirs(source, exist_ok=True)
    with pytest.raises(InvalidArgument, match="storage namespace of repository demo") as e:
        import_objects(repos, source, "demo", "main", "imported/")
    assert ("is inside" if where != "around" else "contains") in str(e.value)


def test_an_import_through_a_symlink_into_a_namespace_is_refused(repos: App, tmp_path: Path) -> None:
    link = tmp_path / "innocent"
    link.symlink_to(_namespace_dir(repos))
    with pytest.raises(InvalidArgument, match="repository demo"):
        import_objects(repos, str(link), "demo", "main", "imported/")


def test_an_import_overlapping_an_s3_namespace_is_refused(repos: App) -> None:
    for source in ("s3a://bucket/lakemount/lake/data/", "s3://bucket/", "s3://bucket/lakemount"):
        with pytest.raises(InvalidArgument, match="repository lake"):
            import_objects(repos, source, "demo", "main", "imported/")


def test_an_export_into_a_namespace_is_refused(repos: App) -> None:
    with pytest.raises(InvalidArgument, match="export target .* is inside the storage namespace of repository demo"):
        export_objects(repos, "demo", "main", "data", os.path.join(_namespace_dir(repos), "exp"))
    with pytest.raises(InvalidArgument, match="repository lake"):
        export_objects(repos, "demo", "main", "data", "s3://bucket/lakemount/lake/exp")


def test_neighbours_of_a_namespace_are_not_refused(repos: App, tmp_path: Path) -> None:
    """A sibling whose name merely starts like the namespace is elsewhere: the check passes and Spark is asked for."""
    sibling = _namespace_dir(repos) + "-sibling"
    os.makedirs(sibling)
    (Path(sibling) / "f").write_bytes(b"x")
    with pytest.raises(AssertionError, match="Spark must not start"):
        import_objects(repos, sibling, "demo", "main", "imported/")
    with pytest.raises(AssertionError, match="Spark must not start"):
        export_objects(repos, "demo", "main", "data", "s3://bucket/lakemount/lakeside/")


# -- issue 23 item 1: the job's own entry (what the CLI and the API's import process call) -----------


@pytest.mark.parametrize("how", ["plain", "dotdot", "symlink", "file-url", "missing"])
def test_item1_a_job_import_outside_the_import_roots_is_refused_before_spark(repos: App, tmp_path: Path, how: str) -> None:
    # The fixture's roots are this test's directory; /etc is outside it.  Spark never starts (``_fail``).
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "link").symlink_to("/etc")
    source = {
        "plain": "/etc",
        "dotdot": f"{tmp_path}/in/../../../../../../../etc",
        "symlink": f"{tmp_path}/in/link",
        "file-url": "file:///etc/",
        "missing": "/etc/lakemount-no-such-dir",  # not NotFound: nothing is said of what exists out there
    }[how]
    with pytest.raises(InvalidArgument) as e:
        import_objects(repos, source, "demo", "main", "stolen/")
    assert str(e.value) == f"import source {source} is outside the directories blockstore.local.import_roots allows"
    assert not any(i.path.startswith("stolen/") for i in repos.catalog.list("demo", "main"))


def test_item1_import_roots_are_configured_not_assumed(tmp_path: Path, s3_endpoint: str) -> None:
    # An empty list in the file: no local import at all; S3 sources are not a matter of local roots.
    from lakemount.config import load

    config = tmp_path / "c.yaml"
    config.write_text("blockstore:\n  local:\n    import_roots: []\n")
    app = App(load(str(config), env={"LAKEMOUNT_HOME": str(tmp_path / "home")}))
    (tmp_path / "home" / "data" / "incoming").mkdir(parents=True)
    with pytest.raises(InvalidArgument, match="outside the directories blockstore.local.import_roots allows"):
        app.catalog.import_source(str(tmp_path / "home" / "data" / "incoming"))
    assert app.catalog.import_source("s3://bucket/raw").url == "s3://bucket/raw/"
    # By default: the block store's directory, apart from the namespaces in it.
    default = App(load(env={"LAKEMOUNT_HOME": str(tmp_path / "home")}))
    assert default.catalog.import_source(str(tmp_path / "home" / "data" / "incoming")).kind == "local"
    with pytest.raises(InvalidArgument, match="outside the directories"):
        default.catalog.import_source(str(tmp_path))
    bad = App(load(env={"LAKEMOUNT_HOME": str(tmp_path / "home"), "LAKEMOUNT_BLOCKSTORE_LOCAL_IMPORT_ROOTS": "rel/dir"}))
    with pytest.raises(InvalidArgument, match="blockstore.local.import_roots: 'rel/dir' is not an absolute path"):
        _ = bad.catalog


# -- issue 23 item 2: no namespace inside or around another, S3 too ---------------------------------


def test_item2_an_s3_namespace_inside_or_around_another_is_refused(repos: App) -> None:
    from lakemount.errors import AlreadyExists

    cat = repos.catalog
    with pytest.raises(InvalidArgument, match=r"^storage namespace s3://bucket/lakemount/lake/x is inside another"):
        cat.create_repository("inner", "s3://bucket/lakemount/lake/x")
    with pytest.raises(InvalidArgument, match=r"^storage namespace s3a://bucket/lakemount contains another"):
        cat.create_repository("outer", "s3a://bucket/lakemount")
    with pytest.raises(AlreadyExists):
        cat.create_repository("same", "s3a://bucket/lakemount/lake/")
    assert [r.name for r in cat.list_repositories()] == ["demo", "lake"]
    assert cat.create_repository("sibling", "s3://bucket/lakemount/lake2").name == "sibling"
