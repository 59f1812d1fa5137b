"""The shape builders draw lakeFS's API schemas: required fields present, dates integer epoch seconds."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from lakemount.catalog import shapes
from lakemount.graveler.model import Commit, CommitID, Entry, MetaRangeID, Repository

# Required fields of each schema in lakeFS's api/swagger.yml.
REQUIRED = {
    "Repository": {"creation_date", "id", "default_branch", "storage_namespace"},
    "Commit": {"id", "parents", "committer", "message", "creation_date", "meta_range_id"},
    "Ref": {"id", "commit_id"},
    "Diff": {"type", "path", "path_type"},
    "ObjectStats": {"checksum", "physical_address", "path", "path_type", "mtime"},
    "User": {"id", "creation_date"},
    "Credentials": {"creation_date", "access_key_id"},
    "CredentialsWithSecret": {"access_key_id", "creation_date", "secret_access_key"},
    "Error": {"message"},
}


def test_item10_one_shape_per_object_as_lakefs_draws_it() -> None:
    c = Commit(CommitID("c" * 64), (CommitID("p" * 64),), MetaRangeID("m" * 64), "sum", "msg", "ann", 1700000000.75, (("k", "v"),), 2)
    e = Entry("addr", 5, "etag", 1_700_000_000_900_000_000, "text/plain", (("a", "b"),))
    when = datetime(2026, 1, 2, tzinfo=UTC)
    built = {
        "Repository": shapes.repository_json(Repository("r", "local:///ns", "main", 1700000000.5)),
        "Commit": shapes.commit_json(c),
        "Ref": shapes.ref_json("main", c.id),
        "Diff": shapes.diff_json("added", "a/b", size_bytes=3),
        "ObjectStats": shapes.object_stats_json("a/b", e),
        "User": shapes.user_json(SimpleNamespace(id="ann", created_at=when)),
        "Credentials": shapes.credentials_json(SimpleNamespace(access_key_id="AK", created_at=when)),
        "CredentialsWithSecret": shapes.credentials_json(
            SimpleNamespace(access_key_id="AK", secret_access_key="S", created_at=when), with_secret=True
        ),
        "Error": shapes.error_json("boom"),
    }
    for schema, fields in REQUIRED.items():
        assert fields <= set(built[schema]), (schema, fields - set(built[schema]))
    for schema in ("Repository", "Commit", "User", "Credentials"):
        assert type(built[schema]["creation_date"]) is int, schema
    assert built["Commit"]["creation_date"] == 1700000000
    assert "metarange_checksum" not in built["Commit"]
    assert built["ObjectStats"]["mtime"] == 1700000000 and built["ObjectStats"]["size_bytes"] == 5
    assert built["User"]["creation_date"] == int(when.timestamp())


def test_item10_shapes_name_only_fields_lakefs_knows_or_documented_extras() -> None:
    """Extras beyond the swagger are the few lakemount documents in the module docstring."""
    doc = (Path(shapes.__file__).read_text())
    extras = {"mode", "target", "category", "code", "user_id"}
    e = Entry("addr", 5, "etag", 0, "", (), 0o120777, target="x")
    keys = set(shapes.object_stats_json("l", e)) - {
        "path", "path_type", "physical_address", "checksum", "size_bytes", "mtime", "metadata", "content_type"
    }
    assert keys <= extras and re.search(r"``mode``", doc)


def test_since_without_an_offset_is_utc_on_any_host(monkeypatch: pytest.MonkeyPatch) -> None:
    # A naive time was read in the parsing host's zone, while log prints UTC: on a server
    # in UTC+2 `since=2026-01-01T10:00:00` skipped two hours of commits.
    import time

    monkeypatch.setenv("TZ", "Etc/GMT-2")
    time.tzset()
    try:
        expected = datetime(2026, 1, 1, 10, tzinfo=UTC).timestamp()
        assert shapes.parse_since("2026-01-01T10:00:00", "since") == expected
        assert shapes.parse_since("2026-01-01T10:00:00Z", "since") == expected
        assert shapes.parse_since("2026-01-01T12:00:00+02:00", "since") == expected
    finally:
        monkeypatch.undo()  # the original TZ back, then the zone it names
        time.tzset()
