"""What S3A's requests cost the gateway, warm, in ref-store statements (stop 57).

Spark's S3A (hadoop-aws 3.3.1) deletes the fake directory markers of every parent after each write and copy, with
a DeleteObjects of a few keys, most of them absent (docs/SCALE.md, stop 54: 6.5 of them a file).  Each key is
looked up as a GET looks it up, one statement a key, and a request that finds nothing stages nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lakemount.gateway.handler import S3Gateway

from .test_hot_get import admin_gateway, call, make_gateway, statements

RECORD = "SELECT storage_namespace, default_branch, creation_date FROM lm_repositories"  # the repository's record
BRANCH_ROW = "SELECT commit_id, staging_token, sealed_tokens FROM lm_branches"  # the branch row on its own (a resolution)
LOOKUP = "SELECT 0, commit_id, staging_token, sealed_tokens"  # the branch row with the staged entry at a key


@pytest.fixture
def gateway(tmp_path: Path) -> S3Gateway:
    return admin_gateway(tmp_path)


def delete_objects(gw: S3Gateway, *keys: str) -> bytes:
    inner = "".join(f"<Object><Key>{k}</Key></Object>" for k in keys)
    xml = f"<Delete><Quiet>true</Quiet>{inner}</Delete>".encode()
    resp = call(gw, "POST", "/repo?delete", xml)
    assert resp.status == 200, resp.body
    return resp.body


def markers(n: int) -> list[str]:
    """The parents' markers S3A deletes after writing ``main/ds/_temporary/0/_temporary/attempt/part``: n of them."""
    parts = ["ds", "_temporary", "0", "_temporary", "attempt_1"]
    return ["main/" + "/".join(parts[:i]) + "/" for i in range(n, 0, -1)]


def test_a_delete_of_absent_markers_reads_each_key_once_and_stages_nothing(gateway: S3Gateway) -> None:
    assert call(gateway, "PUT", "/repo/main/ds/_temporary/0/_temporary/attempt_1/part", b"p").status == 200
    delete_objects(gateway, "main/warm/")
    with statements() as seen:
        delete_objects(gateway, *markers(5))
    # The repository's record once (SQLite: no change notices keep it), then one statement a key, and nothing else;
    # before stop 57 each key resolved the branch (the record and the row) and then read its entry: 15 statements.
    assert [s for s in seen if s.startswith(RECORD)] == [seen[0]], seen
    assert [s for s in seen if s.startswith(BRANCH_ROW)] == [], seen
    assert len([s for s in seen if s.startswith(LOOKUP)]) == 5 and len(seen) == 6, seen
    assert not [s for s in seen if s.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE"))], seen


def test_a_marker_made_by_another_process_is_deleted(gateway: S3Gateway, tmp_path: Path) -> None:
    delete_objects(gateway, *markers(3))  # this process has read the branch: its lookups are one statement each
    other = make_gateway(tmp_path)  # another worker of this host, on the same home
    assert call(other, "PUT", "/repo/main/ds/_temporary/", b"").status == 200
    assert call(gateway, "HEAD", "/repo/main/ds/_temporary/").status == 200
    delete_objects(gateway, *markers(3))
    assert call(gateway, "HEAD", "/repo/main/ds/_temporary/").status == 404
    assert call(other, "HEAD", "/repo/main/ds/_temporary/").status == 404


def test_present_and_absent_keys_of_one_request(gateway: S3Gateway) -> None:
    for key in ("a", "b/", "c/d"):
        assert call(gateway, "PUT", f"/repo/main/{key}", b"x").status == 200
    body = delete_objects(gateway, "main/a", "main/b/", "main/nothing", "main/c/", "main/c/d")
    assert b"<Error>" not in body
    for key in ("a", "b/", "c/d"):
        assert call(gateway, "HEAD", f"/repo/main/{key}").status == 404
    assert [item.path for item in gateway.app.catalog.list("repo", "main", "")] == []
