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
    monkeypatch.setattr("lakemount.jobs.export.get_context", _fail)
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
