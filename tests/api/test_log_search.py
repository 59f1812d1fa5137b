"""The commit log's ``search`` (ours, issue 28): commits whose message, committer or metadata holds a text, in any
case, or whose id starts with it; paged like the unfiltered log, each page's last match leading to the next."""

from __future__ import annotations

from typing import Any

import requests

from tests.api.conftest import Served
from tests.api.test_http import AUTH


def log(served: Served, repo: str, **params: Any) -> dict[str, Any]:
    r = requests.get(f"{served.api}/api/v1/repositories/{repo}/refs/main/commits", params=params, auth=AUTH, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def test_log_search_finds_commits_by_message_metadata_and_id(served: Served, repo: Any) -> None:
    main = repo.branch("main")
    made = {}
    for name, message, meta in [
        ("etl", "Nightly ETL load", {"job": "etl-42"}),
        ("fix", "fix typo in schema", {}),
        ("tagged", "weekly snapshot", {"Source": "Kafka-Orders"}),
        ("etl2", "nightly etl load again", {"job": "etl-43"}),
    ]:
        main.object(f"{name}.txt").upload(name.encode())
        made[name] = main.commit(message=message, metadata=meta).get_commit().id
    rid = str(repo.id)

    def ids(**params: Any) -> list[str]:
        return [c["id"] for c in log(served, rid, amount=100, **params)["results"]]

    everything = ids()
    assert len(everything) == 5  # the four and the repository's first commit
    assert ids(search="NIGHTLY etl") == [made["etl2"], made["etl"]]  # the message, any case, newest first
    assert ids(search="kafka-orders") == [made["tagged"]]  # a metadata value
    assert ids(search="source") == [made["tagged"]]  # a metadata key
    assert ids(search=made["fix"][:10]) == [made["fix"]]  # an id prefix
    assert ids(search="no such words") == []
    assert ids(search="") == everything  # empty: no filter
    # Paged one match at a time: the same matches, in order, and the last page says so.
    first = log(served, rid, amount=1, search="etl")
    assert [c["id"] for c in first["results"]] == [made["etl2"]] and first["pagination"]["has_more"]
    second = log(served, rid, amount=1, search="etl", after=first["pagination"]["next_offset"])
    assert [c["id"] for c in second["results"]] == [made["etl"]] and not second["pagination"]["has_more"]
    # With a path filter, both apply.
    assert ids(search="etl", objects="etl.txt") == [made["etl"]]
