"""The durable record of refs in the block store, from which ``recover`` rebuilds the ref store.

Three kinds of immutable objects:

- ``<system>/repositories/<name>.json``: a repository's settings (removed on delete);
- ``<ns>/_lakefs/commits/<id>``: every commit, as JSON;
- ``<ns>/_lakefs/journal/<time_ns>-<random>.json``: one per ref change
  (branch create/update/delete, tag create/delete, default branch), with the
  old and new commit ids so replay can check the chain.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from typing import Any

from lakemount.errors import NotFound
from lakemount.graveler.committed.store import join
from lakemount.graveler.model import Commit, Repository
from lakemount.graveler.ports import BlockAdapter


class Journal:
    """Writes and reads the journal of repositories, commits and ref changes in the block store.

    The block store's errors pass through: ``NotFound`` for a missing commit or
    repository record, ``Unavailable`` when the store cannot be reached.
    """

    def __init__(self, adapter: BlockAdapter, system_namespace: str) -> None:
        self.adapter = adapter
        self.system_namespace = system_namespace

    # repositories ---------------------------------------------------------------
    def repo_url(self, name: str) -> str:
        return join(self.system_namespace, f"repositories/{name}.json")

    def record_repository(self, repo: Repository) -> None:
        doc = {
            "name": repo.name,
            "storage_namespace": repo.storage_namespace,
            "default_branch": repo.default_branch,
            "creation_date": repo.creation_date,
        }
        self.adapter.put(self.repo_url(repo.name), json.dumps(doc).encode())

    def forget_repository(self, name: str) -> None:
        self.adapter.delete(self.repo_url(name))

    def repositories(self) -> Iterator[Repository]:
        for info in self.adapter.list(join(self.system_namespace, "repositories/")):
            if not info.url.endswith(".json"):
                continue
            d = json.loads(self.adapter.get(info.url))
            yield Repository(d["name"], d["storage_namespace"], d["default_branch"], float(d["creation_date"]))

    # commits ----------------------------------------------------------------------
    def write_commit(self, namespace: str, commit: Commit) -> None:
        url = join(namespace, f"_lakefs/commits/{commit.id}")
        self.adapter.put(url, json.dumps(commit.to_json(), sort_keys=True).encode())

    def read_commit(self, namespace: str, commit_id: str) -> Commit:
        try:
            return Commit.from_json(json.loads(self.adapter.get(join(namespace, f"_lakefs/commits/{commit_id}"))))
        except NotFound:
            raise

    def commits(self, namespace: str) -> Iterator[Commit]:
        for info in self.adapter.list(join(namespace, "_lakefs/commits/")):
            yield Commit.from_json(json.loads(self.adapter.get(info.url)))

    # ref changes --------------------------------------------------------------------
    def record(self, namespace: str, event: dict[str, Any]) -> None:
        stamp = time.time_ns()
        event = {"time_ns": stamp, **event}
        url = join(namespace, f"_lakefs/journal/{stamp:020d}-{os.urandom(4).hex()}.json")
        self.adapter.put(url, json.dumps(event, sort_keys=True).encode())

    def events(self, namespace: str) -> Iterator[dict[str, Any]]:
        for info in self.adapter.list(join(namespace, "_lakefs/journal/")):
            yield json.loads(self.adapter.get(info.url))
