"""A PUT through the gateway, warm: no read of the repository's record, the branch row alone, or the rules (issue 36).

What is left is the staging write and one read of the branch row with the staged entry at the
path (the same-content rule of ``Catalog.stage_upload``), in one statement.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lakemount.gateway.handler import S3Gateway

from .test_hot_get import admin_gateway, call, make_gateway, statements

LOOKUPS = (
    "SELECT storage_namespace, default_branch, creation_date FROM lm_repositories",  # the repository's record
    "SELECT commit_id, staging_token, sealed_tokens FROM lm_branches",  # the branch row on its own
    "SELECT 0, NULL FROM lm_repositories",  # the protection rules
)


@pytest.fixture
def gateway(tmp_path: Path) -> S3Gateway:
    return admin_gateway(tmp_path)


def test_a_warm_put_reads_no_repository_branch_or_protection_row(gateway: S3Gateway) -> None:
    assert call(gateway, "PUT", "/repo/main/warm.bin", b"w" * 100).status == 200
    with statements() as seen:
        for i in range(3):
            assert call(gateway, "PUT", f"/repo/main/f{i}.bin", b"%d" % i * 100).status == 200
    assert [s for s in seen if s.startswith(LOOKUPS)] == [], seen
    assert len([s for s in seen if s.startswith("SELECT 0, commit_id")]) == 3, seen  # the entry at the path, with its row
    assert call(gateway, "GET", "/repo/main/f2.bin").body == b"2" * 100


def test_a_put_on_a_branch_protected_by_another_process_of_the_node_is_refused(gateway: S3Gateway, tmp_path: Path) -> None:
    assert call(gateway, "PUT", "/repo/main/warm.bin", b"w").status == 200
    other = make_gateway(tmp_path)  # another worker of this host: the same home, so the same stamps
    other.app.catalog.protection.add("repo", "main")
    refused = call(gateway, "PUT", "/repo/main/late.bin", b"x")
    assert refused.status == 403 and b"AccessDenied" in refused.body
